"""The configs a candidate was built with, as its attempt records them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class CandidateConfig(BaseModel):
    """``config``: the tuner's full config (the search reasons over it); ``parent_config``: the
    config it varies (the tuner attributes a failure to the knob that changed); ``kernel_config``:
    the config less the knobs inert in this kernel, which is what a banked kernel carries."""

    model_config = ConfigDict(extra="ignore")
    config: dict[str, Any] | None = None
    parent_config: dict[str, Any] | None = None
    kernel_config: dict[str, Any] | None = None
    # the candidate is the compiler's own code for the op (Inductor's, as torch.compile runs it):
    # the floor a session does not bank below (``forge.harness.sessions.confirm``)
    compiler_code: bool = False

    def banked(self) -> dict[str, Any]:
        """The config a kernel built from this candidate is banked with."""
        return dict(self.kernel_config or self.config or {})
