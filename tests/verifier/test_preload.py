"""The installed libraries an op imports are imported once, in the worker template, not in every
worker: which ones the parent names (the model file's for an op carved from one, never a file
beside the op), and that a worker forked from the template finds them imported already."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from forge.verifier import verify
from forge.verifier.processes.preload import PRELOAD, preload, preload_spec
from forge.verifier.processes.template import WorkerTemplate
from forge.verifier.processes.worker_env import candidate_folder, worker_env, workers_cache
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


_ISA_KNOWN = """
from torch._inductor import cpu_vec_isa  # as a candidate compiling with torch._inductor for the CPU does

print("ISA LISTS CACHED:", cpu_vec_isa.valid_vec_isa_list.cache_info().currsize)
from torch._inductor import codecache  # where its kernels' precompiled headers would go

print("HEADERS IN:", codecache._HEADER_DIR)
"""


def test_a_worker_that_compiles_for_the_cpu_is_forked_knowing_its_instruction_sets(fast_settings):
    """A candidate that compiles with Inductor for the CPU is forked from a template that found the
    CPU's vector instruction sets, in forge's own folder, before the fork: the worker holds the
    answer before its first compile (a fresh interpreter holds none: it would probe), and puts its
    precompiled headers in its own folder (the template's is not one it may write). Finding them starts no thread in
    the template and leaves its cache folder as it was."""
    cand = fast_settings.cache_path() / "isa_candidate.py"
    cand.write_text(HONEST + _ISA_KNOWN)
    forked = verify(OPS / "small_softmax.py", cand, fast_settings)
    assert forked.passed, forked.reason
    assert "ISA LISTS CACHED: 1" in forked.candidate_output, forked.candidate_output
    folder = workers_cache(fast_settings.cache_path()) / "cpu_isa"
    assert any(folder.rglob("*.so")), "the probes were not compiled into forge's folder"
    # its precompiled headers go where an exec'd worker's would: its own folder (a confined worker
    # may not write the template's; tests/cli/test_real_pipeline.py compiles Inductor's code there)
    own = workers_cache(fast_settings.cache_path()) / candidate_folder(cand.read_text())
    assert f"HEADERS IN: {own / 'tmp'}/torchinductor_" in forked.candidate_output, forked.candidate_output
    # a fresh interpreter holds no answer after that import (an exec'd worker would probe); the
    # template's finding holds one
    script = (
        "import os, sys\n"
        "from torch._inductor import cpu_vec_isa\n"
        "from forge.verifier.processes import template_process as t\n"
        "from forge.verifier.processes.preload import thread_count\n"
        "os.environ['TORCHINDUCTOR_CACHE_DIR'] = 'own'\n"
        "fresh, before = cpu_vec_isa.valid_vec_isa_list.cache_info().currsize, thread_count()\n"
        "t._find_cpu_isa({'env': {t.CPU_ISA: sys.argv[1]}})\n"
        "found = cpu_vec_isa.valid_vec_isa_list.cache_info().currsize\n"
        "print(fresh, found, thread_count() - before, os.environ['TORCHINDUCTOR_CACHE_DIR'])\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=300)
    assert run.stdout.split() == ["0", "1", "0", "own"], run.stdout + run.stderr[-2000:]
