"""The cost model: what a plan should cost per device and per step, before anything runs, so plans
can be ranked and those over the memory limit refused. Per parameterised module ``m`` of the model
(its parameter count ``P_m``, output elements ``A_m`` and FLOPs ``F_m`` measured by one forward
pass on the sample inputs, on this process's CPU), bytes per element ``b``, degrees ``tp`` and
``dp``:

memory per device (bytes)
  ``params  = Σ P_m·b / (tp if m is tensor-parallel) / (dp if m is inside an FSDP unit)``
  ``        + max over units of the unit's P·b/tp``  (one unit all-gathered while it runs)
  ``grads   = params``  (training)  ``optimizer = k_opt · params``  (SGD 0, Adam 2)
  ``acts    = Σ A_m·b / dp / (tp if m's output stays sharded)``  (training: every output is kept
  for backward; a checkpointed module keeps only its input; inference: the largest output)

compute time
  ``t_c = (Σ_tp F_m / tp + Σ_rest F_m) / dp · (3 if training else 1) / peak_flops``
  (backward costs twice the forward; FLOPs outside the Linear/Embedding layers are replicated),
  times ``world_size / cores`` when the ranks share fewer cores than there are ranks

communication (bytes moved per device, ring collectives over ``n`` ranks: all-reduce
``2(n-1)/n·S``, all-gather and reduce-scatter ``(n-1)/n·S`` each)
  tensor parallel: an all-reduce of each rowwise output (``A_m·b/dp``), and in training another of
  each colwise input gradient;
  FSDP: per unit, an all-gather of its ``P·b/tp`` in forward, in training another in backward (when
  it reshards after forward) and a reduce-scatter of its gradients;
  ``t_comm = Σ volume / link_bandwidth + α · collectives``

``step = t_c + t_comm`` (no overlap assumed). ``Calibration`` fits one factor on each term from
measured steps (least squares on the relative error) and reports the mean relative error before
and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from forge.core.parallel_plan import Layout, ParallelPlan, TpStyle, matched_modules
from forge.parallel.static_checks import forward_once


@dataclass(frozen=True)
class ModuleFacts:
    name: str
    params: int
    output_elements: int
    input_elements: int
    flops: int  # the module's own matmuls (Linear); 0 for the rest


@dataclass(frozen=True)
class ModelFacts:
    modules: list[ModuleFacts]
    total_flops: int  # one forward pass, everything
    bytes_per_element: int


def model_facts(model: nn.Module, inputs: Sequence[Any]) -> ModelFacts:
    """One forward pass on ``inputs`` with hooks: each parameterised leaf's sizes and FLOPs."""
    facts: list[ModuleFacts] = []
    hooks = []
    for name, module in model.named_modules():
        own = sum(p.numel() for p in module.parameters(recurse=False))
        if not name or not own:
            continue

        def hook(m: nn.Module, args: tuple[Any, ...], out: Any, name: str = name, own: int = own) -> None:
            x = next((a for a in args if isinstance(a, torch.Tensor)), None)
            y = out[0] if isinstance(out, tuple) else out
            flops = (
                2 * m.in_features * m.out_features * (y.numel() // m.out_features) if isinstance(m, nn.Linear) else 0
            )
            facts.append(ModuleFacts(name, own, y.numel(), x.numel() if x is not None else 0, flops))

        hooks.append(module.register_forward_hook(hook))
    counter = FlopCounterMode(display=False)
    with counter:
        forward_once(model, inputs, hooks)
    size = next((p.element_size() for p in model.parameters()), 4)
    return ModelFacts(facts, int(counter.get_total_flops()), size)


@dataclass(frozen=True)
class Prediction:
    memory_bytes: int  # per device
    compute_s: float
    comm_s: float
    comm_bytes: int
    collectives: int

    @property
    def step_s(self) -> float:
        return self.compute_s + self.comm_s


@dataclass(frozen=True)
class Machine:
    peak_flops: float  # FLOP/s of one rank
    link_bytes_per_s: float  # ring all-reduce bus bandwidth between the ranks
    latency_s: float = 50e-6  # what one collective costs before any byte moves (measure_link measures it)
    optimizer_states: int = 0  # per parameter: SGD 0, Adam 2
    cores: int = 0  # cores the ranks share (0: one device each, as GPUs are)


def _ring(kind: str, size: float, n: int) -> float:
    if n <= 1:
        return 0.0
    return size * (2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n)


def predict(
    facts: ModelFacts, plan: ParallelPlan, machine: Machine, model: nn.Module, train: bool = True
) -> Prediction:
    """The plan's memory per device and step time on ``machine``, as the module docstring says."""
    tp, dp, b = plan.degree("tp"), plan.degree("dp"), facts.bytes_per_element
    style = {n: r for r in plan.tp for n in matched_modules(model, r.pattern)} if tp > 1 else {}
    units = [n for p in (plan.fsdp.units if plan.fsdp and dp > 1 else []) for n in matched_modules(model, p)]
    unit_of = {m.name: next((u for u in units if m.name == u or m.name.startswith(u + ".")), "") for m in facts.modules}
    fsdp_all = plan.fsdp is not None and dp > 1  # the root is a unit too: everything is sharded
    local_params = {m.name: m.params * b / (tp if m.name in style else 1) for m in facts.modules}
    params = sum(v / (dp if fsdp_all else 1) for v in local_params.values())
    unit_bytes: dict[str, float] = {}
    for m in facts.modules:
        unit_bytes[unit_of[m.name]] = unit_bytes.get(unit_of[m.name], 0.0) + local_params[m.name]
    params += max(unit_bytes.values(), default=0.0) if fsdp_all else 0.0
    checkpointed = [n for p in plan.checkpoint for n in matched_modules(model, p)]

    def act(m: ModuleFacts) -> float:
        rule = style.get(m.name)
        sharded = rule is not None and rule.layouts()[1] is not Layout.REPLICATE
        inside = any(m.name.startswith(c + ".") for c in checkpointed)
        return 0.0 if inside and train else m.output_elements * b / dp / (tp if sharded else 1)

    acts = sum(act(m) for m in facts.modules) if train else max((act(m) for m in facts.modules), default=0.0)
    memory = params * (1 + (1 + machine.optimizer_states if train else 0)) + acts
    tp_flops = sum(m.flops for m in facts.modules if m.name in style)
    flops = (tp_flops / tp + (facts.total_flops - tp_flops)) / dp * (3 if train else 1)
    volume, collectives = 0.0, 0
    for m in facts.modules:
        rule = style.get(m.name)
        if rule is not None and rule.style is TpStyle.ROWWISE:
            volume += _ring("all_reduce", m.output_elements * b / dp, tp)
            collectives += 1
        if rule is not None and rule.style is TpStyle.COLWISE and train:
            volume += _ring("all_reduce", m.input_elements * b / dp, tp)
            collectives += 1
    if fsdp_all:
        for size in unit_bytes.values():
            passes = (2 if plan.fsdp is not None and plan.fsdp.reshard_after_forward else 1) if train else 1
            volume += passes * _ring("all_gather", size, dp) + (_ring("reduce_scatter", size, dp) if train else 0)
            collectives += passes + (1 if train else 0)
    comm_s = volume / machine.link_bytes_per_s + machine.latency_s * collectives
    # more ranks than cores: each rank computes on its share of them
    shared = max(1.0, plan.world_size / machine.cores) if machine.cores else 1.0
    return Prediction(int(memory), flops / machine.peak_flops * shared, comm_s, int(volume), collectives)


@dataclass
class Calibration:
    """Scale factors on the compute and communication terms, fitted to measured steps."""

    compute: float = 1.0
    comm: float = 1.0
    seen: list[tuple[Prediction, float]] = field(default_factory=list)

    def step_s(self, p: Prediction) -> float:
        return self.compute * p.compute_s + self.comm * p.comm_s

    def error(self, calibrated: bool = True) -> float | None:
        """Mean relative error of the predicted step against the measured ones."""
        if not self.seen:
            return None
        guess = self.step_s if calibrated else (lambda p: p.step_s)
        return sum(abs(guess(p) - t) / t for p, t in self.seen) / len(self.seen)

    def add(self, prediction: Prediction, measured_s: float) -> None:
        """One more measurement; the factors are fitted again (least squares on the relative
        error, kept positive)."""
        self.seen.append((prediction, measured_s))
        # rows weighted by 1/measured: the fit minimises the relative error, the one reported
        a = torch.tensor([[p.compute_s / t, p.comm_s / t] for p, t in self.seen], dtype=torch.float64)
        y = torch.ones(len(self.seen), dtype=torch.float64)
        if len(self.seen) > 1 and int(torch.linalg.matrix_rank(a)) == 2:
            fit = torch.linalg.lstsq(a, y.unsqueeze(1)).solution.squeeze(1)
            if bool((fit > 0).all()):
                self.compute, self.comm = (float(v) for v in fit)
                return
        # one factor on each term alone (a negative factor means nothing), keep the better of them
        best = None
        for col in range(2):
            x = a[:, col]
            if float(x @ x) > 0:
                k = float((x @ y) / (x @ x))
                err = float(((x * k - y) ** 2).sum())
                if k > 0 and (best is None or err < best[0]):
                    best = (err, col, k)
        if best is None:
            return
        _err, col, k = best
        self.compute, self.comm = (k, 0.0) if col == 0 else (0.0, k)


def over_memory(prediction: Prediction, limit_bytes: int | None) -> str | None:
    """Why the plan does not fit a device of ``limit_bytes`` (None: it fits, or no limit)."""
    if limit_bytes is None or prediction.memory_bytes <= limit_bytes:
        return None
    return f"needs {prediction.memory_bytes / 2**30:.2f} GiB per device, more than {limit_bytes / 2**30:.2f} GiB"
