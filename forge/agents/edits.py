"""A candidate written as edits of an earlier attempt: SEARCH/REPLACE hunks applied to that
attempt's source, giving a whole file that is verified like any other.

A coder that changes a block size or one loop of an 18k-character kernel need not write the
kernel out again: the reply's tokens were the largest share of a session's (a reply of two whole
kernels, 5-15k tokens). Each hunk's SEARCH text must occur exactly once in the source as the
hunks before it left it; an edit that does not apply is a reason, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# the rest of an ```edit fence's line: ```edit 12, ```edit attempt 12
_TARGET = re.compile(r"[ \t]*(?:attempt[ \t]*)?#?(\d+)\b", re.IGNORECASE)
_MARKER = re.compile(r"^(?:<{5,9} ?SEARCH|={5,9}[ \t]*$|>{5,9} ?REPLACE)", re.MULTILINE)
_HUNK = re.compile(r"^<{5,9} ?SEARCH[^\n]*\n(.*?)^={5,9}[ \t]*\n(.*?)^>{5,9} ?REPLACE[^\n]*$", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Edited:
    """The source the edits gave, or why they gave none."""

    source: str | None
    reason: str | None = None


def edit_target(info: str) -> int | None:
    """The attempt an ```edit block's fence line names (the text after ``edit``), else None."""
    found = _TARGET.match(info)
    return int(found.group(1)) if found else None


def _line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text``, its newline excluded."""
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def _loose_matches(text: str, search: str) -> list[tuple[int, int]]:
    """Where ``search``'s lines occur in ``text`` as whole lines, trailing whitespace ignored on
    both sides (a model's copy of a line often drops it): (start, end) character spans."""
    want = [line.rstrip() for line in search.strip("\n").split("\n")]
    lines = text.split("\n")
    spans = _line_spans(text)
    found = []
    for i in range(len(lines) - len(want) + 1):
        if all(lines[i + k].rstrip() == want[k] for k in range(len(want))):
            found.append((spans[i][0], spans[i + len(want) - 1][1]))
    return found


def _apply_hunk(text: str, search: str, replace: str) -> Edited:
    """``text`` with ``search`` replaced, or why it could not be."""
    if not search.strip():
        return Edited(None, "its SEARCH text is empty (name the lines the change goes beside)")
    count = text.count(search)
    if count == 1:
        return Edited(text.replace(search, replace, 1))
    if count > 1:
        return Edited(None, f"its SEARCH text occurs {count} times (add lines around it so it names one place)")
    loose = _loose_matches(text, search)
    if len(loose) == 1:
        (start, end), body = loose[0], replace.strip("\n")
        return Edited(text[:start] + body + text[end:])
    first = search.strip("\n").split("\n")[0].strip()[:80]
    if loose:
        return Edited(None, f"its SEARCH text occurs {len(loose)} times (add lines around it so it names one place)")
    return Edited(None, f"its SEARCH text is not in the source (its first line: {first!r})")


def apply_edits(base: str, body: str) -> Edited:
    """``base`` with the SEARCH/REPLACE hunks of ``body`` applied in order, or the reason none
    could be (a hunk that does not apply names itself; no partial result is kept)."""
    hunks = _HUNK.findall(body)
    if not hunks:
        return Edited(None, "it holds no SEARCH/REPLACE hunk (<<<<<<< SEARCH, =======, >>>>>>> REPLACE)")
    text = base
    for k, (search, replace) in enumerate(hunks, start=1):
        if _MARKER.search(search) or _MARKER.search(replace):
            # a hunk whose ======= or >>>>>>> REPLACE line is missing ran on into the next one
            return Edited(None, f"hunk {k} of {len(hunks)} is not closed (SEARCH, =======, REPLACE, each once)")
        done = _apply_hunk(text, search, replace)
        if done.source is None:
            return Edited(None, f"hunk {k} of {len(hunks)} does not apply: {done.reason}")
        text = done.source
    if text == base:
        return Edited(None, "its hunks leave the source unchanged")
    return Edited(text if text.endswith("\n") else text + "\n")


def edited_candidate(attempt_id: int, body: str, sources: Mapping[int, str]) -> Edited:
    """The candidate an ``edit <attempt_id>`` block makes of that attempt's source."""
    base = sources.get(attempt_id)
    if base is None:
        shown = ", ".join(str(k) for k in sorted(sources)) or "none"
        why = f"the edit names attempt {attempt_id}, whose source this session does not have (editable: {shown})"
        return Edited(None, why)
    got = apply_edits(base, body)
    if got.reason is not None:
        return Edited(None, f"the edit of attempt {attempt_id}: {got.reason}")
    return got
