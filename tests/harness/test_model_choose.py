"""Choosing a model's classes to optimize: each rule leaves a class out with its reason, and the
chosen ones are carved out as importable op files (pure logic over a profile record)."""

from __future__ import annotations

import torch

from forge.core.model_records import CallUse, ClassUse, InitCall, InstanceUse, ModelProfile, TensorUse
from forge.core.problem import load_problem
from forge.harness.model_run.carve import write_ops
from forge.harness.model_run.choose import choose_classes

_T = TensorUse(shape=[4, 8], dtype="float32")


def _call(*tensors: TensorUse) -> CallUse:
    return CallUse(call=", ".join(f"x{i}" for i in range(len(tensors))), tensors=list(tensors))


def _inst(path: str, ms: float = 1.0, args: list[str] | None = None, config: str = "c", **over) -> InstanceUse:
    args = args if args is not None else ["8"]
    fields = {
        "path": path,
        "calls": 1,
        "inclusive_ms": ms,
        "signatures": [_call(TensorUse(shape=[4, 8], dtype="float32"))],
        "init": InitCall(args=args, same_build="|".join(args)),
        "config": config,
        "state": f"weight {args[:1]}",  # the first argument sizes the state
    }
    return InstanceUse(**{**fields, **over})


def _cls(name: str, share: float, *instances: InstanceUse, module: str = "toy", lib: float = 0.0, **over) -> ClassUse:
    fields = {
        "module": module,
        "name": name,
        "torch_builtin": module.startswith("torch"),
        "container": False,
        "library_share": lib,
        "share": share,
        "instances": list(instances),
    }
    return ClassUse(**{**fields, **over})


def _profile(*classes: ClassUse, model_file: str | None = None) -> ModelProfile:
    return ModelProfile(
        source="toy.py",
        import_name="toy",
        model_file=model_file,
        root="toy:Model",
        device="cpu",
        forward_ms=10.0,
        forwards=10,
        classes=list(classes),
    )


def _by_name(choices):
    return {c.cls.name: c for c in choices}


def test_each_rule_gives_its_reason():
    profile = _profile(
        _cls("Block", 0.9, _inst("b0")),
        _cls("Norm", 0.2, _inst("b0.norm"), _inst("b0.norm2")),
        _cls("Linear", 0.5, _inst("b0.fc"), module="torch.nn", lib=0.95),
        _cls("Sequential", 0.9, _inst("seq"), module="torch.nn", container=True),
        _cls("Tiny", 0.01, _inst("b0.tiny")),
        _cls("Proj", 0.3, _inst("b0.proj"), lib=0.92),
        _cls("Masked", 0.2, _inst("b0.m", refusal="its argument 1 is a boolean mask (data-dependent)")),
        _cls("Configured", 0.2, _inst("b0.k", init=InitCall(refusal="its constructor argument 'cfg' is a Cfg"))),
    )
    choices = _by_name(choose_classes(profile, "toy"))
    assert choices["Norm"].chosen and len(choices["Norm"].groups) == 1
    assert "its parts (Norm) are optimized at their own level" in choices["Block"].reason
    assert "torch's own module" in choices["Linear"].reason and "--include Linear" in choices["Linear"].reason
    assert "container" in choices["Sequential"].reason
    assert "below the 3% threshold" in choices["Tiny"].reason
    assert "take 92% of its time" in choices["Proj"].reason and "1.09x" in choices["Proj"].reason
    assert "boolean mask" in choices["Masked"].reason
    assert "'cfg' is a Cfg" in choices["Configured"].reason
    assert [c.cls.name for c in choose_classes(profile, "toy") if c.chosen] == ["Norm"]


def test_include_and_exclude_override_the_rules():
    profile = _profile(_cls("Block", 0.9, _inst("b0")), _cls("Norm", 0.2, _inst("b0.norm")))
    choices = _by_name(choose_classes(profile, "toy", include={"Block"}))
    assert choices["Block"].chosen and choices["Norm"].chosen  # Norm's kernel runs where Block banks none
    choices = _by_name(choose_classes(profile, "toy", exclude={"Norm"}))
    assert choices["Block"].chosen and choices["Norm"].reason == "excluded (--exclude)"


