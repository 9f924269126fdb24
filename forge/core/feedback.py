"""The judge's answer: produced by an agent, stored in the bank, read by the coder and the front
ends. It crosses a trust boundary (it may come from an LLM), so it is validated."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class JudgeFeedback(BaseModel):
    """What the judge returns about one attempt."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    diagnosis: str = Field(default="", description="why a failing candidate failed")
    bottleneck: str = Field(default="", description="the main bottleneck of a passing candidate")
    next_step: str = Field(default="", description="one concrete next step")
    continue_search: bool = Field(default=True, alias="continue")
    config: dict[str, Any] = Field(default_factory=dict, description="launch/parallel config to try next")
