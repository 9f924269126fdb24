"""The built-in coder's inductor family: Inductor's own code for an op, captured once and run as a
candidate with no torch.compile at run time; verified end to end by the real verifier on a
pointwise chain, a reduction and a pooling op; the module's tensors and the op's inputs found
by identity, whatever the call; training mode handled as the reference behaves there."""

from __future__ import annotations

import copy
import sys
import types
from pathlib import Path

import pytest
import torch
from torch import nn

from forge.agents import CoderContext, HistoryItem
from forge.agents.builtin import BuiltinCoder, BuiltinJudge, inductor
from forge.agents.builtin.inductor.capture import InductorRefused, InputArg, StateArg, TrainMode, capture
from forge.agents.builtin.tuner import FAMILY_KNOB
from forge.core.problem import read_problem_source
from forge.core.statuses import AttemptStatus
from forge.core.verdict import Verdict
from forge.verifier import verify

CATALOG = Path(__file__).parents[2] / "benchmarks" / "op_catalog"


def candidate_class(model: nn.Module, source: str) -> type:
    """``ModelNew`` of ``source`` as the verifier loads it (``forge_reference`` is the op's module)."""
    reference = types.ModuleType("forge_reference")
    reference.Model = type(model)  # type: ignore[attr-defined]
    sys.modules["forge_reference"] = reference
    namespace: dict = {}
    exec(compile(source, "<candidate>", "exec"), namespace)
    return namespace["ModelNew"]


def built_alike(model: nn.Module, cls: type) -> nn.Module:
    candidate = cls.__new__(cls)
    candidate.__dict__.update(copy.deepcopy(model).__dict__)
    return candidate