def test_a_class_with_work_of_its_own_beside_its_parts_is_optimized_whole():
    """A residual block whose ConvBNReLU is 60% of its time: the block is one op (its own 40% and
    the fusion across it would be lost otherwise), and ConvBNReLU is one too, every instance of it
    (its kernel runs where the block banks none); at 80% the parts are optimized at their own level."""
    for part_ms, block_chosen in ((0.6, True), (0.8, False)):
        profile = _profile(
            _cls("Residual", 0.8, _inst("blocks.0")),
            _cls("ConvBNReLU", 0.6, _inst("stem", 0.2), _inst("blocks.0.first", part_ms)),
        )
        choices = _by_name(choose_classes(profile, "toy"))
        assert choices["Residual"].chosen is block_chosen and choices["ConvBNReLU"].chosen
        paths = [g.paths for g in choices["ConvBNReLU"].groups]
        assert paths == [["stem", "blocks.0.first"]]
        if not block_chosen:
            assert "its parts (ConvBNReLU) are optimized at their own level" in choices["Residual"].reason


def test_which_nested_class_is_whole_does_not_depend_on_their_order():
    stage = _cls("Stage", 0.9, _inst("s", 10.0))
    residual = _cls("Residual", 0.7, _inst("s.r", 8.0))
    part = _cls("ConvBNReLU", 0.6, _inst("s.r.c", 7.0))
    picks = []
    for order in ((stage, residual, part), (part, residual, stage), (residual, stage, part)):
        picks.append(sorted(c.cls.name for c in choose_classes(_profile(*order), "toy") if c.chosen))
    assert picks[0] == picks[1] == picks[2] == ["ConvBNReLU"]


def test_instances_built_alike_share_an_op_and_others_get_their_own():
    wide = _inst("b1.norm", args=["16"], config="wide", signatures=[_call(TensorUse(shape=[4, 16], dtype="float32"))])
    more = _inst("b2.norm", signatures=[_call(TensorUse(shape=[2, 8], dtype="float32"))])
    profile = _profile(_cls("Norm", 0.3, _inst("b0.norm"), more, wide))
    (norm,) = choose_classes(profile, "toy")
    assert [g.name for g in norm.groups] == ["toy_Norm", "toy_Norm_2"]
    first, second = norm.groups
    assert first.paths == ["b0.norm", "b2.norm"] and [s.tensors[0].shape for s in first.signatures] == [[4, 8], [2, 8]]
    assert second.init_args == ["16"] and abs(first.share + second.share - 0.3) < 1e-3


def _layers(depth: int) -> ClassUse:
    """A decoder layer built with its index (``Layer(8, i)``): the same state at every depth."""
    members = [_inst(f"layers.{i}", args=["8", str(i)], config=f"layer_idx {i}") for i in range(depth)]
    return _cls("Layer", 0.8, *members)


def test_instances_that_differ_in_attributes_alone_are_one_op_at_any_depth():
    """Built with their index, the layers of a 2- and an 8-layer model are one op each: one
    search, whatever the depth; the op stands for every layer, the first being the one searched."""
    for depth in (2, 8):
        (layer,) = choose_classes(_profile(_layers(depth)), "toy")
        (group,) = layer.groups
        assert group.paths == [f"layers.{i}" for i in range(depth)] and group.init_args == ["8", "0"]
        assert abs(group.share - 0.8) < 1e-3
    # another state (a wider layer) or another call form is another op
    wide = _inst("layers.8", args=["16", "8"])
    masked = _inst("layers.9", args=["8", "9"], signatures=[CallUse(call="x0, mask=None", tensors=[_T])])
    (layer,) = choose_classes(_profile(_cls("Layer", 0.8, *_layers(2).instances, wide, masked)), "toy")
    assert [g.paths for g in layer.groups] == [["layers.0", "layers.1"], ["layers.8"], ["layers.9"]]


def test_an_op_never_holds_more_calls_than_it_verifies():
    """Each instance's calls are the op's shape variants, all verified: an instance that would
    take an op past MAX_SIGNATURES distinct calls starts an op of its own."""
    from forge.harness.model_run.choose import MAX_SIGNATURES

    rows = [[r, 8] for r in range(1, MAX_SIGNATURES + 3)]
    calls = [[_call(TensorUse(shape=shape, dtype="float32"))] for shape in rows]
    members = [_inst(f"n{i}", signatures=sigs) for i, sigs in enumerate(calls)]
    (norm,) = choose_classes(_profile(_cls("Norm", 0.3, *members)), "toy")
    assert [len(g.members) for g in norm.groups] == [MAX_SIGNATURES, 2]
    assert all(len(g.signatures) <= MAX_SIGNATURES for g in norm.groups)


