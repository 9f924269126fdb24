"""A candidate written as edits of an earlier attempt: the hunks give the whole file, or a reason."""

from __future__ import annotations

from forge.agents import extract_candidates
from forge.agents.edits import apply_edits, edit_target

BASE = """import torch
from forge_reference import Model

BLOCK = 64


class ModelNew(Model):
    def forward(self, x):
        y = x * 2
        return y
"""


def hunk(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_hunks_apply_in_order_to_give_the_whole_file():
    body = hunk("BLOCK = 64\n", "BLOCK = 128\n") + hunk("        y = x * 2\n", "        y = x + x\n")
    got = apply_edits(BASE, body)
    assert got.reason is None
    assert got.source == BASE.replace("BLOCK = 64", "BLOCK = 128").replace("y = x * 2", "y = x + x")


def test_a_search_copied_without_its_trailing_spaces_still_names_its_lines():
    base = BASE.replace("BLOCK = 64\n", "BLOCK = 64   \n")
    got = apply_edits(base, hunk("BLOCK = 64\n", "BLOCK = 32\n"))
    assert got.source is not None and "BLOCK = 32\n" in got.source and "BLOCK = 64" not in got.source


def test_an_edit_that_does_not_name_one_place_gives_its_reason_and_no_source():
    missing = apply_edits(BASE, hunk("BLOCK = 64\n", "BLOCK = 32\n") + hunk("z = 1\n", "z = 2\n"))
    assert missing.source is None and "hunk 2 of 2" in (missing.reason or "") and "'z = 1'" in (missing.reason or "")
    twice = apply_edits(BASE.replace("y = x * 2", "y = x * 2\n        y = x * 2"), hunk("        y = x * 2\n", ""))
    assert twice.source is None and "occurs 2 times" in (twice.reason or "")
    assert "empty" in (apply_edits(BASE, hunk("\n", "x\n")).reason or "")
    assert "no SEARCH/REPLACE hunk" in (apply_edits(BASE, "BLOCK = 128").reason or "")
    assert "unchanged" in (apply_edits(BASE, hunk("BLOCK = 64\n", "BLOCK = 64\n")).reason or "")


def test_the_fence_line_names_the_attempt():
    assert edit_target(" 12") == 12 and edit_target(" attempt 7 (the fastest)") == 7 and edit_target(" #3") == 3
    assert edit_target("") is None and edit_target(" the last one") is None


def test_a_reply_of_a_file_and_an_edit_gives_two_whole_candidates_in_the_order_written():
    other = BASE.replace("x * 2", "x * 2.0")
    reply = (
        f"First, a larger block:\n```edit 12\n{hunk('BLOCK = 64' + chr(10), 'BLOCK = 256' + chr(10))}```\n"
        f"and a rewrite:\n```python\n{other}```\n"
    )
    first, second = extract_candidates(reply, 2, {12: BASE})
    assert first.source == BASE.replace("BLOCK = 64", "BLOCK = 256") and first.edit_of == 12
    assert second.source == other and second.edit_of is None


def test_an_edit_of_an_attempt_the_session_lacks_or_one_that_drops_modelnew_is_a_reason():
    unknown = extract_candidates(f"```edit 99\n{hunk('BLOCK = 64' + chr(10), 'BLOCK = 1' + chr(10))}```", 2, {12: BASE})
    assert [c.source for c in unknown] == [None] and "attempt 99" in (unknown[0].reason or "")
    assert "editable: 12" in (unknown[0].reason or "")
    renamed = f"```edit 12\n{hunk('class ModelNew(Model):' + chr(10), 'class Other(Model):' + chr(10))}```"
    (gone,) = extract_candidates(renamed, 2, {12: BASE})
    assert gone.source is None and "no class ModelNew" in (gone.reason or "")


def test_best_of_one_takes_a_whole_file_before_an_edit_and_an_edit_where_there_is_none():
    edit = f"```edit 12\n{hunk('BLOCK = 64' + chr(10), 'BLOCK = 8' + chr(10))}```"
    (only,) = extract_candidates(edit, 1, {12: BASE})
    assert only.source is not None and "BLOCK = 8" in only.source
    (whole,) = extract_candidates(f"{edit}\n```python\n{BASE}```", 1, {12: BASE})
    assert whole.source == BASE


def test_a_reply_with_crlf_line_ends_still_gives_its_edit():
    reply = f"```edit 12\n{hunk('BLOCK = 64' + chr(10), 'BLOCK = 16' + chr(10))}```".replace("\n", "\r\n")
    (got,) = extract_candidates(reply, 2, {12: BASE})
    assert got.source is not None and "BLOCK = 16" in got.source, got.reason


def test_an_edit_fence_without_its_attempt_or_with_a_hunk_left_open_says_so():
    body = hunk("BLOCK = 64\n", "BLOCK = 16\n")
    (unnamed,) = extract_candidates(f"```edit\n{body}```", 2, {12: BASE})
    assert unnamed.source is None and "must name the attempt" in (unnamed.reason or "")
    (glued,) = extract_candidates(f"```edit12\n{body}```", 2, {12: BASE})
    assert glued.source is not None and "BLOCK = 16" in glued.source
    unclosed = "<<<<<<< SEARCH\nBLOCK = 64\n=======\nBLOCK = 16\n" + hunk("        y = x * 2\n", "        y = x + x\n")
    left_open = apply_edits(BASE, unclosed)
    assert left_open.source is None and "hunk 1 of 1 is not closed" in (left_open.reason or "")


def test_a_failed_edit_takes_no_place_from_a_good_candidate_after_it():
    bad = f"```edit 12\n{hunk('z = 1' + chr(10), 'z = 2' + chr(10))}```"
    good = f"```edit 12\n{hunk('BLOCK = 64' + chr(10), 'BLOCK = 8' + chr(10))}```"
    (one,) = extract_candidates(f"{bad}\n{good}", 1, {12: BASE})
    assert one.source is not None and "BLOCK = 8" in one.source
    first, second = extract_candidates(f"{bad}\n{good}\n```python\n{BASE.replace('64', '32')}```", 2, {12: BASE})
    assert first.source is not None and second.source is not None and "BLOCK = 32" in second.source
