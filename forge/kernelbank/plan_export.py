"""A banked plan as a short Python file that applies it with plain torch.distributed calls, for a
program that wants no forge at run time. It does what ``plan_apply.apply_plan`` does, written out:
the same patterns (matched part by dotted part), styles, layouts and FSDP units."""

from __future__ import annotations

from forge.core.parallel_plan import Layout, ParallelPlan, TpStyle

_STYLE = {TpStyle.COLWISE: "ColwiseParallel", TpStyle.ROWWISE: "RowwiseParallel", TpStyle.SEQUENCE: "SequenceParallel"}
_PLACEMENT = {Layout.REPLICATE: "Replicate()", Layout.SHARD_LAST: "Shard(-1)", Layout.SHARD_SEQUENCE: "Shard(1)"}

_BODY = '''


def _matching(model, pattern):
    """Module names matching a pattern part by dotted part ("*" stays within one part)."""
    parts = pattern.split(".")
    return [
        name for name, _ in model.named_modules()
        if name and len(name.split(".")) == len(parts)
        and all(fnmatchcase(n, p) for n, p in zip(name.split("."), parts))
    ]


def parallelize(model, device_type="cpu"):
    """Shard ``model`` in place on every rank (after init_process_group); returns the mesh."""
    mesh = init_device_mesh(device_type, (DP, TP), mesh_dim_names=("dp", "tp"))
    if TP > 1 and TP_RULES:
        styles = {name: style() for pattern, style in TP_RULES for name in _matching(model, pattern)}
        parallelize_module(model, mesh["tp"], styles)
    if FSDP_UNITS is not None and DP > 1:
        modules = dict(model.named_modules())
        units = {name for pattern in FSDP_UNITS for name in _matching(model, pattern)}
        for name in sorted(units, key=lambda n: -n.count(".")):  # innermost first
            fully_shard(modules[name], mesh=mesh["dp"], reshard_after_forward=RESHARD_AFTER_FORWARD)
        fully_shard(model, mesh=mesh["dp"], reshard_after_forward=RESHARD_AFTER_FORWARD)
    return mesh
'''


def _style_call(style: TpStyle, layouts: tuple[Layout | None, Layout | None]) -> str:
    if style is TpStyle.SEQUENCE:
        return "SequenceParallel"
    kw = [f"{k}={_PLACEMENT[v]}" for k, v in zip(("input_layouts", "output_layouts"), layouts, strict=True) if v]
    return f"lambda: {_STYLE[style]}({', '.join(kw)})" if kw else _STYLE[style]


def plan_module(plan: ParallelPlan, header: str) -> str:
    """The Python source of a module whose ``parallelize(model)`` applies ``plan``; ``header``
    (what the plan is, its evidence) opens its docstring."""
    rules = "".join(
        f"    ({r.pattern!r}, {_style_call(r.style, (r.input_layout, r.output_layout))}),\n" for r in plan.tp
    )
    fsdp = repr(plan.fsdp.units) if plan.fsdp is not None else "None"
    reshard = plan.fsdp.reshard_after_forward if plan.fsdp is not None else True
    lines = [
        f'"""{header}\n\nOn every rank, after torch.distributed.init_process_group:\n\n'
        '    mesh = parallelize(model)  # the model this plan was verified for\n"""\n',
        "from fnmatch import fnmatchcase\n",
        "from torch.distributed.device_mesh import init_device_mesh",
        "from torch.distributed.fsdp import fully_shard",
        "from torch.distributed.tensor import Replicate, Shard  # noqa: F401 (layouts, when the plan names them)",
        "from torch.distributed.tensor.parallel import (  # noqa: F401",
        "    ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module,\n)\n",
        f"DP, TP = {plan.degree('dp')}, {plan.degree('tp')}",
        f"TP_RULES = [  # (module-name pattern, style)\n{rules}]",
        f"FSDP_UNITS = {fsdp}  # None: no FSDP",
        f"RESHARD_AFTER_FORWARD = {reshard}",
    ]
    return "\n".join(lines) + _BODY