def test_twins_are_instances_built_and_called_alike():
    """Instances with the same arguments, configuration and recorded values share one check;
    another argument (a layer index), configuration or recorded mask makes an instance its own."""
    from forge.harness.model_run.kept import twins

    same = [_inst(f"norms.{i}", args=["8"]) for i in range(3)]
    (norm,) = choose_classes(_profile(_cls("Norm", 0.3, *same, _inst("other", args=["8"], config="eps 1e-5"))), "toy")
    assert twins(norm.groups[0]) == {"norms.0": "norms.0", "norms.1": "norms.0", "norms.2": "norms.0", "other": "other"}
    (layer,) = choose_classes(_profile(_layers(3)), "toy")
    assert twins(layer.groups[0]) == {f"layers.{i}": f"layers.{i}" for i in range(3)}
    mask = TensorUse(shape=[4, 4], dtype="float32", fixed=True)
    call = CallUse(call="x0, mask=x1", tensors=[_T, mask])
    masked = [_inst(f"m{i}", signatures=[call]) for i in range(3)]
    (attn,) = choose_classes(_profile(_cls("Attn", 0.3, *masked)), "toy")
    recorded = {"m0": [{1: torch.zeros(4, 4)}], "m1": [{1: torch.ones(4, 4)}], "m2": [{1: torch.zeros(4, 4)}]}
    assert twins(attn.groups[0], recorded) == {"m0": "m0", "m1": "m1", "m2": "m0"}


def test_carved_op_imports_the_models_own_class(tmp_path):
    (tmp_path / "toy.py").write_text(
        "import torch\n\n\nclass Norm(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.ones(n))\n\n    def forward(self, x):\n        return x * self.w\n"
    )

    def signature(rows: int) -> list[CallUse]:
        return [
            _call(TensorUse(shape=[rows, 8], dtype="float32"), TensorUse(shape=[rows], dtype="int64", low=0, high=7))
        ]

    tokens, more = signature(4), _inst("b2.norm", signatures=signature(2))
    profile = _profile(
        _cls("Norm", 0.3, _inst("b0.norm", signatures=tokens), more), model_file=str(tmp_path / "toy.py")
    )
    (norm,) = choose_classes(profile, "toy")
    (path,) = write_ops(norm.groups, profile, tmp_path / "ops")
    problem = load_problem(path)
    assert problem.name == "toy_Norm" and problem.target_class_path == "toy:Norm"
    x, idx = problem.inputs()
    assert x.shape == (4, 8) and idx.dtype.is_floating_point is False and int(idx.max()) <= 7
    assert problem.declared_shapes == [{"in0_0": 2, "in0_1": 8, "in1_0": 2}]  # the second signature
    assert problem.init_inputs() == [8]


def test_a_model_with_nothing_of_its_own_worth_optimizing_is_optimized_whole():
    profile = _profile(
        _cls("Model", 1.0, _inst("", args=["3", "64"])),
        _cls("Conv2d", 0.7, _inst("conv"), module="torch.nn", lib=0.95),
        _cls("Tiny", 0.01, _inst("tiny")),
    )
    choices = _by_name(choose_classes(profile, "toy"))
    assert choices["Model"].chosen and "optimized whole" in choices["Model"].reason
    assert choices["Model"].groups[0].init_args == ["3", "64"]
    profile = _profile(_cls("Model", 1.0, _inst("")), _cls("Norm", 0.2, _inst("norm")))
    choices = _by_name(choose_classes(profile, "toy"))
    assert choices["Norm"].chosen and not choices["Model"].chosen
    assert "optimized whole when no class inside it is" in choices["Model"].reason
    # where the agent can run a whole model as one call (Inductor's code), beside its parts
    choices = _by_name(choose_classes(profile, "toy", whole_model=True))
    assert choices["Norm"].chosen and choices["Model"].chosen
    assert choices["Model"].reason == "optimized whole beside its parts (one call where they make many)"
    excluded = _by_name(choose_classes(profile, "toy", exclude={"Model"}, whole_model=True))
    assert not excluded["Model"].chosen and excluded["Model"].reason == "excluded (--exclude)"


