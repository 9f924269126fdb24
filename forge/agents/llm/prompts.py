"""Rendering the coder's and judge's prompts from the jinja2 templates in ``agents/prompts``."""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from forge.agents.llm.client import context_tokens
from forge.agents.roles import HistoryItem
from forge.core.op_brief import OpBrief
from forge.core.slack_rules import (
    CASE_NAMES,
    EXACT_MARGIN,
    LONGEST_WIDENED,
    TINY_OUTPUT_ATOLS,
    TINY_OUTPUT_REL_ERROR,
)

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"
_ROWWISE = re.compile(r"softmax|norm|\.sum\(|\.mean\(|amax|logsumexp|torch\.(sum|mean|max|var)\b")


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # prompts, not HTML
    )
    # the verifier's own constants, so the brief states the rule it applies
    env.globals.update(
        case_names=CASE_NAMES,
        exact_margin=EXACT_MARGIN,
        longest_widened=LONGEST_WIDENED,
        tiny_atols=TINY_OUTPUT_ATOLS,
        tiny_error=TINY_OUTPUT_REL_ERROR,
    )
    return env


def render(name: str, **values: Any) -> str:
    return str(_env().get_template(name).render(**values))


def category(op_source: str) -> str:
    """The op's family, to pick an example of the same kind: rowwise or pointwise."""
    return "rowwise" if _ROWWISE.search(op_source) else "pointwise"


def example(backend: str, op_source: str) -> str:
    kind = backend if backend in ("triton", "cuda") else "cpp"
    path = PROMPTS / "examples" / f"{kind}_{category(op_source)}.txt"
    return path.read_text().strip()


# An op carved from a model lists the instances it stands for (``_BUILT_WITH``); past this many, a
# prompt shows the first and the last and says how many it left out: a model's 80 layers would
# add a page to every request, and the coder needs only the instance it is given.
_SHOWN_INSTANCES = 4


def op_shown(op_source: str) -> str:
    """The op file as a prompt shows it: whole, but for a carved op's instance table past
    _SHOWN_INSTANCES entries, cut to its first and last ones with a line saying how many more
    (found through the parsed source's positions, not its text)."""
    try:
        tree = ast.parse(op_source)
    except SyntaxError:
        return op_source
    table = next(
        (
            n.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_BUILT_WITH" for t in n.targets)
            and isinstance(n.value, ast.Dict)
        ),
        None,
    )
    if table is None or len(table.keys) <= _SHOWN_INSTANCES or any(k is None for k in table.keys):
        return op_source
    lines = op_source.split("\n")
    keep, last = table.values[_SHOWN_INSTANCES - 2], table.keys[-1]
    assert keep.end_lineno is not None and last is not None
    cut = len(table.keys) - _SHOWN_INSTANCES  # the first _SHOWN_INSTANCES - 1 and the last are shown
    note = f"    # ... {cut} more instances, left out of this prompt (the op file lists them all)"
    return "\n".join([*lines[: keep.end_lineno], note, *lines[last.lineno - 1 :]])


# A source in a prompt gets at most this share of the model's context (the prompt also holds the
# reference, the brief with Inductor's code, the history and the reply).
_SOURCE_SHARE = 0.25
_CHARS_PER_TOKEN = 3  # code tokenises densely: 3 characters a token is the safe side
_UNKNOWN_CONTEXT_TOKENS = 32_768  # a model litellm does not know: assume a modest context
_MIN_SOURCE_CHARS = 12_000
_ERROR_LINE = re.compile(r"line (\d+)|\.(?:py|cpp|cu):(\d+)")
_AROUND_ERROR = 40  # lines kept on each side of the line the last error names


@dataclass(frozen=True)
class FittedSource:
    """A source as a prompt shows it: whole, cut with a note saying how, or as a unified diff
    from another attempt's source the prompt shows whole (``diff_of``: that attempt's id)."""

    text: str
    cut: bool = False
    note: str = ""
    diff_of: int | None = None


def source_limit(model: str) -> int:
    """How many characters of one source a prompt for ``model`` carries: a quarter of its input
    context as litellm knows it (``max_input_tokens``), else of a 32k-token context."""
    tokens = context_tokens(model) or _UNKNOWN_CONTEXT_TOKENS
    return max(_MIN_SOURCE_CHARS, int(tokens * _CHARS_PER_TOKEN * _SOURCE_SHARE))


def fit_source(source: str, limit: int, error_text: str | None = None) -> FittedSource:
    """``source`` whole when it fits in ``limit`` characters; else its head and, when
    ``error_text`` names a line, the lines around that line, with a note of what was left out."""
    if len(source) <= limit:
        return FittedSource(source)
    lines = source.splitlines()
    found = _ERROR_LINE.search(error_text or "")
    focus = int(found.group(1) or found.group(2)) - 1 if found else None
    if focus is not None and 0 <= focus < len(lines):
        start = max(0, focus - _AROUND_ERROR)
        window = lines[start : focus + _AROUND_ERROR]
        head = _lines_within(lines[:start], limit - sum(len(x) + 1 for x in window) - 200)
        kept = (
            [*head, f"# ... lines {len(head) + 1}-{start} left out ...", *window]
            if start > len(head)
            else lines[: start + len(window)]
        )
        shown = len(head) + len(window)
        where = f"lines {start + 1}-{start + len(window)}"
        note = f"{len(lines)} lines, cut to {shown}: the start and {where} around the error"
        return FittedSource("\n".join(kept), True, note)
    head = _lines_within(lines, limit)
    return FittedSource("\n".join(head), True, f"{len(lines)} lines, cut to its first {len(head)}")


