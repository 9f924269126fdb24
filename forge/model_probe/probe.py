"""The model probe: a process of its own that imports the user's model, profiles it or proves
its kernelized form, and writes one JSON record (the parent validates it). A model that crashes
or hangs ends this process, not forge.

    python -m forge.model_probe.probe profile MODEL --device cpu [--recorded R] --out F
    FORGE_BANK=BANK python -m forge.model_probe.probe prove MODEL --device cpu --rounds 30 [--train] --out F
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from forge.core.errors import ForgeError, first_said
from forge.core.model_records import ModelProfile, ModelProof, TrainingProof
from forge.core.redaction import Redactor, known_secrets
from forge.core.sandbox import scrubbed
from forge.model_probe.profiling import profile_model
from forge.model_probe.proving import prove_model
from forge.model_probe.source import load_model
from forge.model_probe.training_proof import prove_training

Record = TypeVar("Record", bound=BaseModel)


class ModelRunError(ForgeError):
    """The model could not be profiled or proven; the message says why (the model's own error)."""


def _run(args: argparse.Namespace) -> BaseModel:
    loaded = load_model(args.model)
    if args.step == "profile":
        return profile_model(loaded, args.device, Path(args.recorded) if args.recorded else None)
    bank = os.environ.get("FORGE_BANK") or None
    proof = prove_model(loaded, bank, args.device, args.rounds)
    if args.train and proof.outputs_match:
        try:
            proof.training = prove_training(loaded, bank, args.device, args.rounds)
        except Exception as exc:  # the inference proof stands; the training one says what broke
            said = f"the training proof raised {type(exc).__name__}: {first_said(exc)}"
            proof.training = TrainingProof.refused(said)
    return proof


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="forge.model_probe.probe")
    parser.add_argument("step", choices=("profile", "prove"))
    parser.add_argument("model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--train", action="store_true", help="prove: the training step too")
    parser.add_argument("--recorded", help="profile: where to save the values of the calls' fixed tensors")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        text = _run(args).model_dump_json()
    except ForgeError as exc:  # the model's file, the bank: forge's own words, no traceback
        text = json.dumps({"error": exc.message})
    except Exception as exc:
        tail = "".join(traceback.format_exception(exc)[-6:])
        text = json.dumps({"error": f"{type(exc).__name__}: {exc}\n{tail}"})
    Path(args.out).write_text(text)
    return 0


def _probe(
    step: str,
    extra: list[str],
    record: type[Record],
    model: str,
    timeout_s: float,
    env: dict[str, str] | None = None,
    stop: threading.Event | None = None,
) -> Record:
    with tempfile.TemporaryDirectory(prefix="forge-probe-") as tmp:
        out = Path(tmp) / "record.json"
        argv = [sys.executable, "-m", "forge.model_probe.probe", step, model, *extra, "--out", str(out)]
        log = Path(tmp) / "log.txt"
        with log.open("w") as sink:
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=_environment(step, env))
            _wait(proc, model, step, timeout_s, stop)
        if not out.exists():
            said = _redacted(log.read_text(errors="replace").strip()[-1500:])
            raise ModelRunError(f"{model}: the {step} process ended (exit {proc.returncode}) without a result:\n{said}")
        data = json.loads(out.read_text())
    if "error" in data:
        raise ModelRunError(f"{model}: {_redacted(data['error'])}".rstrip())
    try:
        return record.model_validate(data)
    except ValidationError as exc:
        raise ModelRunError(f"{model}: the {step} process wrote a malformed record: {exc}") from exc


def _environment(step: str, extra: dict[str, str] | None) -> dict[str, str]:
    """The probe's environment: forge's own, but the prove step runs banked kernels (an LLM's code
    among them), so it gets the allowlist a candidate's process gets (no provider keys, tokens or
    database passwords beyond the bank's location it is handed) and its home for the model's
    caches."""
    if step != "prove":
        return {**os.environ, **(extra or {})}
    return {**scrubbed(os.environ), "HOME": str(Path.home()), **(extra or {})}


def _redacted(text: str) -> str:
    """What the probe said, which may quote the banked kernels' text, without credentials."""
    return Redactor(known_secrets(os.environ, [Path.cwd()])).text(text)


def _wait(proc: subprocess.Popen[bytes], model: str, step: str, timeout_s: float, stop: threading.Event | None) -> None:
    """Wait for the probe; kill it when the run is stopped or it runs past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if stop is not None and stop.wait(0.25):
            proc.kill()
            proc.wait()
            raise ModelRunError(f"{model}: stopped during the {step} step")
        if stop is None:
            time.sleep(0.25)
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise ModelRunError(f"{model}: the {step} step ran past {timeout_s:.0f} s and was stopped")


def profile_in_process(
    model: str,
    device: str,
    timeout_s: float = 900,
    stop: threading.Event | None = None,
    recorded: Path | None = None,
) -> ModelProfile:
    """Profile the model in a process of its own (``ModelRunError`` with the model's error;
    ``stop`` set: the process is killed); ``recorded``: where the values of the calls' fixed
    tensors go (``profiling.profile_model``)."""
    extra = ["--device", device, *(["--recorded", str(recorded)] if recorded is not None else [])]
    return _probe("profile", extra, ModelProfile, model, timeout_s, stop=stop)


def prove_in_process(
    model: str,
    bank: str,
    device: str,
    rounds: int,
    timeout_s: float = 1800,
    stop: threading.Event | None = None,
    train: bool = False,
) -> ModelProof:
    """Prove the kernelized model in a process of its own (``ModelRunError`` with why not); with
    ``train``, its training step too (``ModelProof.training``)."""
    extra = ["--device", device, "--rounds", str(rounds), *(["--train"] if train else [])]
    timeout_s *= 2 if train else 1  # training steps timed beside the forwards, as many rounds
    # the bank through the environment: a server bank's URL may hold a password, argv is public
    return _probe("prove", extra, ModelProof, model, timeout_s, {"FORGE_BANK": bank}, stop)


if __name__ == "__main__":
    sys.exit(main())
