"""Getting a candidate out of free-form model replies, and a judge's JSON out of its reply.

Replies come in every shape: one fenced block, several (a C++ block and a Python block), prose
around the code, no fence at all, or no ``ModelNew``. Each outcome is either a source or a reason,
never an exception: the session records a reason as a failed attempt.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from forge.agents.edits import edit_target, edited_candidate
from forge.core.feedback import JudgeFeedback
from forge.core.importing import parse_python

# a fence: its tag, the rest of its line (an edit's attempt), its body
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)([^\n]*)\n(.*?)(?:```|\Z)", re.DOTALL)
_PY_TAGS = {"", "python", "py", "python3"}


@dataclass
class Extracted:
    source: str | None
    reason: str | None = None
    edit_of: int | None = None  # the attempt whose source an ```edit block changed


def _defines_modelnew(src: str) -> bool:
    try:
        tree = parse_python(src)
    except SyntaxError:
        return "class ModelNew" in src
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree))


def extract_candidate(reply: str) -> Extracted:
    """The Python candidate in ``reply``: the fenced Python block defining ModelNew (the longest
    if several do), else the whole reply if it parses as Python and defines ModelNew."""
    if not reply or not reply.strip():
        return Extracted(None, "the reply was empty")
    blocks = [(tag.lower(), body) for tag, _info, body in _FENCE.findall(reply)]
    python = [body for tag, body in blocks if tag in _PY_TAGS]
    with_model = [b for b in python if _defines_modelnew(b)]
    if with_model:
        return Extracted(max(with_model, key=len).strip() + "\n")
    if not blocks and _defines_modelnew(reply):
        try:
            parse_python(reply)
            return Extracted(reply.strip() + "\n")
        except SyntaxError:
            pass
    if python or blocks:
        return Extracted(None, f"the reply has {len(blocks)} code block(s) but none defines class ModelNew")
    return Extracted(None, "the reply contains no code block and no class ModelNew")


def _fenced(reply: str, sources: Mapping[int, str]) -> list[Extracted]:
    """Each fenced block that makes a candidate, in the order written: a Python block defining
    ModelNew as it is, an ```edit N block as attempt N's source with its hunks applied (or the
    reason they do not apply)."""
    out = []
    for tag, info, body in _FENCE.findall(reply or ""):
        is_edit = tag.lower().startswith("edit") and (tag[4:].isdigit() or not tag[4:])
        target = edit_target(tag[4:] + info) if is_edit else None
        if is_edit and target is None:
            out.append(Extracted(None, "an ```edit block must name the attempt it edits on its fence line (```edit N)"))
        elif target is not None:
            edited = edited_candidate(target, body, sources)
            if edited.source is not None and not _defines_modelnew(edited.source):
                out.append(Extracted(None, f"the edit of attempt {target} leaves no class ModelNew", target))
            else:
                out.append(Extracted(edited.source, edited.reason, target))
        elif tag.lower() in _PY_TAGS and _defines_modelnew(body):
            out.append(Extracted(body.strip() + "\n"))
    return out


def extract_candidates(reply: str, most: int, sources: Mapping[int, str] | None = None) -> list[Extracted]:
    """Up to ``most`` candidates in ``reply``: each fenced Python block defining ModelNew, and each
    ```edit block of an attempt in ``sources`` (attempt id to source), in the order written (one
    that repeats an earlier candidate is dropped; an edit that does not apply is kept as its
    reason); where it holds none, one ``Extracted`` with the reason (``extract_candidate``'s)."""
    reply = (reply or "").replace("\r\n", "\n")  # a reply with CRLF line ends: its hunks' marker lines too
    found: list[Extracted] = []
    for one in _fenced(reply, sources or {}):
        if one.source is None or all(e.source != one.source for e in found):
            found.append(one)
    # candidates before reasons, each in the order written: an edit that did not apply takes no
    # place from a good block after it
    found = [e for e in found if e.source is not None] + [e for e in found if e.source is None]
    if most <= 1:
        # one file: the longest Python block (extract_candidate's rule), else the first edit
        whole = extract_candidate(reply)
        return [whole] if whole.source is not None or not found else found[:1]
    return found[:most] or [extract_candidate(reply)]


def parse_feedback(reply: str) -> tuple[JudgeFeedback | None, str | None]:
    """(feedback, None) or (None, why): the first JSON object in the reply, validated."""
    candidates = [body for _tag, _info, body in _FENCE.findall(reply or "")] + [reply or ""]
    for text in candidates:
        start = text.find("{")
        while start != -1:
            try:
                obj, _end = json.JSONDecoder().raw_decode(text[start:])
            except json.JSONDecodeError:
                start = text.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                try:
                    return JudgeFeedback.model_validate(obj), None
                except ValidationError as exc:
                    return None, f"the judge's JSON does not fit the schema: {exc.errors()[0]['msg']}"
            start = text.find("{", start + 1)
    return None, "the judge's reply contains no JSON object"
