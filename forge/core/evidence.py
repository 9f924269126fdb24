"""What the bank keeps of a kernel, its evidence: the verdict that accepted it, the configs it was
built with, and the standings the runtime reads beside them (whether it is used under
torch.compile, and where autograd needs gradients). A typed record here; one JSON object in the
bank: the verdict's fields and the configs', with each standing under its ``EvidenceKey`` (what
the runtime's reader, ``forge.bank_schema``, reads with its own driver)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from forge.core.acceptance import CompileStanding, TrainingStanding, beats_compile, training_standing
from forge.core.candidate_config import CandidateConfig
from forge.core.evidence_keys import EvidenceKey
from forge.core.verdict import Verdict


def verdict_json(verdict: Verdict, config: CandidateConfig | None) -> dict[str, Any]:
    """A verdict as forge stores it (an attempt's row, and a kernel's evidence): its JSON with the
    candidate's configs beside it (``kernel_config`` only when there is one, as forge always wrote it)."""
    if config is None:
        return verdict.to_json()
    unset = {"kernel_config"} if config.kernel_config is None else None
    return {**verdict.to_json(), **config.model_dump(exclude=unset)}


@dataclass(frozen=True)
class Evidence:
    """A banked kernel's evidence. ``compile_standing`` None: banked before forge judged kernels
    against torch.compile; ``training_standing``: only a model-level run's "not used" (its own
    figures say nothing of a model)."""

    verdict: Verdict
    config: CandidateConfig | None = None
    compile_standing: CompileStanding | None = None
    gradients_verified: bool = False
    training_standing: TrainingStanding | None = None

    @classmethod
    def of(cls, verdict: Verdict, config: CandidateConfig | None = None) -> Evidence:
        """A passed verdict's evidence, its standings judged from its own figures."""
        return cls(verdict, config, beats_compile(verdict), training_standing(verdict).used)

    def reverified(self, verdict: Verdict) -> Evidence:
        """The evidence of a re-verification that passed with ``verdict``: its own standings, except
        what a model showed, which outlives a re-verification of the op alone."""
        fresh = Evidence.of(verdict, self.config)
        if self.compile_standing is not None and self.compile_standing.by_model:
            fresh = replace(fresh, compile_standing=self.compile_standing)
        if self.training_standing is not None:  # only ever a "not used"
            fresh = replace(fresh, gradients_verified=False, training_standing=self.training_standing)
        return fresh

    def to_json(self) -> dict[str, Any]:
        stored = verdict_json(self.verdict, self.config)
        stored[EvidenceKey.COMPILE_STANDING] = self.compile_standing.model_dump() if self.compile_standing else None
        stored[EvidenceKey.GRADIENTS_VERIFIED] = self.gradients_verified
        if self.training_standing is not None:
            stored[EvidenceKey.TRAINING_STANDING] = self.training_standing.model_dump()
        return stored

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> Evidence:
        """Evidence as the bank holds it (raises ValueError where the verdict or a model-level
        standing cannot be read; a compile standing that cannot be is taken as none, as before
        forge judged one)."""
        said = stored.get(EvidenceKey.TRAINING_STANDING)
        training = TrainingStanding.model_validate(said) if isinstance(said, dict) else None
        config_keys = set(CandidateConfig.model_fields) & set(stored)
        return cls(
            verdict=Verdict.from_json(dict(stored)),
            config=CandidateConfig.model_validate({k: stored[k] for k in config_keys}) if config_keys else None,
            compile_standing=_compile_standing(stored.get(EvidenceKey.COMPILE_STANDING)),
            gradients_verified=bool(stored.get(EvidenceKey.GRADIENTS_VERIFIED)),
            training_standing=training if training is not None and training.by_model else None,
        )


def _compile_standing(stored: object) -> CompileStanding | None:
    try:
        return CompileStanding.model_validate(stored) if stored is not None else None
    except ValueError:
        return None
