"""A banked kernel's evidence: a typed record stored as one JSON object (the verdict's fields, the
configs', each standing under its key), read back into its type; a re-verification keeps what a
model showed and nothing else of the old standings."""

from __future__ import annotations

import pytest

from forge.core.acceptance import CompileStanding, TrainingStanding
from forge.core.candidate_config import CandidateConfig
from forge.core.evidence import Evidence
from forge.core.evidence_keys import EvidenceKey
from forge.core.verdict import Verdict

PASSED = Verdict.from_json({"status": "passed", "timing_meaningful": True, "problem": "op"})
BY_MODEL = CompileStanding(beats=False, why="a compiled model it slowed", by_model=True)
SLOWED = TrainingStanding(used=False, why="a model's training step it slowed", by_model=True)


def test_evidence_is_stored_flat_and_read_back_into_its_type():
    config = CandidateConfig(config={"chunk": 4096}, kernel_config={"chunk": 4096})
    evidence = Evidence(PASSED, config, BY_MODEL, False, SLOWED)
    stored = evidence.to_json()
    assert stored["status"] == "passed" and stored["kernel_config"] == {"chunk": 4096}
    assert stored[EvidenceKey.COMPILE_STANDING]["by_model"] and stored[EvidenceKey.GRADIENTS_VERIFIED] is False
    back = Evidence.from_json(stored)
    assert back.config == config and back.compile_standing == BY_MODEL and back.training_standing == SLOWED
    assert back.verdict.status == PASSED.status and back.verdict.problem == "op"


def test_a_passed_verdicts_own_evidence_judges_its_standings_from_its_figures():
    evidence = Evidence.of(PASSED)
    # no torch.compile baseline and no gradient check: used in eager only, the reference under autograd
    assert evidence.compile_standing is not None and not evidence.compile_standing.beats
    assert not evidence.gradients_verified and evidence.training_standing is None
    assert EvidenceKey.TRAINING_STANDING not in evidence.to_json()


def test_re_verifying_keeps_what_a_model_showed_and_nothing_else():
    kept = Evidence(PASSED, None, BY_MODEL, False, SLOWED).reverified(PASSED)
    assert kept.compile_standing == BY_MODEL and kept.training_standing == SLOWED and not kept.gradients_verified
    own = CompileStanding(beats=True, why="its own figures")
    fresh = Evidence(PASSED, None, own, True, None).reverified(PASSED)
    assert fresh.compile_standing != own and fresh.compile_standing is not None  # judged again
    assert fresh == Evidence.of(PASSED)


def test_a_standing_that_is_not_a_models_or_cannot_be_read():
    stored = {**PASSED.to_json(), EvidenceKey.TRAINING_STANDING: {"used": True, "why": "its own step"}}
    assert Evidence.from_json(stored).training_standing is None  # only a model-level run's is kept
    stored = {**PASSED.to_json(), EvidenceKey.COMPILE_STANDING: {"beats": "maybe"}}
    assert Evidence.from_json(stored).compile_standing is None  # as before forge judged one
    with pytest.raises(ValueError):
        Evidence.from_json({**PASSED.to_json(), EvidenceKey.TRAINING_STANDING: {"used": "perhaps"}})
