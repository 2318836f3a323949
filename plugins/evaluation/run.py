"""``reasonrl eval``: generate, score, summarize per benchmark; resumable by problem.

    out/<bench>/generations.jsonl  {"problem", "sample", "text", "answer", "correct"} per generation
    out/results.json               per benchmark: problems, n, avg@n, pass@k, cons@n; the sampling
    out/results.md, out/results.png  the table, and pass@k against k per benchmark

A problem whose n generations are in ``generations.jsonl`` is not generated again: a stopped run
resumes (the same command). Metrics are computed from that file alone.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from reasonrl.plugins.evaluation.eval_sets import TEMPLATES, Problem, benchmark_name, load
from reasonrl.plugins.evaluation.generate import Sampling, generate
from reasonrl.plugins.evaluation.metrics import majority, summarize
from reasonrl.plugins.evaluation.scoring import correct, final_answer, judge_code

BATCH = 16


def _done(path: Path) -> dict[str, list[dict]]:
    records: dict[str, list[dict]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                records.setdefault(record["problem"], []).append(record)
    return records


def evaluate_benchmark(
    spec: str, out: Path, endpoint, sampling: Sampling, templates: dict, system: str = "", progress=print
) -> tuple[str, dict]:
    """``endpoint()`` → (url, model name); called only when something is left to generate (a
    ``--model`` server starts then)."""
    name, problems = load(spec)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "generations.jsonl"
    done = {pid: recs for pid, recs in _done(path).items() if len(recs) >= sampling.n}
    todo = [p for p in problems if p.id not in done]
    with open(path, "a") as handle:
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            url, model = endpoint()
            texts = generate(url, model, [p.prompt(templates[p.kind]) for p in batch], sampling, system)
            for problem, samples in zip(batch, texts):
                for record in score(problem, samples):
                    handle.write(json.dumps(record) + "\n")
            handle.flush()
            progress(f"[eval] {name}: {len(problems) - len(todo) + start + len(batch)}/{len(problems)} problems")
    return name, summarize_file(path, problems)


def score(problem: Problem, samples: list[str]) -> list[dict]:
    answers = [final_answer(problem, text) for text in samples]
    if problem.kind == "code":
        verdicts = judge_code(problem, answers)
    else:
        verdicts = [correct(problem, answer) for answer in answers]
    return [
        {"problem": problem.id, "sample": i, "text": text, "answer": answer, "correct": ok}
        for i, (text, answer, ok) in enumerate(zip(samples, answers, verdicts))
    ]


def summarize_file(path: Path, problems: list[Problem]) -> dict:
    """The benchmark's metrics from its saved generations (nothing regenerated or rescored but the
    majority answer of each problem)."""
    records = _done(path)
    per_problem = []
    for problem in problems:
        samples = sorted(records.get(problem.id, []), key=lambda r: r["sample"])
        if not samples:
            raise ValueError(f"{path}: no generations for problem {problem.id}")
        vote = None
        if problem.kind != "code":
            chosen = majority([r["answer"] for r in samples])
            vote = next((r["correct"] for r in samples if r["answer"] == chosen), False) if chosen else False
        per_problem.append(([r["correct"] for r in samples], vote))
    return summarize(per_problem)


def samples_for(name: str, sampling: Sampling, n_by_benchmark: dict[str, int]) -> Sampling:
    """The sampling of benchmark ``name``: a report's own n where a key of ``n_by_benchmark`` is in
    the name (lower case, without "-" and "_"; the longest key wins), else ``sampling``'s."""
    plain = name.lower().replace("-", "").replace("_", "")
    key = max((k for k in n_by_benchmark if k in plain), key=len, default=None)
    return replace(sampling, n=int(n_by_benchmark[key])) if key else sampling


def evaluate(
    specs: list[str],
    out: Path,
    endpoint,
    model: str,
    sampling: Sampling,
    templates=None,
    system="",
    progress=print,
    n_by_benchmark: dict[str, int] | None = None,
) -> dict:
    """Every benchmark of ``specs``; ``endpoint()`` → (url, served name), asked when generating."""
    out.mkdir(parents=True, exist_ok=True)
    templates = {**TEMPLATES, **(templates or {})}
    results = {"model": model, "sampling": asdict(sampling), "system": system, "benchmarks": {}}
    for spec in specs:
        own = samples_for(benchmark_name(spec), sampling, n_by_benchmark or {})
        name, metrics = evaluate_benchmark(spec, out, endpoint, own, templates, system, progress)
        results["benchmarks"][name] = metrics
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "results.md").write_text(table({out.name: results}))
    plot_pass_at_k(results, out / "results.png")
    return results


def table(runs: dict[str, dict]) -> str:
    """Markdown: one row per (benchmark, metric), one column per run."""
    names = list(runs)
    rows = []
    for bench in dict.fromkeys(b for r in runs.values() for b in r["benchmarks"]):
        metrics = dict.fromkeys(m for r in runs.values() for m in r["benchmarks"].get(bench, {}) if "@" in m)
        for metric in metrics:
            cells = [runs[n]["benchmarks"].get(bench, {}).get(metric) for n in names]
            rows.append(f"| {bench} | {metric} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    head = "| benchmark | metric | " + " | ".join(names) + " |\n|---|---|" + "---:|" * len(names)
    return head + "\n" + "\n".join(rows) + "\n"


def plot_pass_at_k(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for bench, metrics in results["benchmarks"].items():
        ks = sorted(int(m.split("@")[1]) for m in metrics if m.startswith("pass@"))
        axis.plot(ks, [metrics[f"pass@{k}"] for k in ks], marker="o", label=bench)
    axis.set_xscale("log", base=2)
    axis.set_xlabel("k")
    axis.set_ylabel("pass@k (unbiased)")
    axis.set_ylim(0, 1.02)
    axis.set_title(f"{Path(str(results['model'])).name}: n = {results['sampling']['n']}")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def compare(folders: list[Path], out: Path | None = None) -> str:
    """The results of several runs side by side (a table; with ``out``, also a plot of avg@n)."""
    runs = {}
    for folder in folders:
        path = Path(folder) / "results.json"
        if not path.exists():
            raise FileNotFoundError(f"{folder}: no results.json (run reasonrl eval run --out {folder} first)")
        name = Path(folder).name if Path(folder).name not in runs else str(folder)
        runs[name] = json.loads(path.read_text())
    text = table(runs)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        _plot_compare(runs, out)
    return text


def _plot_compare(runs: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(dict.fromkeys(b for r in runs.values() for b in r["benchmarks"]))
    width = 0.8 / max(len(runs), 1)
    figure, axis = plt.subplots(figsize=(max(5, 1.5 * len(benches)), 4))
    for i, (name, run) in enumerate(runs.items()):
        values = []
        for bench in benches:
            metrics = run["benchmarks"].get(bench, {})
            values.append(next((v for m, v in metrics.items() if m.startswith("avg@")), 0.0))
        axis.bar([b + i * width for b in range(len(benches))], values, width, label=name)
    axis.set_xticks([b + width * (len(runs) - 1) / 2 for b in range(len(benches))], benches)
    axis.set_ylabel("avg@n")
    axis.set_ylim(0, 1.02)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
