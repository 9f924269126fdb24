"""What the commands offer: each lists only its own options, enumerated options take only their
members (a typo is a usage error naming the choices, exit 2), options that need another are refused
without it, and the plan options that moved from ``forge optimize`` to ``forge plan`` are no longer
offered there (``--parallel`` says what it became)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from forge.cli.app import app

# --train is both's: a plan for a training step, kernels for training
PLAN_ONLY = ("--world-size", "--mesh", "--memory-per-device", "--simulate", "--infer")
KERNEL_ONLY = ("--backend", "--strategy", "--workers", "--executor", "--ray-address", "--no-compile-baseline")


def options_listed(*args: str) -> set[str]:
    done = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert done.exit_code == 0, done.output
    return set(re.findall(r"(--[a-z][a-z-]+)", done.output))


def test_forge_plan_lists_only_plan_options_and_optimize_no_longer_lists_them():
    plan, optimize = options_listed("plan"), options_listed("optimize")
    assert set(PLAN_ONLY) <= plan and not plan & set(KERNEL_ONLY), plan
    assert set(KERNEL_ONLY) <= optimize and not optimize & {*PLAN_ONLY, "--parallel"}, optimize


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["optimize", "op.py", "--backend", "fortran"], "'fortran' is not one of 'auto', 'triton', 'cpp', 'cuda'"),
        (["optimize", "op.py", "--strategy", "parallel"], "'parallel': choose refine or evolve"),
        (["optimize", "op.py", "--device", "tpu"], "'tpu' is not one of 'auto', 'cpu', 'cuda'"),
        (["optimize", "op.py", "--executor", "slurm"], "'slurm' is not one of 'local', 'ray'"),
        (["optimize", "op.py", "--rounds", "0"], "greater than or equal to 1"),
        (["plan", "model.py", "--world-size", "0"], "greater than or equal to 1"),
        (["optimize", "model.py", "--parallel"], "is `forge plan MODEL.py` now"),
        (["optimize", "model.py", "--include", "Block"], "are for a model: add --modules"),
        (["optimize", "model.py", "--modules", "--resume", "3"], "a model-level run starts afresh"),
    ],
)
def test_an_enumerated_option_takes_only_its_choices(args, said):
    done = CliRunner().invoke(app, args, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert done.exit_code == 2 and said in " ".join(done.output.replace("│", " ").split()), done.output


def test_plan_without_a_model_or_a_session_says_what_to_give(tmp_path):
    done = CliRunner().invoke(app, ["plan", "--bank", str(tmp_path / "b.db")], env={"COLUMNS": "200"})
    assert done.exit_code == 2 and "give MODEL.py" in done.output and "Traceback" not in done.output


@pytest.mark.parametrize(
    "command", [[], ["verify"], ["optimize"], ["plan"], ["doctor"], ["bank"], ["bank", "show"], ["bank", "export"]]
)
def test_help_names_values_in_words_and_flags_with_none(command):
    """Not typer's Python annotations (``<bool>`` beside every flag, ``<list[Path]>``)."""
    done = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert done.exit_code == 0, done.output
    assert not re.search(r"<[a-zA-Z\[\]| ]+>", done.output), done.output
    help_row = next(line for line in done.output.splitlines() if "--help" in line)
    assert help_row.split("--help")[1].split()[:1] == ["Show"], help_row  # no word for a flag


def test_an_option_s_value_word_comes_from_typer_s_label():
    from forge.cli.help_format import value_word

    assert value_word("<bool>") == ""
    assert value_word("<str>") == "TEXT" and value_word("<int range>") == "N" and value_word("<float>") == "NUMBER"
    assert value_word("<auto|cpu|cuda>") == "[auto|cpu|cuda]" and value_word("<list[str]>") == "TEXT"
    assert value_word("<BankLocation>") == "BANK" and value_word("<path>") == "PATH"
