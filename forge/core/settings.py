"""Settings: one pydantic-settings object, built by a factory and passed in.

Precedence: explicit overrides (CLI flags) > ``FORGE_*`` environment variables > ``[tool.forge]``
in ./pyproject.toml or ./forge.toml > defaults. Nothing here runs at import time.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from forge.core.choices import Device, Executor
from forge.core.errors import UsageError


@dataclass(frozen=True)
class EnvironmentVariable:
    """A variable forge reads from the environment only (no flag, no settings-file key)."""

    name: str
    meaning: str


ENVIRONMENT_ONLY: tuple[EnvironmentVariable, ...] = (
    EnvironmentVariable(
        "FORGE_BANK",
        "the bank, a file path or a `postgresql://` URL, when a command is given no "
        "`--bank` (default: `bank.db` in the per-user data directory)",
    ),
    EnvironmentVariable(
        "FORGE_KERNELBANK",
        "`off`: the runtime hands out no kernel (`load` returns the reference, `kernelize` swaps nothing)",
    ),
    EnvironmentVariable(
        "FORGE_WORKER_TEMPLATE",
        "`0`: exec every verification worker instead of forking it from "
        "the pre-imported template (slower; for debugging the template)",
    ),
    EnvironmentVariable(
        "MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_",
        "glibc's allocator in verification "
        "workers; forge sets them to keep freed memory unless you set them (see Timing)",
    ),
    EnvironmentVariable(
        "GOMP_SPINCOUNT", "libgomp's spin-wait in verification workers; forge sets 10000 unless you set it (see Timing)"
    ),
    EnvironmentVariable("CXX", "the C++ compiler `forge.cpp` builds kernels with (default: g++, else c++ or clang++)"),
    EnvironmentVariable(
        "OPENAI_API_KEY, ANTHROPIC_API_KEY, ...",
        "the LLM provider's key, read by litellm for `--model` (`forge doctor` lists which are set, by name only)",
    ),
)


def _default_memory_limit_mb() -> int:
    """Half of physical memory, capped at 16 GiB: enough for any KernelBench-sized op."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        total = 8192
    return int(min(16384, max(1024, total // 2)))


class ForgeSettings(BaseSettings):
    """Everything tunable about a forge run."""

    model_config = SettingsConfigDict(env_prefix="FORGE_", extra="ignore")

    device: Device = Field(
        default=Device.AUTO, description="where candidates run and are timed: cuda when a GPU is visible (auto), or cpu"
    )
    timeout: float = Field(default=300.0, gt=0, description="seconds a candidate worker may live")
    memory_limit_mb: int = Field(
        default_factory=_default_memory_limit_mb,
        gt=64,
        description="memory a verification worker may hold, MiB (its data limit and resident size; default: half "
        "of physical memory, at most 16 GiB)",
    )
    compile_baseline: bool = Field(
        default=True, description="time torch.compile of the reference beside eager (off: --no-compile-baseline)"
    )
    inductor_candidate: bool = Field(
        default=True,
        description="the built-in agent's first candidate for an op is Inductor's own code for it, which its "
        "hand-tuned families and general lowering then compete with (off: those alone)",
    )
    sandbox: bool = Field(
        default=True,
        description="confine every process that runs candidate code (Landlock: files, network, signals; a "
        "scrubbed environment); off only by choice (--unsandboxed)",
    )
    threads: int | None = Field(default=None, ge=1, description="CPU threads for timing (default: all)")
    timing_budget_s: float = Field(default=1.0, gt=0, description="target seconds of timed calls per side")
    timing_trials: int | None = Field(
        default=None, ge=5, description="timed calls per side (default: what timing_budget_s allows, 5 to 30)"
    )
    confirm_trials: int = Field(
        default=60, ge=5, description="timed calls per side when a session times its finalist again before banking it"
    )
    null_control: bool = Field(
        default=True,
        description="before banking a finalist, time the op's reference against itself in a clean worker with as "
        "many calls, and require the finalist's interval to clear how far apart those read (off: clear 1.0x)",
    )
    user_loop: bool = Field(
        default=True,
        description="when a session times its finalist again, also time it as a user would (a plain loop in fresh "
        "processes, beside the reference and torch.compile) and bank the lower of the two figures",
    )
    user_loop_processes: int = Field(
        default=3,
        ge=1,
        description="fresh processes the user loop times a finalist in, one after another (the claim's interval "
        "spans them all: processes running the same code read apart)",
    )
    profile_candidate: bool = Field(
        default=False,
        description="profile a passing candidate's calls after its timing (torch.profiler, a few calls) so that its "
        "verdict says where its time goes; an LLM session's agents read it, so its sessions turn it on",
    )
    verify_gradients: bool = Field(
        default=False,
        description="verify the candidate for training too: its gradients with respect to the op's inputs and "
        "parameters, for given output gradients, against the reference's autograd",
    )
    timing_batch_mb: int = Field(
        default=160, ge=1, description="MiB of fresh timing inputs and outputs held at once (trials come in batches)"
    )
    load_check: bool = Field(
        default=True,
        description="time a batch again when other processes loaded the machine while it was timed, and never "
        "accept a speedup measured under such load (off: record the load only)",
    )
    quiet_wait_s: float = Field(
        default=120.0,
        ge=0,
        description="after a verification timed while the machine was busy, seconds a session waits for the load "
        "to go before it verifies the next candidate or finalist (at least one second's look); if the load stays, "
        "the session ends busy, banking nothing, and `forge optimize --resume ID` continues it",
    )
    gpu: str | None = Field(default=None, description="the CUDA device verification workers see (CUDA_VISIBLE_DEVICES)")
    cache_dir: Path | None = Field(
        default=None,
        description="where compiled kernels, measured machine figures and op briefs are cached (default: the "
        "per-user cache directory)",
    )
    executor: Executor = Field(
        default=Executor.LOCAL,
        description="where forge optimize runs its sessions: this machine (local), or a Ray cluster (ray: the "
        "optional extra forge-kernels[ray])",
    )
    ray_address: str | None = Field(
        default=None, description="executor ray: 'auto', ray://host:port, or none for a Ray started for the run"
    )

    def cache_path(self) -> Path:
        """Where forge caches compiled kernels and measured machine figures (``cache_dir``, else the
        per-user cache directory)."""
        if self.cache_dir:
            return self.cache_dir
        import platformdirs

        return Path(platformdirs.user_cache_dir("forge"))


def _file_settings(cwd: Path) -> dict[str, Any]:
    for name, section in (("forge.toml", None), ("pyproject.toml", ("tool", "forge"))):
        path = cwd / name
        if not path.is_file():
            continue
        try:
            data: Any = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{str(path)!r} is not valid TOML ({exc}); fix or remove it") from exc
        for key in section or ():
            data = data.get(key, {}) if isinstance(data, dict) else {}
        if data:
            return dict(data)
    return {}


def load_settings(cwd: Path | None = None, **overrides: Any) -> ForgeSettings:
    """Build settings; ``overrides`` whose value is None are ignored (an unset CLI flag)."""
    base = _file_settings(cwd or Path.cwd())
    try:
        env = ForgeSettings()  # reads FORGE_* now, not at import
        merged: dict[str, Any] = {**base}
        for key in ForgeSettings.model_fields:
            if f"FORGE_{key.upper()}" in os.environ:
                merged[key] = getattr(env, key)
        merged.update({k: v for k, v in overrides.items() if v is not None})
        return ForgeSettings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"setting {field!r}: {first['msg']}") from exc