class Gate(nn.Module):
    """Called as a model calls its layers: keyword arguments, None, a tuple of tensors; returns a
    tuple with None and one of its inputs as given; reads a plain tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.scale = torch.full((16,), 0.5)  # neither parameter nor buffer

    def forward(self, hidden, mask=None, pair=(None, None)):
        a, b = pair
        h = self.norm(torch.nn.functional.silu(self.proj(hidden)) * a + b) * self.scale
        if mask is not None:
            h = h.masked_fill(mask, 0.0)
        return h, None, hidden


CALL = "x0, mask=None, pair=(x1, x2)"


def _inputs() -> list[torch.Tensor]:
    return [torch.randn(2, 8, 16), torch.randn(8, 16), torch.randn(8, 16)]


def test_capture_finds_every_argument_by_identity():
    model = Gate().eval()
    captured = capture(copy.deepcopy(model), _inputs(), CALL)
    assert set(captured.args) == {
        InputArg(0),
        InputArg(1),
        InputArg(2),
        StateArg("proj.weight", "_parameters"),
        StateArg("proj.bias", "_parameters"),
        StateArg("norm.weight", "_parameters"),
        StateArg("norm.bias", "_parameters"),
        StateArg("scale"),
    }
    assert captured.outputs == (None, 0)  # the input returned as given is not the code's output
    assert "torch.compile" not in captured.code and "get_args" not in captured.code


def test_the_candidate_runs_inductors_code_without_compiling(monkeypatch):
    """On fresh inputs and weights the candidate matches the reference, through the call the model
    makes, and no graph is compiled while it runs."""
    model = Gate()
    recipe = inductor.analyze(copy.deepcopy(model), _inputs(), CALL)
    assert not isinstance(recipe, str), recipe
    assert recipe.train is TrainMode.SAME
    cls = candidate_class(model, inductor.render(recipe, None))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    candidate = built_alike(model, cls).eval()
    x, a, b = _inputs()

    def no_compile(*_args, **_kwargs):
        raise AssertionError("the candidate called torch.compile")

    monkeypatch.setattr(torch, "compile", no_compile)
    torch._dynamo.utils.counters.clear()
    with torch.no_grad():
        want = model.eval()(x, pair=(a, b))
        got = candidate(x, pair=(a, b))
    assert not torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert got[1] is None and got[2] is x
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-5)
    # another call than the one compiled for (a mask): the reference, not a wrong kernel
    mask = torch.zeros(2, 8, 16, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(candidate(x, mask, pair=(a, b))[0], model(x, mask, pair=(a, b))[0])


def test_the_candidate_reads_the_weights_the_module_holds_now():
    """The candidate reads its module's tensors straight from their owners' tables: a replaced
    layer's weights are the ones used, and a weight held another way (a parametrization) is
    found as the model finds it."""
    model = Gate()
    recipe = inductor.analyze(copy.deepcopy(model), _inputs(), CALL)
    assert not isinstance(recipe, str), recipe
    cls = candidate_class(model, inductor.render(recipe, None))
    candidate = built_alike(model, cls).eval()
    x, a, b = _inputs()
    for m in (model, candidate):
        m.proj = nn.Linear(16, 16)
        m.proj.load_state_dict(model.proj.state_dict())
        m.scale = torch.full((16,), 2.0)
    with torch.no_grad():
        torch.testing.assert_close(candidate(x, pair=(a, b))[0], model.eval()(x, pair=(a, b))[0])

    class Doubled(nn.Module):
        def forward(self, w):
            return 2 * w

    for m in (model, candidate):
        torch.nn.utils.parametrize.register_parametrization(m.norm, "weight", Doubled())
    with torch.no_grad():
        torch.testing.assert_close(candidate(x, pair=(a, b))[0], model(x, pair=(a, b))[0])


def test_importing_the_candidate_starts_no_compile_pool(monkeypatch):
    """Where Inductor would compile on many threads (a GPU machine's cores), the candidate builds its
    kernels in the importing thread: a pool's threads outlive the import, and one born when the
    pool's first job ends lands in the verifier's timed calls (seen on an H200)."""
    from torch._inductor.async_compile import AsyncCompile

    model = Gate()
    recipe = inductor.analyze(copy.deepcopy(model), _inputs(), CALL)
    assert not isinstance(recipe, str), recipe
    source = inductor.render(recipe, None)

    threads_seen: list[int | None] = []

    def recording(build):  # the compile threads Inductor sees as each kernel is built
        def build_kernel(self, *args, **kwargs):
            threads_seen.append(torch._inductor.config.compile_threads)
            return build(self, *args, **kwargs)

        return build_kernel

    monkeypatch.setattr(torch._inductor.config, "compile_threads", 4)
    for kind in ("cpp_pybinding", "triton"):
        monkeypatch.setattr(AsyncCompile, kind, recording(getattr(AsyncCompile, kind)))
    candidate = built_alike(model, candidate_class(model, source)).eval()
    assert threads_seen and set(threads_seen) == {1}, threads_seen
    x, a, b = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(candidate(x, pair=(a, b))[0], model.eval()(x, pair=(a, b))[0], rtol=1e-4, atol=1e-5)


class Dropped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.tanh(x)) * 2


class Normed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.norm(x))


def test_training_mode_random_runs_the_reference_and_another_op_gets_code_of_its_own():
    x = torch.randn(2, 4, 8, 8)
    dropped = inductor.analyze(Dropped(), [x])
    assert not isinstance(dropped, str) and dropped.train is TrainMode.RANDOM
    assert "None if self.training else self._kernel(xs)" in inductor.render(dropped, None)
    model = Normed()
    recipe = inductor.analyze(copy.deepcopy(model), [x])
    assert not isinstance(recipe, str) and recipe.train is TrainMode.OTHER
    candidate = built_alike(model, candidate_class(model, inductor.render(recipe, None))).train()
    reference = copy.deepcopy(model).train()
    with torch.no_grad():
        torch.testing.assert_close(candidate(x), reference(x), rtol=1e-4, atol=1e-5)
    # the batch statistics moved the running ones in the candidate as in the reference
    torch.testing.assert_close(candidate.norm.running_mean, reference.norm.running_mean)
    torch.testing.assert_close(candidate.norm.running_var, reference.norm.running_var)
    assert not torch.equal(reference.norm.running_mean, model.norm.running_mean)


class Viewed(nn.Module):
    def forward(self, x):
        return x.view(-1), x * 2


def test_an_output_that_is_a_view_of_an_input_is_refused():
    with pytest.raises(InductorRefused, match="output 0 is a view of one of the op's inputs"):
        capture(Viewed(), [torch.randn(4, 4)], None)
    assert "view of one of the op's inputs" in str(inductor.analyze(Viewed(), [torch.randn(4, 4)]))


GLOBAL_SHIFT = torch.randn(4)


class Shifted(nn.Module):
    def forward(self, x):
        return x + GLOBAL_SHIFT  # a tensor the module does not hold


def test_refusals_say_why():
    """What the capture's backend refuses reaches the user unwrapped from dynamo's error; a tensor
    passed as two inputs is refused before compiling."""
    with pytest.raises(InductorRefused, match="argument 1 is a tensor the module does not hold"):
        capture(Shifted(), [torch.randn(4)], None)
    x = torch.randn(4, 4)
    with pytest.raises(InductorRefused, match="one tensor is passed as two of the op's inputs"):
        capture(Viewed(), [x, x], "x0")


def test_inductors_code_competes_with_the_hand_tuned_family(fast_settings):
    """``source`` picks the family; the other side's knobs are inert under it."""
    op = Path(__file__).parents[2] / "examples" / "ops" / "softmax.py"
    coder = BuiltinCoder(op)
    space = coder.space()
    assert space is not None and space[FAMILY_KNOB] == ["inductor", "rowwise"]
    base = {k: v[0] for k, v in space.items()}
    assert coder.canonical({**base, "softmax": "recompute"}) == coder.canonical(base)
    assert coder.canonical({**base, "ind_chunk": 4096}) != coder.canonical(base)
    rowwise = {**base, FAMILY_KNOB: "rowwise"}
    assert coder.canonical({**rowwise, "ind_chunk": 4096}) == coder.canonical(rowwise)
    assert coder.canonical({**rowwise, "softmax": "recompute"}) != coder.canonical(rowwise)
    (first,) = coder.propose(CoderContext(op.stem, op.read_text(), "cpu", "cpp"))
    assert (
        first.configs.config
        and first.configs.config[FAMILY_KNOB] == "inductor"
        and "async_compile" in (first.source or "")
    )
    assert first.configs.compiler_code  # the session's floor (tests/harness/test_compile_floor.py)
    history = [
        HistoryItem(
            1, first.source or "", AttemptStatus.PASSED, config=first.configs.config or {}, speedup_vs_eager=1.0
        )
    ]
    (second,) = coder.propose(CoderContext(op.stem, op.read_text(), "cpu", "cpp", history=history))
    chosen = second.configs
    assert chosen.config and (chosen.config[FAMILY_KNOB] == "inductor") == chosen.compiler_code
    # the judge names only the knobs of the family its next config renders
    review = BuiltinJudge(coder).review(
        CoderContext(op.stem, op.read_text(), "cpu", "cpp", history=history), Verdict.from_json({"status": "passed"})
    )
    assert review.feedback is not None and review.feedback.config
    other = "softmax=" if review.feedback.config[FAMILY_KNOB] == "inductor" else "ind_"
    assert review.feedback.next_step.startswith("try ") and other not in review.feedback.next_step


@pytest.mark.compiles  # Inductor compiles each op, then the verifier its code: a minute, left to .ci/run
@pytest.mark.parametrize("name", ["leaky_relu", "sum_dim1", "maxpool2d"])
def test_inductors_code_passes_verification(name, tmp_path, fast_settings):
    """A pointwise op, a reduction and a pooling op: the first candidate is Inductor's code, and
    the real verifier passes it (stress inputs, shape variants, isolation, integrity)."""
    op = CATALOG / f"{name}.py"
    spec = read_problem_source(op)
    (proposal,) = BuiltinCoder(op).propose(CoderContext(spec.name, spec.source, "cpu", "cpp"))
    config = proposal.configs.config
    assert config and config.get(FAMILY_KNOB, "inductor") == "inductor", proposal.error
    assert "async_compile" in (proposal.source or "")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(proposal.source or "")
    v = verify(op, candidate, fast_settings)
    assert v.status == "passed", (v.reason, v.candidate_output[-2000:])


class Biased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x, scale=None):
        return torch.softmax(torch.nn.functional.gelu(self.proj(x)) * scale, dim=-1)