def test_a_model_slowed_when_compiled_beyond_its_null_demotes_its_kernels(tmp_path):
    from forge.core.model_records import FourWay, ModelProof, OpCalls
    from forge.core.paths import BankLocation
    from forge.core.timing_records import PairedRatio
    from forge.db import list_kernels, open_for_writing
    from forge.harness.model_run.compile_evidence import demote_slowing_kernels, slowed_compile
    from tests.kernelbank.helpers import KERNEL, OP, make_bank

    def way(r: tuple[float, float, float], null: tuple[float, float, float]) -> FourWay:
        def pr(m: tuple[float, float, float]) -> PairedRatio:
            return PairedRatio(pairs=30, median=m[0], low=m[1], high=m[2])

        return FourWay(regime="warm", rounds=30, eager_ms=1.0, kernelized_ms=1.0, compiled_ms=1.0,
                       kernelized_compiled_vs_compiled=pr(r), compiled_null=pr(null))  # fmt: skip

    assert slowed_compile(way((0.84, 0.81, 0.88), (1.0, 0.97, 1.03)))
    assert not slowed_compile(way((0.93, 0.90, 0.95), (1.04, 1.01, 1.06)))  # within what the null reads
    assert not slowed_compile(way((1.0, 0.97, 1.02), (1.0, 0.98, 1.02)))
    bank = tmp_path / "bank.db"
    stats = {"paired_eager": {"pairs": 40, "median": 1.6, "low": 1.4, "high": 1.8},
             "paired_compile": {"pairs": 40, "median": 1.5, "low": 1.3, "high": 1.7}}  # fmt: skip
    (kid,) = make_bank(bank, [(OP, KERNEL.read_text(), {"timing_stats": stats})])
    # its kernel never ran in eager (it sits inside an eager-only class's instances): under compile
    # the outer class runs its reference, and this kernel with it
    proof = ModelProof(
        kernelized=2,
        ops=[OpCalls(op="user_rmsnorm", calls=0, kernel_calls=0)],
        outputs_match=True,
        max_abs_diff=0.0,
        tolerance="",
        timings=[way((0.84, 0.81, 0.88), (1.0, 0.97, 1.03))],
    )
    (said,) = demote_slowing_kernels(proof, ["user_rmsnorm"], BankLocation.parse(bank), "cpu")
    assert f"kernel {kid} (user_rmsnorm) is now eager only" in said and "0.84x (0.81-0.88, warm)" in said
    engine = open_for_writing(bank)
    (k,) = list_kernels(engine, "user_rmsnorm")
    engine.dispose()
    assert k.eager_only and k.compile_standing is not None and "Inductor fuses" in k.compile_standing.why
    assert k.compile_standing.by_model
    assert demote_slowing_kernels(proof, ["user_rmsnorm"], BankLocation.parse(bank), "cpu") == []  # eager only now


def test_nested_and_same_named_classes_are_carved_importably(tmp_path):
    from forge.harness.model_run.carve import op_source

    profile = _profile(
        _cls("Outer.Inner", 0.3, _inst("a.inner")),
        _cls("Norm", 0.2, _inst("n1"), module="toy"),
        _cls("Norm", 0.2, _inst("n2"), module="toy.layers"),
        _cls("make.<locals>.Local", 0.2, _inst("local")),
    )
    choices = choose_classes(profile, "toy")
    names = sorted(g.name for c in choices if c.chosen for g in c.groups)
    assert names == ["toy_Outer_Inner", "toy_toy_Norm", "toy_toy_layers_Norm"]
    local = next(c for c in choices if c.cls.name.endswith("Local"))
    assert not local.chosen and "defined inside a function" in local.reason
    nested = next(c for c in choices if c.cls.name == "Outer.Inner").groups[0]
    source = op_source(nested, profile, "0" * 64)
    assert "from toy import Outer  # noqa: E402" in source and "Model = Outer.Inner" in source


