"""Verdict prompts: the reports' templates (``templates.yaml``, each with its source) and how the
policy's answer enters them as fenced data (LongCat §3.3, Llama-Nemotron §5.1, Kimi k1.5 §2.3.5).

The policy's text is untrusted. Three rules keep it data:
- only the **final answer** reaches the judge (after the last ``</think>``, the last ``\\boxed{}``
  when there is one, at most ``max_answer_chars`` from its end), so reasoning that copies the
  reference or argues with the judge is never shown;
- the answer sits between fence tags carrying a fresh random tag per request, which the policy
  cannot know and so cannot close early;
- anything in the answer that looks like a fence or a verdict tag is defanged (``<`` → ``‹``), so a
  judge quoting the answer cannot be read as having given a verdict.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml

from reasonrl.answer_text import last_boxed

BUILT_IN = Path(__file__).with_name("templates.yaml")
PLACEHOLDERS = ("{question}", "{reference}", "{answer}", "{open}", "{close}")
#: fence and verdict lookalikes in untrusted text (any case, spaces allowed after "<" and "/")
_TAG_LOOKALIKE = re.compile(r"<(\s*/?\s*(?:verdict|fenced[-_\w]*))", re.IGNORECASE)


class TemplateError(ValueError):
    """A template file or template that cannot be used (named key, reason)."""


@dataclass(frozen=True)
class VerdictTemplate:
    """One judge prompt: ``system`` + ``user`` with placeholders, and the verdict words."""

    name: str
    source: str
    system: str
    user: str
    yes_words: tuple[str, ...]
    no_words: tuple[str, ...]

    def messages(self, question: str, reference: str, answer: str, fence_tag: str | None = None) -> list[dict]:
        """Chat messages for one (question, reference, answer); ``answer`` is fenced and defanged."""
        tag = fence_tag or secrets.token_hex(6)
        fields = {
            "question": defang(question),
            "reference": reference,
            "answer": defang(answer),
            "open": f"<fenced-{tag}>",
            "close": f"</fenced-{tag}>",
        }
        return [
            {"role": "system", "content": _fill(self.system, fields)},
            {"role": "user", "content": _fill(self.user, fields)},
        ]


def _fill(text: str, fields: dict[str, str]) -> str:
    # one pass over the template's own placeholders: braces inside the answer are never expanded
    return re.sub(r"\{(question|reference|answer|open|close)\}", lambda m: fields[m.group(1)], text)


def defang(text: str) -> str:
    """``text`` with fence- and verdict-like tags made inert (``<verdict>`` → ``‹verdict>``)."""
    return _TAG_LOOKALIKE.sub(lambda m: "‹" + m.group(1), text)


def final_answer(response: str, max_chars: int) -> str:
    """What the judge sees of a response: after the last ``</think>``; of that, the last
    ``\\boxed{...}`` if any; at most ``max_chars`` characters, from the end."""
    tail = response.rpartition("</think>")[2]  # the whole response when it has no </think>
    boxed = last_boxed(tail)
    answer = (boxed if boxed is not None else tail).strip()
    return answer[-max_chars:]


def load_templates(path: str | Path | None = None) -> dict[str, VerdictTemplate]:
    """Templates by name from ``path`` (YAML), or the built-in ones; each one checked."""
    source = Path(path) if path else BUILT_IN
    try:
        raw = yaml.safe_load(source.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise TemplateError(f"{source}: cannot read the template file: {error}") from error
    return parse_templates(raw, source)


def parse_templates(raw: object, source: str | Path) -> dict[str, VerdictTemplate]:
    """Templates by name from a mapping as a template file holds it (``source`` names it in errors)."""
    if not isinstance(raw, dict) or not raw:
        raise TemplateError(f"{source}: expected a mapping of template names to templates")
    return {name: _template(Path(source), name, body) for name, body in raw.items()}


def _template(source: Path, name: str, body: dict) -> VerdictTemplate:
    keys = ("source", "system", "user", "yes_words", "no_words")
    missing = [k for k in keys if not isinstance(body, dict) or k not in body]
    if missing:
        raise TemplateError(f"{source}: template {name!r} lacks {', '.join(missing)}")
    text = body["system"] + body["user"]
    absent = [p for p in PLACEHOLDERS if p not in text]
    if absent:
        raise TemplateError(f"{source}: template {name!r} lacks the placeholders {', '.join(absent)}")
    if text.count("{answer}") != 1 or body["user"].find("{open}") > body["user"].find("{answer}"):
        raise TemplateError(f"{source}: template {name!r}: {{answer}} must appear once, after {{open}}, in user")
    words = [w for k in ("yes_words", "no_words") for w in (body[k] or [])]
    if not all(isinstance(w, str) for w in words):
        raise TemplateError(f"{source}: template {name!r}: verdict words must be strings (quote yes / no in YAML)")
    yes, no = (tuple(w.lower() for w in body[k]) for k in ("yes_words", "no_words"))
    if not yes or not no or set(yes) & set(no):
        raise TemplateError(f"{source}: template {name!r}: yes_words and no_words must be non-empty and disjoint")
    return VerdictTemplate(name, str(body["source"]), body["system"], body["user"], yes, no)
