"""A curation config (one per report in ``reports/``): the source's column mapping, the stages in
order with their settings, and how rows become verl's (``output``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from reasonrl.plugins.curation.stage import CurationError, Stage

REPORTS = Path(__file__).resolve().parent / "reports"


@dataclass
class Context:
    """What stages need from outside the config: evaluation questions, a model to answer."""

    eval_questions: list[str] = field(default_factory=list)
    eval_sources: tuple[str, ...] = ()
    answerer: Callable | None = None
    answerer_name: str = ""


def _decontaminate(settings: dict, context: Context) -> Stage:
    from reasonrl.plugins.curation.decontamination import Decontaminate

    if not context.eval_questions:
        raise CurationError("stage decontaminate needs evaluation sets: --eval FILE (or drop the stage)")
    return Decontaminate(context.eval_questions, sources=context.eval_sources, **settings)


def _easy_to_hack(settings: dict, context: Context) -> Stage:
    from reasonrl.plugins.curation.easy_to_hack import EasyToHack

    if context.answerer is None:
        raise CurationError("stage easy_to_hack needs a model to answer: --answer-url URL --answer-model NAME")
    return EasyToHack(context.answerer, model=context.answerer_name, **settings)


def _plain(module: str, name: str) -> Callable[[dict, Context], Stage]:
    def build(settings: dict, _context: Context) -> Stage:
        import importlib

        return getattr(importlib.import_module(f"reasonrl.plugins.curation.{module}"), name)(**settings)

    return build


STAGES: dict[str, Callable[[dict, Context], Stage]] = {
    "decontaminate": _decontaminate,
    "exact_dedup": _plain("dedup", "ExactDedup"),
    "near_dedup": _plain("dedup", "NearDedup"),
    "question_types": _plain("filters", "QuestionTypeFilter"),
    "verifiable_answer": _plain("filters", "VerifiableAnswer"),
    "easy_to_hack": _easy_to_hack,
    "code_tests": _plain("code_tests", "CodeTests"),
    "difficulty": _plain("filters", "DifficultyFilter"),
}


def load_config(name_or_path: str) -> dict[str, Any]:
    """A report's config by name (``mimo``, ``kimi_k15``, ``nemotron``, ``longcat``) or a YAML file."""
    path = Path(name_or_path)
    if not path.exists():
        path = REPORTS / f"{name_or_path}.yaml"
        if not path.exists():
            known = sorted(p.stem for p in REPORTS.glob("*.yaml"))
            raise CurationError(f"--config {name_or_path}: neither a file nor a report config ({', '.join(known)})")
    config = yaml.safe_load(path.read_text()) or {}
    for key in ("fields", "stages"):
        if key not in config:
            raise CurationError(f"{path}: no {key!r}")
    return config


def build_stages(config: dict, context: Context) -> list[Stage]:
    """Every stage of ``config`` built (bad names and settings named before any row is read)."""
    stages = []
    for number, item in enumerate(config["stages"], 1):
        name, settings = (stage_name(item), item[stage_name(item)]) if isinstance(item, dict) else (str(item), {})
        if name not in STAGES:
            raise CurationError(f"stages[{number}]: unknown stage {name!r}; known: {', '.join(STAGES)}")
        try:
            stages.append(STAGES[name](dict(settings or {}), context))
        except CurationError:
            raise
        except ImportError as error:  # datasketch is the curation extra
            raise CurationError(f"stage {name} needs {error.name}: pip install 'reasonrl[curation]'") from None
        except TypeError as error:  # an unknown setting
            raise CurationError(f"stages[{number}] {name}: {error}") from None
        except ValueError as error:
            raise CurationError(f"stages[{number}] {name}: {error}") from None
    return stages


def stage_name(item) -> str:
    return next(iter(item)) if isinstance(item, dict) else str(item)


def skip_stages(stages: list, skip: list[str]) -> list:
    """``stages`` without those named in ``skip`` (a name the config does not hold is an error)."""
    names = [stage_name(item) for item in stages]
    unknown = set(skip) - set(names)
    if unknown:
        raise CurationError(f"--skip {', '.join(sorted(unknown))}: not a stage of this config ({', '.join(names)})")
    return [item for item, name in zip(stages, names) if name not in skip]