@pytest.mark.gpu
def test_inductors_triton_code_runs_as_a_candidate_on_a_gpu():
    model = Biased().cuda()
    inputs = [torch.randn(32, 64, device="cuda"), torch.rand(64, device="cuda")]
    recipe = inductor.analyze(copy.deepcopy(model), inputs, "x0, scale=x1", device="cuda")
    assert not isinstance(recipe, str), recipe
    source = inductor.render(recipe, None)
    assert "async_compile.triton(" in source and "_DEVICE = torch.device('cuda" in source
    assert "x.storage_offset() * x.element_size() % 16 == 0" in source  # the alignment Triton's code assumes
    candidate = built_alike(model, candidate_class(model, source)).eval()
    x, scale = torch.randn(32, 64, device="cuda"), torch.rand(64, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(candidate(x, scale=scale), model.eval()(x, scale=scale), rtol=1e-4, atol=1e-5)


def test_the_search_space_is_what_inductor_exposes_on_the_device(monkeypatch):
    """A GPU tunes Triton's configs (max-autotune, coordinate descent, persistent reductions,
    fusion); a CPU its loops' split, fusion and tiling, and its vector width only where it has
    two to choose from. Each knob's first value is Inductor's own default."""
    from torch._inductor import config as inductor_config

    gpu = inductor.knobs("cuda")
    assert set(gpu) == {"ind_autotune", "ind_coordinate", "ind_persistent", "ind_fusion"}
    assert [option for option, _ in gpu.values()] == [
        "max_autotune",
        "coordinate_descent_tuning",
        "triton.persistent_reductions",
        "aggressive_fusion",
    ]
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert set(inductor.knobs("cpu")) == {"ind_chunk", "ind_fusion", "ind_tiling"}
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    cpu = inductor.knobs("cpu")
    assert set(cpu) == {"ind_chunk", "ind_fusion", "ind_tiling", "ind_simd"} and cpu["ind_simd"][1] == [None, 256]
    for option, values in [*cpu.values(), *gpu.values()]:
        owner, name = (
            (inductor_config, option)
            if "." not in option
            else (
                getattr(inductor_config, option.split(".")[0]),
                option.split(".")[1],
            )
        )
        assert getattr(owner, name) == values[0], option  # the search starts at Inductor's default