def as_diff_from(base: HistoryItem, item: HistoryItem, shown: FittedSource) -> FittedSource:
    """``item``'s source as a unified diff from ``base``'s (shown whole in the same prompt) where
    that is at most half as long as ``shown``: a round that refines the session's fastest attempt
    restated both whole, two copies of one kernel (64k characters a prompt on an attention op)."""
    if not (base.source and item.source and base.attempt_id) or shown.cut:
        return shown
    lines = difflib.unified_diff(base.source.splitlines(), item.source.splitlines(), lineterm="", n=3)
    diff = "\n".join(list(lines)[2:])  # no file header lines
    if not diff or 2 * len(diff) > len(shown.text):
        return shown
    return FittedSource(diff, diff_of=base.attempt_id)


def _lines_within(lines: list[str], limit: int) -> list[str]:
    kept, used = [], 0
    for line in lines:
        used += len(line) + 1
        if used > limit:
            break
        kept.append(line)
    return kept


# A kernel this close to the roofline bound has a few percent left, about what the timing's noise
# is: the prompts say so, so a session stops instead of micro-tuning noise.
AT_ROOFLINE = 0.8


def standing(history: list[HistoryItem], brief: OpBrief | None) -> str | None:
    """What the prompts say about the room left: the best timed attempt's share of the roofline
    bound, or eager's; None while there is room, or where no bound holds for the op (judged warm
    with no cache bandwidth measured: its data comes from cache, and DRAM's bound bounds nothing).
    An attempt's ``roofline_fraction`` is its judged regime's (``judged_roofline``)."""
    timed = [h for h in history if h.figures is not None and h.figures.timed and h.roofline_fraction]
    best = max(timed, key=lambda h: h.roofline_fraction or 0.0) if timed else None
    if best is not None and best.roofline_fraction is not None and AT_ROOFLINE <= best.roofline_fraction <= 1.0:
        paired = best.figures.vs_eager if best.figures is not None else None
        if paired is None or paired.low <= 1.0:  # near the bound, but no kernel to bank yet: no stop on it
            return (
                f"Attempt {best.attempt_id} runs at {best.roofline_fraction:.0%} of this machine's roofline bound, "
                "but its speedup does not count yet (its interval reaches 1.0x): near the bound, what is left is "
                "a structural change (fewer passes over memory, a different algorithm), not launch settings; do "
                "not stop on its figure alone."
            )
        return (
            f"Attempt {best.attempt_id} already runs at {best.roofline_fraction:.0%} of this machine's roofline "
            "bound: what is left is a few percent, about the size of the timing noise. Stop (the judge answers "
            '"continue": false) unless a structural change (fewer passes over memory, a different algorithm) can '
            "still pay; do not tune launch settings for it."
        )
    roof = brief.roofline if brief is not None else None
    if roof is not None and brief is not None and brief.regime != "cold" and roof.level != "cache":
        roof = None  # judged warm, and only DRAM's bound: it bounds nothing here
    eager = roof.fraction_eager if roof is not None and roof.holds else None
    if eager is not None and eager >= AT_ROOFLINE:
        return (
            f"Eager already runs at {eager:.0%} of this machine's roofline bound: by the measured figures no kernel "
            f"is more than {1 / eager:.2f}x faster here. Fusing away passes over memory is the room; stop once a "
            "candidate is near the bound, unless eager reads its data more than once (then the data came from a "
            "nearer cache than the bound assumes, and a one-pass kernel can beat it) or its output outgrows the "
            "last-level cache (streaming stores skip the write-allocate read the copy figure includes)."
        )
    return None


_DIFF_LIMIT = 6000  # characters of a diff the judge gets; a rewrite is better read whole above it


@dataclass(frozen=True)
class SourceChange:
    parent_id: int
    diff: str


def change_from_previous(history: list[HistoryItem], item: HistoryItem) -> SourceChange | None:
    """The unified diff from the attempt before ``item`` (the last earlier one with a source) to
    ``item``: what the judge's advice led to. None for a first attempt, an unchanged source, or a
    diff too long to be read as a change (a rewrite: the whole source is above it)."""
    earlier = [h for h in history if h is not item and h.source and h.status != "invalid_reply" and h.attempt_id]
    earlier = [h for h in earlier if (h.attempt_id or 0) < (item.attempt_id or 0)]
    if not earlier or not item.source:
        return None
    before = earlier[-1]
    lines = difflib.unified_diff(before.source.splitlines(), item.source.splitlines(), lineterm="", n=2)
    diff = "\n".join(list(lines)[2:])  # no file header lines
    if not diff or len(diff) > _DIFF_LIMIT:
        return None
    return SourceChange(before.attempt_id or 0, diff)
