"""Loading op files: the KernelBench interface, FORGE_* extensions, and clear errors."""

from __future__ import annotations

import pytest

from forge.core.errors import ProblemError
from forge.core.problem import load_problem, read_problem_source, reference_hash
from forge.core.shapes import family_overrides, odd_size
from tests.conftest import EXAMPLES, OPS

BAD = OPS / "bad"


def test_loads_kernelbench_op():
    p = load_problem(EXAMPLES / "ops" / "softmax.py")
    assert p.name == "softmax"
    assert p.size_constants() == {"batch_size": 256, "dim": 8192}
    assert p.target_class_path is None
    assert [tuple(x.shape) for x in p.inputs()] == [(256, 8192)]


def test_forge_extensions():
    p = load_problem(OPS / "declared_shapes.py")
    assert p.name == "declared_rowsum"
    assert p.declared_shapes == [{"rows": 3, "cols": 17}, {"rows": 128, "cols": 5}]
    assert p.tolerance is not None and p.tolerance.atol == 1e-3


def test_overrides_change_inputs():
    p = load_problem(OPS / "small_softmax.py", {"batch_size": 3, "dim": 7})
    assert tuple(p.inputs()[0].shape) == (3, 7)


def test_hash_ignores_comments_and_formatting(tmp_path):
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    src = (OPS / "small_softmax.py").read_text()
    a.write_text(src)
    b.write_text("# a comment\n" + src.replace("dim = 512", "dim   =   512  # width"))
    assert read_problem_source(a).op_hash == read_problem_source(b).op_hash
    b.write_text(src.replace("dim = 512", "dim = 513"))
    assert read_problem_source(a).op_hash != read_problem_source(b).op_hash


def test_model_imported_from_user_package(tmp_path):
    pkg = tmp_path / "probe_layers"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "norm.py").write_text(
        "import torch\nclass Scale(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    )
    op = tmp_path / "op.py"
    op.write_text(
        "import torch\nfrom probe_layers.norm import Scale as Model\n"
        "def get_inputs():\n    return [torch.randn(4, 4)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    p = load_problem(op)
    assert p.target_class_path == "probe_layers.norm:Scale"
    assert reference_hash(p) != p.spec.op_hash  # the class's own source is part of the identity


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (OPS / "missing.py", "no such op file"),
        (BAD / "syntax_error.py", "syntax_error.py:2"),
        (BAD / "no_model.py", "does not define Model"),
        (BAD / "import_error.py", "import_error.py:2"),
    ],
)
def test_load_errors_name_file_and_fix(path, message):
    with pytest.raises(ProblemError, match=message.replace(".", r"\.")):
        load_problem(path)


def test_get_inputs_raising_names_line():
    p = load_problem(BAD / "inputs_raise.py")
    with pytest.raises(ProblemError, match=r"inputs_raise\.py:11: get_inputs\(\) raised"):
        p.inputs()


def test_get_inputs_non_tensor():
    p = load_problem(BAD / "inputs_not_tensors.py")
    with pytest.raises(ProblemError, match=r"element 1 is a int, not a torch\.Tensor"):
        p.inputs()


def test_bad_forge_shapes(tmp_path):
    op = tmp_path / "op.py"
    op.write_text((OPS / "small_softmax.py").read_text() + "\nFORGE_SHAPES = [{'nope': 3}]\n")
    with pytest.raises(ProblemError, match=r"FORGE_SHAPES\[0\] names \['nope'\]"):
        load_problem(op)


def test_odd_sizes_are_odd_and_smaller():
    for c in (8, 16, 64, 512, 1000, 4096):
        v = odd_size(c)
        assert v % 2 == 1 and 3 <= v < c


def test_family_overrides_skip_small_constants():
    fam = family_overrides({"batch_size": 16, "dim": 1, "kernel_size": 3, "hidden": 1024})
    assert fam["small"] == {"batch_size": 8, "hidden": 512}
    assert set(fam["odd"]) == {"batch_size", "hidden"}
    assert family_overrides({"dim": 1}) == {}


def test_op_files_parse_safely_from_parallel_verification_threads():
    """On CPython 3.11.7 two threads building AST objects at once, while another thread's garbage
    collection runs finalizers, raise "AST constructor recursion depth mismatch" now and then
    (seen in an evolve session's verification threads); forge's parses take turns."""
    import threading

    from forge.core.importing import parse_python

    source = (EXAMPLES / "ops" / "layernorm.py").read_text() * 50
    errors: list[BaseException] = []

    class Cycle:
        def __del__(self) -> None:
            self.garbage = [0] * 100  # a finalizer that allocates: it runs in whichever thread collects

    def parse() -> None:
        for _ in range(60):
            try:
                parse_python(source)
            except SystemError as exc:
                errors.append(exc)

    def churn() -> None:
        for _ in range(200_000):
            a, b = Cycle(), Cycle()
            a.other, b.other = b, a

    threads = [threading.Thread(target=parse) for _ in range(3)] + [threading.Thread(target=churn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
