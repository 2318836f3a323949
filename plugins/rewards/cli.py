"""``reasonrl judge`` and ``reasonrl difficulty calibrate`` (formats: ``docs/judge.md``)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from reasonrl.contracts import CliCommand
from reasonrl.errors import UserError


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line; bad input raises :class:`UserError`
    naming the file (and line)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
    except FileNotFoundError:
        raise UserError(path, "no such file") from None
    except IsADirectoryError:
        raise UserError(path, "is a directory, not a JSONL file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(path, f"cannot be read: {error}") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise UserError(f"{path}:{number}", f"not valid JSON: {getattr(error, 'msg', error)}") from None
        if not isinstance(record, dict):
            raise UserError(f"{path}:{number}", f"must be a JSON object, got {type(record).__name__}")
        records.append((number, record))
    return records


def progress_bar(total: int, label: str, unit: str):
    """tqdm on stderr: done/total, rate, ETA."""
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit=unit, file=sys.stderr)


def _configure_judge(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--problems", type=Path, required=True, help="JSONL: problem_id + tests ({inputs, outputs} or {assertions})"
    )
    parser.add_argument(
        "--solutions", type=Path, required=True, help="JSONL: problem_id, solution_id, language (python|cpp), code"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSONL verdicts, one line per solution, in input order")
    parser.add_argument("--backend", choices=("local", "sandbox_fusion"), default="local")
    parser.add_argument("--url", default=None, help="SandboxFusion /run_code URL (--backend sandbox_fusion)")
    parser.add_argument("--workers", type=int, default=None, help="sandboxed runners (default: one per core)")
    parser.add_argument("--time-limit", type=float, default=2.0, help="CPU seconds per test (default 2)")
    parser.add_argument("--memory-mb", type=int, default=1024, help="address-space limit per run (default 1024)")
    parser.add_argument(
        "--float-tolerance",
        type=float,
        default=None,
        help="compare numeric stdout tokens within this relative tolerance",
    )


def summary_table(results) -> str:
    from reasonrl.plugins.rewards.judge import Verdict

    counts = Counter(v for r in results for v in r.verdicts)
    tests = sum(counts.values())
    lines = [f"{'verdict':<16}{'tests':>10}{'share':>9}"]
    for verdict in Verdict:
        lines.append(f"{verdict.value:<16}{counts.get(verdict, 0):>10}{counts.get(verdict, 0) / max(1, tests):>9.1%}")
    solved = sum(1 for r in results if r.verdicts and all(r.passed))
    lines.append(
        f"{'all tests pass':<16}{solved:>10}{solved / max(1, len(results)):>9.1%}  of {len(results)} solutions"
    )
    return "\n".join(lines)


def _check_number(option: str, value, low, *, above: bool = False) -> None:
    """``value`` ≥ ``low`` (> with ``above``) and finite, else a :class:`UserError` naming ``option``."""
    if value is None:
        return
    ok = math.isfinite(value) and (value > low if above else value >= low)
    if not ok:
        raise UserError(option, f"must be {'>' if above else '≥'} {low}, got {value}")


def _check_output(path: Path) -> None:
    """``--out`` can be written (checked before judging; nothing is created yet)."""
    if path.is_dir():
        raise UserError("--out", f"{path} is a directory")
    existing = path.parent.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError("--out", f"cannot write under {existing}")


def load_problems(path: Path) -> dict:
    from reasonrl.plugins.rewards.judge.formats import problem_from_json

    problems = {}
    for number, record in read_jsonl(path):
        if "problem_id" not in record:
            raise UserError(f"{path}:{number}", "no 'problem_id' field")
        if "tests" not in record and "input_output" not in record:
            raise UserError(f"{path}:{number}", "no 'tests' field ({inputs, outputs} or {assertions})")
        try:
            problem = problem_from_json(record)
        except (ValueError, TypeError) as error:
            raise UserError(f"{path}:{number}", f"bad tests: {error}") from None
        problems[problem.problem_id] = problem
    return problems


def load_submissions(path: Path, problems: dict, problems_path: Path) -> list:
    from reasonrl.plugins.rewards.judge import Submission
    from reasonrl.plugins.rewards.judge.formats import LANGUAGES

    submissions = []
    for index, (number, record) in enumerate(read_jsonl(path)):
        where = f"{path}:{number}"
        if "problem_id" not in record:
            raise UserError(where, "no 'problem_id' field")
        problem_id = str(record["problem_id"])
        if problem_id not in problems:
            raise UserError(where, f"unknown problem {problem_id!r} (not in {problems_path})")
        if "code" not in record:
            raise UserError(where, "no 'code' field")
        if not isinstance(record["code"], str):
            raise UserError(where, f"'code' must be a string, got {type(record['code']).__name__}")
        language = record.get("language", "python")
        if language not in LANGUAGES:
            raise UserError(where, f"unknown language {language!r}: use one of {', '.join(LANGUAGES)}")
        solution_id = str(record.get("solution_id", index))
        submissions.append(Submission(problems[problem_id], record["code"], language, solution_id))
    return submissions


def _judge_limits(args: argparse.Namespace):
    from reasonrl.plugins.rewards.judge import JudgeLimits

    _check_number("--time-limit", args.time_limit, 0.01)
    _check_number("--memory-mb", args.memory_mb, 64)
    _check_number("--workers", args.workers, 1)
    _check_number("--float-tolerance", args.float_tolerance, 0.0)
    try:
        return JudgeLimits(time_s=args.time_limit, memory_mb=args.memory_mb, float_tolerance=args.float_tolerance)
    except ValueError as error:  # a limit JudgeLimits refuses that the checks above missed
        raise UserError("limits", str(error)) from None


def _run_judge(args: argparse.Namespace) -> int:
    from reasonrl.plugins.rewards.judge import LocalJudge, SandboxUnavailable
    from reasonrl.plugins.rewards.judge.sandbox_fusion import SandboxFusionJudge

    # every input is checked before a sandbox starts
    limits = _judge_limits(args)
    if args.backend == "sandbox_fusion":
        if not args.url:
            raise UserError("--url", "is required with --backend sandbox_fusion")
        if not args.url.startswith(("http://", "https://")):
            raise UserError("--url", f"must be an http(s) URL, got {args.url!r}")
    _check_output(args.out)
    problems = load_problems(args.problems)
    submissions = load_submissions(args.solutions, problems, args.problems)

    if args.backend == "sandbox_fusion":
        judge = SandboxFusionJudge(args.url, limits)
    else:
        judge = LocalJudge(limits, workers=args.workers)
    start = time.monotonic()
    try:
        with judge:
            judge.probe()  # a sandbox that cannot start here stops the command, not every test
            with progress_bar(len(submissions), "judge", " runs") as progress:
                results = judge.judge_sync(submissions, on_result=lambda _result: progress.update())
    except SandboxUnavailable as error:
        print(
            f"reasonrl judge: the judge's sandbox cannot start here, nothing was judged: {error}\n"
            "(requirements: docs/judge.md; no verdicts written)",
            file=sys.stderr,
        )
        return 2
    elapsed = time.monotonic() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as handle:
        for result in results:
            handle.write(json.dumps(result.to_json()) + "\n")
    print(summary_table(results))
    print(
        f"{len(results)} solutions of {len(problems)} problems in {elapsed:.2f} s ({len(results) / max(elapsed, 1e-9):.1f} solutions/s) -> {args.out}"
    )
    return 0


def _configure_difficulty(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="<action>", required=True)
    calibrate = actions.add_parser(
        "calibrate", help="cluster each problem's tests into difficulty levels from judge verdicts"
    )
    calibrate.add_argument(
        "--verdicts", type=Path, required=True, help="JSONL from reasonrl judge (many solutions per problem)"
    )
    calibrate.add_argument(
        "--out", type=Path, required=True, help="JSONL: problem_id + calibration (levels, level_scores, pass_rates)"
    )
    calibrate.add_argument("--levels", type=int, default=3, help="difficulty levels L (default 3)")
    calibrate.add_argument(
        "--level-scores", default=None, help="comma-separated scores, easiest level first (default: equal split)"
    )
    calibrate.add_argument(
        "--plots",
        type=Path,
        default=None,
        help="folder for one PNG per problem (default: <out>.plots/; 'none' to skip)",
    )


def calibrate_records(
    verdict_records: list[dict], levels: int, level_scores: list[float] | None
) -> tuple[list[dict], int]:
    """One calibration per problem from verdict lines; lines with a judge error are left out."""
    from reasonrl.plugins.rewards.difficulty import calibrate

    matrices: dict[str, list[list[bool]]] = defaultdict(list)
    skipped = 0
    for record in verdict_records:
        if "judge_error" in record["verdicts"]:
            skipped += 1
            continue
        matrices[str(record["problem_id"])].append([v == "passed" for v in record["verdicts"]])
    out = []
    for problem_id, matrix in matrices.items():
        calibration = calibrate(matrix, levels=levels, level_scores=level_scores)
        out.append({"problem_id": problem_id, "difficulty": calibration.to_json()})
    return out, skipped


def plot_calibration(problem_id: str, calibration: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates, levels = calibration["pass_rates"], calibration["levels"]
    figure, axis = plt.subplots(figsize=(max(4.0, 0.25 * len(rates) + 2), 3))
    colours = plt.get_cmap("viridis", max(2, len(calibration["level_scores"])))
    for level in sorted(set(levels)):
        xs = [i for i, lv in enumerate(levels) if lv == level]
        axis.bar(
            xs,
            [rates[i] for i in xs],
            color=colours(level),
            label=f"level {level} (score {calibration['level_scores'][level]:.2f})",
        )
    axis.set_xlabel("test index")
    axis.set_ylabel("pass rate")
    axis.set_ylim(0, 1.05)
    axis.set_title(f"{problem_id}: {calibration['num_solutions']} solutions, level 0 = easiest")
    axis.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _run_difficulty(args: argparse.Namespace) -> int:
    scores = [float(s) for s in args.level_scores.split(",")] if args.level_scores else None
    try:
        records, skipped = calibrate_records([r for _, r in read_jsonl(args.verdicts)], args.levels, scores)
    except ValueError as error:
        print(f"reasonrl difficulty calibrate: {error}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    plots = None if str(args.plots) == "none" else (args.plots or args.out.with_suffix(".plots"))
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
        with progress_bar(len(records), "plots", " plots") as progress:
            for record in records:
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in record["problem_id"])
                plot_calibration(record["problem_id"], record["difficulty"], plots / f"{safe}.png")
                progress.update()
    print(
        f"{len(records)} problems calibrated ({skipped} verdict lines with a judge error left out) -> {args.out}"
        + (f", plots in {plots}" if plots else "")
    )
    return 0


JUDGE_COMMAND = CliCommand(
    name="judge",
    help="run solutions against tests in the sandboxed judge: --problems P.jsonl --solutions S.jsonl --out V.jsonl",
    configure=_configure_judge,
    run=_run_judge,
)
DIFFICULTY_COMMAND = CliCommand(
    name="difficulty",
    help="test-difficulty calibration (MiMo §3.3.1): reasonrl difficulty calibrate --verdicts V.jsonl --out calib.jsonl",
    configure=_configure_difficulty,
    run=_run_difficulty,
)
