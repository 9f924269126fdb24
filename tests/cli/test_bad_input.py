"""The mistakes users make, at every entry point: each ends with one clear message that names the
file or option and what to do, the documented exit code (2: a user's input cannot be used), and no
traceback; from Python, a ``ForgeError`` subclass. Where a front end refuses before any worker
starts (``optimize``, ``plan``, ``tui``, ``bank``) it runs in this process (fast); ``verify``,
``--modules`` and the Python API start workers, so each takes a few cases."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import forge
from forge.core.errors import BankError, ForgeError, ProblemError, UnknownOpError
from forge.core.exit_codes import ExitCode
from forge.db import open_for_writing
from tests.cli_here import invoke_here
from tests.conftest import CANDIDATES, OPS

ROOT = Path(__file__).resolve().parents[2]

_HEAD = "import torch\nimport torch.nn as nn\n\n\n"
_GOOD_MODEL = "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
_GOOD_INPUTS = "def get_inputs():\n    return [torch.randn(8, 8)]\n\n\n"
_GOOD_INIT = "def get_init_inputs():\n    return []\n"


def _op(model: str = _GOOD_MODEL, inputs: str = _GOOD_INPUTS, init: str = _GOOD_INIT) -> str:
    return _HEAD + model + inputs + init


_CTOR = (
    "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n{body}\n"
    "    def forward(self, x):\n        return x * 2\n\n\n"
)

# name: (the op file's text, what the message must say)
OP_MISTAKES: dict[str, tuple[str, str]] = {
    "empty": ("", "does not define Model, get_inputs, get_init_inputs"),
    "prose": ("This is my op. It normalizes rows.\n", "syntax error in op file"),
    "syntax_error": (_HEAD + "class Model(nn.Module:\n    pass\n", "syntax error in op file"),
    "import_error": ("import not_a_module_anyone_has\n" + _op(), "raised while being imported"),
    "no_model": (_HEAD + _GOOD_INPUTS + _GOOD_INIT, "does not define Model"),
    "model_not_a_module": (_op(model="class Model:\n    pass\n\n\n"), "Model must be a torch.nn.Module subclass"),
    "no_get_inputs": (_HEAD + _GOOD_MODEL + _GOOD_INIT, "does not define get_inputs"),
    "get_inputs_not_a_function": (_op(inputs="get_inputs = [1, 2]\n\n\n"), "get_inputs must be a function"),
    "get_inputs_raises": (
        _op(inputs="def get_inputs():\n    raise ValueError('no data')\n\n\n"),
        "get_inputs() raised",
    ),
    "get_inputs_not_a_list": (
        _op(inputs="def get_inputs():\n    return torch.randn(8, 8)\n\n\n"),
        "get_inputs() must return a list",
    ),
    "inputs_not_tensors": (
        _op(inputs="def get_inputs():\n    return [torch.randn(8, 8), 3]\n\n\n"),
        "put fixed scalars in get_init_inputs",
    ),
    "no_get_init_inputs": (_HEAD + _GOOD_MODEL + _GOOD_INPUTS, "does not define get_init_inputs"),
    "get_init_inputs_raises": (
        _op(init="def get_init_inputs():\n    raise KeyError('size')\n"),
        "get_init_inputs() raised",
    ),
    "init_arguments_short": (
        _op(model=_CTOR.format(body="        self.n = n\n"), init="def get_init_inputs():\n    return []\n"),
        "get_init_inputs() returns 0 values, which Model(n) does not take",
    ),
    "init_arguments_long": (
        _op(init="def get_init_inputs():\n    return [4, 5]\n"),
        "get_init_inputs() returns 2 values, which Model() does not take",
    ),
    "constructor_raises": (
        _op(
            model=_CTOR.format(body="        raise ValueError('broken constructor')\n"),
            init="def get_init_inputs():\n    return [8]\n",
        ),
        "raised ValueError: broken constructor",
    ),
    "forward_raises": (
        _op(model="class Model(nn.Module):\n    def forward(self, x):\n        return x @ torch.randn(5, 7)\n\n\n"),
        "the reference Model fails on its own inputs: RuntimeError",
    ),
    "forward_returns_no_tensor": (
        _op(model="class Model(nn.Module):\n    def forward(self, x):\n        return 'done'\n\n\n"),
        "Model.forward must return tensors",
    ),
}


def _write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(OP_MISTAKES[name][0])
    return path


def _cli(*args: str, cache: Path) -> tuple[int, str]:
    """The forge command in this process: its exit code and what it printed, as one line."""
    env = {"FORGE_CACHE_DIR": str(cache), "FORGE_DEVICE": "cpu", "COLUMNS": "300"}
    done = invoke_here(list(args), env)
    return done.exit_code, " ".join(done.output.replace("│", " ").split())


def _refused(code: int, said: str, *needles: str) -> None:
    assert code == ExitCode.USAGE, said
    assert "Traceback" not in said, said
    for needle in needles:
        assert needle in said, (needle, said)


@pytest.mark.parametrize("name", sorted(OP_MISTAKES))
def test_optimize_refuses_a_broken_op_file_before_any_session(tmp_path, cache_dir, name):
    op, bank = _write(tmp_path, name), tmp_path / "bank.db"
    code, said = _cli("optimize", str(op), "--bank", str(bank), "--rounds", "1", cache=cache_dir)
    _refused(code, said, str(op), OP_MISTAKES[name][1])
    with sqlite3.connect(bank) as db:  # no session was started for it (the bank may be made before)
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "sessions" not in tables or db.execute("SELECT count(*) FROM sessions").fetchone() == (0,), said


@pytest.mark.parametrize("name", ["constructor_raises", "init_arguments_short", "forward_raises", "empty"])
def test_a_directory_with_one_broken_op_names_it_and_starts_nothing(tmp_path, cache_dir, name):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "a_good.py").write_text(_op())
    broken = _write(tmp_path / "ops", name)
    code, said = _cli("optimize", str(tmp_path / "ops"), "--bank", str(tmp_path / "b.db"), cache=cache_dir)
    _refused(code, said, str(broken), OP_MISTAKES[name][1])
    assert "a_good" not in said  # nothing ran: the good op's session did not start either


@pytest.mark.parametrize("name", ["constructor_raises", "init_arguments_short", "get_inputs_raises", "syntax_error"])
def test_tui_refuses_a_broken_op_before_it_opens(tmp_path, cache_dir, name):
    op = _write(tmp_path, name)
    code, said = _cli("tui", str(op), "--bank", str(tmp_path / "b.db"), cache=cache_dir)
    _refused(code, said, str(op), OP_MISTAKES[name][1])


@pytest.mark.parametrize("name", ["constructor_raises", "init_arguments_long", "forward_raises", "no_model"])
def test_plan_refuses_a_broken_model_file(tmp_path, cache_dir, name):
    model = _write(tmp_path, name)
    argv = ("plan", str(model), "--world-size", "2", "--simulate", "--bank", str(tmp_path / "b.db"))
    code, said = _cli(*argv, cache=cache_dir)
    _refused(code, said, str(model), OP_MISTAKES[name][1])


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["optimize", "OP", "--rounds", "-1"], ["--rounds"]),
        (["optimize", "OP", "--backend", "fortran"], ["--backend", "fortran"]),
        (["optimize", "OP", "--strategy", "greedy"], ["--strategy", "choose refine or evolve"]),
        (["optimize", "OP", "--device", "tpu"], ["tpu"]),
        (["optimize", "OP", "--judge", "openai/x"], ["--judge needs --model"]),
        (["optimize", "NOWHERE/op.py"], ["no such op file"]),
        (["optimize", "EMPTYDIR"], ["holds no .py op files"]),
        (["optimize", "PICTURE"], ["cannot be read", "pass a KernelBench-format .py op file"]),
        (["optimize", "--resume", "99"], ["no session 99"]),
        (["verify", "OP", "NOWHERE/cand.py"], ["no such candidate file"]),
        (["verify", "OP", "EMPTYDIR"], ["EMPTYDIR"]),
        (["verify", "OP", str(CANDIDATES / "softmax/honest_torch.py"), "--trials", "0"], ["--trials"]),
        (["plan", "EMPTYDIR"], ["directory"]),
        (["plan"], ["give MODEL.py"]),
        (["bank", "show", "99", "--bank", "EMPTYBANK"], ["no kernel with id 99", "forge bank list"]),
        (["bank", "list", "--bank", "NOTADB"], ["is not a forge bank"]),
        (["bank", "list", "--bank", "NEWER"], ["newer forge"]),
        (["bank", "list", "--bank", "postgresql://forge@127.0.0.1:1/x"], ["cannot use the bank", "check the URL"]),
        (["tui", "OP", "--rounds", "0"], ["--rounds"]),
    ],
    ids=lambda v: (
        "-".join(v) if isinstance(v, list) and v and v[0] in ("optimize", "verify", "plan", "bank", "tui") else None
    ),
)
def test_bad_options_and_files_name_what_to_fix(tmp_path, cache_dir, args, needles):
    op = tmp_path / "op.py"
    op.write_text(_op())
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.db").write_bytes(b"this is not a database\n" * 50)
    (tmp_path / "picture.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 20)  # not text: a binary file named .py
    places = {
        "OP": str(op),
        "NOWHERE": str(tmp_path / "nowhere"),
        "PICTURE": str(tmp_path / "picture.py"),
        "EMPTYDIR": str(tmp_path / "empty"),
        "NOTADB": str(tmp_path / "junk.db"),
        "NEWER": str(_newer_bank(tmp_path)),
        "EMPTYBANK": str(_empty_bank(tmp_path)),
    }
    argv = [_placed(a, places) for a in args]
    if "--bank" not in argv:
        argv += ["--bank", str(tmp_path / "b.db")]
    code, said = _cli(*argv, cache=cache_dir)
    _refused(code, said, *(_placed(n, places) for n in needles))


def _placed(text: str, places: dict[str, str]) -> str:
    for key, value in places.items():
        text = text.replace(key, value)
    return text


def _empty_bank(tmp_path: Path) -> Path:
    path = tmp_path / "empty.db"
    open_for_writing(path).dispose()
    return path


def _newer_bank(tmp_path: Path) -> Path:
    path = _empty_bank(tmp_path).rename(tmp_path / "newer.db")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffff_future'")
    return path


@pytest.mark.parametrize("name", ["constructor_raises", "init_arguments_short", "forward_raises", "empty"])
def test_verify_refuses_a_broken_op_file(tmp_path, cache_dir, name):
    """forge verify loads the op in its reference worker (never in the command's process)."""
    op = _write(tmp_path, name)
    code, said = _cli(
        "verify", str(op), str(CANDIDATES / "softmax/honest_torch.py"), "--no-compile-baseline", cache=cache_dir
    )
    _refused(code, said, str(op), OP_MISTAKES[name][1])


def test_verify_refuses_a_candidate_without_model_new(tmp_path, cache_dir):
    candidate = tmp_path / "cand.py"
    candidate.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n")
    code, said = _cli("verify", str(OPS / "small_softmax.py"), str(candidate), "--no-compile-baseline", cache=cache_dir)
    assert code == ExitCode.NO_RESULT and "Traceback" not in said, said  # a verdict: the candidate failed
    assert "ModelNew" in said, said


@pytest.mark.parametrize("name", ["constructor_raises", "init_arguments_short", "forward_raises"])
def test_optimize_modules_refuses_a_broken_model_file(tmp_path, cache_dir, name):
    """--modules builds the model in its probe's process: the message comes back from there."""
    model = _write(tmp_path, name)
    code, said = _cli("optimize", str(model), "--modules", "--bank", str(tmp_path / "b.db"), cache=cache_dir)
    _refused(code, said, str(model), OP_MISTAKES[name][1].split(":")[0])


def test_python_api_raises_forge_errors(tmp_path, cache_dir, fast_settings):
    for name in ("constructor_raises", "init_arguments_short"):
        with pytest.raises(ProblemError, match=re.escape(OP_MISTAKES[name][1])):
            forge.verify(_write(tmp_path, name), CANDIDATES / "softmax/honest_torch.py", fast_settings)
    (tmp_path / "junk.db").write_bytes(b"not a database\n" * 50)
    with pytest.raises(BankError, match=r"it is not a forge bank.*pass the path of a bank forge wrote"):
        forge.kernelbank.open(tmp_path / "junk.db")
    with pytest.raises(UnknownOpError, match="not in the kernel bank"):
        forge.kernelbank.open(_empty_bank(tmp_path)).load("rmsnorm")
    assert issubclass(UnknownOpError, ForgeError)


@pytest.mark.postgres
def test_a_postgres_url_with_a_user_the_server_does_not_know(tmp_path, cache_dir, pg_server):
    url = pg_server.url().replace("forge@", "nobody_here:secret@")
    code, said = _cli("bank", "list", "--bank", url, cache=cache_dir)
    _refused(code, said, "cannot use the bank", "nobody_here")
    assert "secret" not in said  # the password is never printed


def test_a_bug_in_forge_prints_its_traceback_and_asks_for_a_report(tmp_path):
    """Not a user's mistake: forge's own failure shows the traceback, then what to do with it."""
    script = textwrap.dedent(
        """
        import sys
        import forge.harness as harness
        from forge.entry import main

        def broken(*args, **kwargs):
            raise RuntimeError("an internal failure")

        harness.bank_list = broken
        sys.argv = ["forge", "bank", "list", "--bank", sys.argv[1]]
        main()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "b.db")], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == ExitCode.BUG, done.stderr
    assert "RuntimeError: an internal failure" in done.stderr and "a bug in forge" in done.stderr, done.stderr
