"""Candidates that cannot be loaded or called get their own status and a readable reason."""

from __future__ import annotations

import pytest

from forge.core.errors import CandidateFileError
from forge.verifier import verify
from tests.conftest import CANDIDATES, OPS


def test_syntax_error_names_file_and_line(fast_settings):
    v = verify(OPS / "small_softmax.py", CANDIDATES / "softmax/syntax_error.py", fast_settings)
    assert v.status == "compile_error"
    assert "syntax_error.py:3" in v.reason


def test_import_error_is_a_compile_error(fast_settings):
    v = verify(OPS / "small_softmax.py", CANDIDATES / "softmax/import_error.py", fast_settings)
    assert v.status == "compile_error"
    assert "no_such_kernel_library" in v.reason


def test_missing_modelnew(fast_settings):
    v = verify(OPS / "small_softmax.py", CANDIDATES / "softmax/no_modelnew.py", fast_settings)
    assert v.status == "compile_error"
    assert "ModelNew" in v.reason


def test_state_dict_mismatch_is_an_interface_failure(fast_settings):
    v = verify(OPS / "small_affine.py", CANDIDATES / "affine/wrong_params.py", fast_settings)
    assert v.status == "compile_error"
    assert v.reason.startswith("interface")
    assert "state_dict" in next(c.detail for c in v.checks if c.name == "interface")


def test_raising_forward_is_a_runtime_error_with_candidate_line(fast_settings):
    v = verify(OPS / "small_softmax.py", CANDIDATES / "softmax/raises.py", fast_settings)
    assert v.status == "runtime_error"
    assert "invalid configuration" in v.reason
    assert "raises.py:6" in next(c.detail for c in v.checks if c.name == "run")


def test_missing_candidate_file_is_a_usage_error(fast_settings, tmp_path):
    with pytest.raises(CandidateFileError, match="no such candidate file"):
        verify(OPS / "small_softmax.py", tmp_path / "nope.py", fast_settings)