def test_a_model_whose_training_step_its_kernels_slow_runs_their_reference_under_autograd(tmp_path):
    import torch

    import forge.kernelbank as kb
    from forge.core.model_records import FourWay, ModelProof, OpCalls, TrainingProof
    from forge.core.paths import BankLocation
    from forge.core.timing_records import PairedRatio
    from forge.db import kernel_detail, list_kernels, open_for_writing, set_status
    from forge.db.kernels import KernelStatus
    from forge.harness.model_run.training_evidence import demote_slowing_training_kernels, slowed_training
    from forge.present import kernel_details
    from tests.kernelbank.helpers import KERNEL, OP, make_bank, passed_verdict

    def step(r: tuple[float, float, float], null: tuple[float, float, float]) -> FourWay:
        def pr(m: tuple[float, float, float]) -> PairedRatio:
            return PairedRatio(pairs=15, median=m[0], low=m[1], high=m[2])

        return FourWay(regime="warm", rounds=15, eager_ms=1.0, kernelized_ms=1.1, kernelized_vs_eager=pr(r),
                       eager_null=pr(null))  # fmt: skip

    assert slowed_training(step((0.92, 0.89, 0.95), (0.99, 0.97, 1.02)))
    assert not slowed_training(step((0.92, 0.89, 0.99), (0.99, 0.90, 1.05)))  # within what the null reads
    checks = [
        {"name": "correctness", "passed": True, "detail": "", "fatal": True},
        {"name": "gradients", "passed": True, "detail": "", "fatal": True},
    ]
    timed = {"regime": "cold", "eager": {"pairs": 30, "median": 1.5, "low": 1.2, "high": 1.8}}
    trains = {"checks": checks, "training_step": timed}
    bank = tmp_path / "bank.db"
    (kid,) = make_bank(bank, [(OP, KERNEL.read_text(), trains)])
    slow = [step((0.92, 0.89, 0.95), (0.99, 0.97, 1.02))]

    def proof_with(kernel_calls: int) -> ModelProof:
        ran = [OpCalls(op="user_rmsnorm", calls=1, kernel_calls=kernel_calls)]
        training = TrainingProof(ops=ran, gradients_match=True, max_abs_diff=0.0, tolerance="", timings=slow)
        return ModelProof(kernelized=1, ops=ran, outputs_match=True, max_abs_diff=0.0, tolerance="", training=training)

    where = BankLocation.parse(bank)
    assert demote_slowing_training_kernels(proof_with(0), ["user_rmsnorm"], where, "cpu") == []  # it did not run there
    proof = proof_with(1)
    x = torch.randn(64, 256, requires_grad=True)
    with kb.open(bank).watch() as seen:  # used where gradients are needed, as its own figures say
        kb.open(bank).load("user_rmsnorm", 256)(x)
    assert seen.usage("user_rmsnorm").kernel_calls == 1
    (said,) = demote_slowing_training_kernels(proof, ["user_rmsnorm"], where, "cpu")
    assert f"kernel {kid} (user_rmsnorm) is no longer used under autograd" in said and "0.92x eager" in said
    assert demote_slowing_training_kernels(proof, ["user_rmsnorm"], where, "cpu") == []  # not used there now

    # a re-verification of the op alone keeps what the model showed; `forge bank show` says it
    engine = open_for_writing(bank)
    set_status(engine, kid, KernelStatus.ACTIVE, passed_verdict(OP, **trains))
    (k,) = list_kernels(engine, "user_rmsnorm")
    detail = kernel_detail(engine, kid)
    engine.dispose()
    assert not k.trains and k.training_by_model is not None and k.training_by_model.by_model
    assert kernel_details(detail)["under autograd"].startswith("not used: in a model, the training step ran 0.92x")

    # where gradients are needed the reference runs; in inference the kernel still does
    layer = kb.open(bank).load("user_rmsnorm", 256)
    with kb.open(bank).watch() as seen:
        layer(x).sum().backward()
    assert seen.usage("user_rmsnorm").fallbacks == 1
    with torch.no_grad(), kb.open(bank).watch() as seen:
        layer(x)
    assert seen.usage("user_rmsnorm").kernel_calls == 1


def test_a_repeated_block_is_optimized_whole_and_its_parts_too():
    """Decoder layers whose attention and MLP are 90% of them: the layer is still one op (its
    kernel fuses across the parts and is one call where they are a dozen), the parts are ops too;
    of nested repeated blocks only the outermost is optimized whole."""
    profile = _profile(
        _cls("Layer", 0.9, _inst("layers.0", 1.0), _inst("layers.1", 1.0)),
        _cls("Attn", 0.45, _inst("layers.0.attn", 0.5), _inst("layers.1.attn", 0.5)),
        _cls("Inner", 0.4, _inst("layers.0.mlp", 0.4), _inst("layers.1.mlp", 0.4)),
        _cls("Act", 0.35, _inst("layers.0.mlp.act", 0.35), _inst("layers.1.mlp.act", 0.35)),
    )
    choices = _by_name(choose_classes(profile, "toy"))
    assert choices["Layer"].chosen and "a repeated block" in choices["Layer"].reason
    assert choices["Attn"].chosen and choices["Act"].chosen
    assert not choices["Inner"].chosen and "inside Layer" in choices["Inner"].reason
