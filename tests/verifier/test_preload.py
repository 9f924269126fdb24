"""The installed libraries an op imports are imported once, in the worker template, not in every
worker: which ones the parent names (the model file's for an op carved from one, never a file
beside the op), and that a worker forked from the template finds them imported already."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from forge.verifier import verify
from forge.verifier.processes.preload import PRELOAD, preload, preload_spec
from forge.verifier.processes.template import WorkerTemplate
from forge.verifier.processes.worker_env import worker_env
from tests.conftest import CANDIDATES, OPS

SOFTMAX = (OPS / "small_softmax.py").read_text()
HONEST = (CANDIDATES / "softmax" / "honest_torch.py").read_text()


def test_an_op_carved_from_a_model_names_the_model_file_s_installed_libraries(tmp_path: Path):
    (tmp_path / "helper.py").write_text("X = 1\n")  # the model's own module: never preloaded
    model = tmp_path / "net.py"
    model.write_text("import torch\nimport helper\nimport sqlalchemy\nfrom rich.text import Text, Span\n")
    op = tmp_path / "net_Layer.py"
    op.write_text(f"import os\nimport torch\nimport forge.core\n_MODEL_FILE = {str(model)!r}\nimport pydantic\n")
    # the model file's imports (every op of the model shares them: one template for the run)
    assert preload_spec(op) == "sqlalchemy;rich.text:Text,Span"
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nimport json\nimport helper\nfrom pydantic import BaseModel\n")
    assert preload_spec(plain) == "pydantic:BaseModel"  # the standard library and local files are not named
    (tmp_path / "broken.py").write_text("def (:\n")
    assert preload_spec(tmp_path / "broken.py") == "" and preload_spec(tmp_path / "missing.py") == ""


def test_preloading_skips_what_does_not_import():
    preload("no_such_module_anywhere;json:dumps,no_such_name;email.mime.text:MIMEText")
    assert "email.mime.text" in sys.modules


_REPORTS = """
import sys

for _m in list(sys.modules.values()):
    _held = getattr(_m, "__dict__", None)  # not hasattr: torch.classes makes up any attribute asked for
    if isinstance(_held, dict) and "SQLALCHEMY_BEFORE" in _held:
        print("PRELOADED:", _held["SQLALCHEMY_BEFORE"])
"""


def test_a_worker_forked_from_the_template_finds_the_op_s_libraries_imported(fast_settings, tmp_path, monkeypatch):
    """The op records whether sqlalchemy was imported before its own import; the candidate
    prints it. Forked from the template: it was; started by exec: it was not."""
    op = tmp_path / "softmax_sql.py"
    op.write_text('import sys\nSQLALCHEMY_BEFORE = "sqlalchemy" in sys.modules\nimport sqlalchemy\n' + SOFTMAX)
    cand = tmp_path / "cand.py"
    cand.write_text(HONEST + _REPORTS)
    settings = fast_settings.model_copy(update={"sandbox": False})
    forked = verify(op, cand, settings)
    assert forked.passed, forked.reason
    assert "PRELOADED: True" in forked.candidate_output
    monkeypatch.setenv("FORGE_WORKER_TEMPLATE", "0")
    execd = verify(op, cand, settings)
    assert execd.passed, execd.reason
    assert "PRELOADED: False" in execd.candidate_output


def _template_state(env: dict[str, str]) -> tuple[int, bytes]:
    """A template started with ``env``, once ready: its thread count and its environment."""
    template = WorkerTemplate(env)
    try:
        assert template.wait_ready(120), "the template did not start"
        assert template.proc is not None
        pid = template.proc.pid
        return len(os.listdir(f"/proc/{pid}/task")), Path(f"/proc/{pid}/environ").read_bytes()
    finally:
        template.close()


def test_a_library_that_starts_a_thread_is_not_kept_in_the_template(tmp_path):
    """Forking a process with a second thread is unsafe: the template starts again without the
    libraries (a clean process, the same socket), and says so in nothing but its environment."""
    spins = "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    (tmp_path / "spins.py").write_text(spins)
    env = worker_env("cpu", 1, tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    quiet_threads, quiet_env = _template_state({**env, PRELOAD: "sqlalchemy"})
    spun_threads, spun_env = _template_state({**env, PRELOAD: "spins;sqlalchemy"})
    assert b"FORGE_WORKER_PRELOAD=sqlalchemy" in quiet_env  # kept: no thread started
    assert PRELOAD.encode() not in spun_env and spun_threads == quiet_threads  # started again without them
