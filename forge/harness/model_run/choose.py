"""Choosing which module classes of a profiled model to optimize (pure logic).

Every class under the model's own is a candidate, ranked by its share of the model's time. A class
is left out, with the reason, when the user excluded it; when it is a container (its parts are
the work); when it is one of torch's own modules (one tuned kernel or a library call already),
unless the user names it; when its share is below the threshold; when library producers take so
much of its time that fusing the rest cannot clear the noise (Amdahl); when none of its instances
can become an op (arguments that are not tensors, constructor arguments an op file cannot hold,
data-dependent shapes). Of the classes left, one that contains another is left out (its parts are
optimized at their own level) unless a quarter or more of its time is its own work outside them,
or the user names it, or it is a repeated block (instances sharing an op: a decoder layer, whose
kernel fuses across its parts and replaces a dozen module calls with one): then it is optimized
whole, and the classes inside it are optimized too, all their instances included: where the outer
class banks no kernel (the built-in agent cannot lower a decoder's attention, whose rotary
embedding it can), theirs still run; where it does, its kernel runs in place of their forwards. Of
nested repeated blocks the outermost is the one optimized whole. The model's own class is
optimized whole when nothing inside it is chosen, and beside its parts where the agent can
capture a whole model (``whole_model``: the built-in agent's Inductor candidate runs the model as
one call, where torch.compile's own code would run it compiled).

Each chosen class becomes one op per configuration its instances were built with, verified on
every input signature those instances were called with.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from forge.core.model_records import CallUse, ClassUse, InstanceUse, ModelProfile

MIN_SHARE = 0.03  # of the model's time: below it a class cannot move the model's figure
MIN_CEILING = 1.15  # 1 / (library share) below this: within the noise (about +-8% here)
MAX_SIGNATURES = 4  # distinct input shapes per configuration; more are data-dependent
# of a class's time, the work outside the chosen classes inside it above which the class is
# optimized whole: its parts alone would leave that work, and the fusion across it, untouched (a
# residual block's second convolution, batch norm, addition and ReLU beside its ConvBNReLU)
OWN_WORK = 0.25


@dataclass(frozen=True)
class OpGroup:
    """Instances of one class built alike: one op."""

    name: str  # the op's FORGE_NAME
    cls: ClassUse
    init_args: list[str]  # Python source, one per positional argument
    signatures: list[CallUse]  # the first is the op's own call, the rest its shape variants (the same call)
    origins: list[tuple[str, int]]  # per signature: the instance path and its signature index it came from
    paths: list[str]  # the instances
    share: float  # of the model's time
    init_from_model: bool = False  # the constructor arguments are taken from the model built (``InitCall``)
    init_digest: str | None = None  # then the hash those arguments must have (``InitCall.digest``)


@dataclass
class ClassChoice:
    cls: ClassUse
    chosen: bool = False
    reason: str = ""
    groups: list[OpGroup] = field(default_factory=list)


def names_class(cls: ClassUse, names: set[str]) -> bool:
    """One of ``names`` is the class's name, its last part, or its module:name."""
    return cls.name in names or cls.key in names or cls.name.rsplit(".", 1)[-1] in names


def _inside(inner: ClassUse, outer: ClassUse) -> bool:
    """Some instance of ``inner`` sits inside some instance of ``outer``."""
    return any(_within(i, outer) for i in inner.instances)


def _within(instance: InstanceUse, outer: ClassUse) -> bool:
    return any(instance.path.startswith(o.path + ".") for o in outer.instances)


def _own_work(outer: ClassUse, inner: list[ClassUse]) -> float:
    """The share of ``outer``'s time spent outside the instances of ``inner`` classes within it."""
    total = sum(i.inclusive_ms for i in outer.instances)
    if total <= 0:
        return 0.0
    nested = [i for cls in inner for i in cls.instances if _within(i, outer)]
    outermost = [i for i in nested if not any(i.path.startswith(j.path + ".") for j in nested)]
    return max(0.0, 1 - sum(i.inclusive_ms for i in outermost) / total)


def _groups(cls: ClassUse, base: str) -> tuple[list[OpGroup], str]:
    """The class's ops (one per configuration, named from ``base``), or why none can be carved out."""
    if "<locals>" in cls.name:
        return [], f"{cls.name} is defined inside a function: an op file cannot import it"
    by_config: dict[tuple[str, tuple[str, ...], str | None, str], list[InstanceUse]] = defaultdict(list)
    refused = ""
    for inst in cls.instances:
        why = inst.refusal or inst.init.refusal or _call_refusal(inst)
        if why is not None:
            refused = refused or f"{inst.path}: {why}"
            continue
        digest = inst.init.digest if inst.init.from_model else None
        key = (inst.config, tuple(inst.init.args), digest, inst.signatures[0].call)
        by_config[key].append(inst)
    class_ms = sum(i.inclusive_ms for i in cls.instances) or 1.0
    groups = []
    for n, ((_, args, digest, _), members) in enumerate(sorted(by_config.items(), key=lambda kv: -len(kv[1]))):
        signatures, origins = _signatures(members)
        groups.append(
            OpGroup(
                name=base if n == 0 else f"{base}_{n + 1}",
                cls=cls,
                init_args=list(args),
                signatures=signatures,
                origins=origins,
                paths=[i.path for i in members],
                share=round(cls.share * sum(i.inclusive_ms for i in members) / class_ms, 4),
                init_from_model=digest is not None,
                init_digest=digest,
            )
        )
    return groups, refused


def _call_refusal(inst: InstanceUse) -> str | None:
    """Why an instance's calls cannot be one op's (None: they can): a kernel verified on one call
    would run on the others unverified."""
    if len(inst.signatures) > MAX_SIGNATURES:
        return f"data-dependent shapes ({len(inst.signatures)} input shapes over {inst.calls} calls a forward)"
    calls = sorted({s.call for s in inst.signatures})
    if len(calls) > 1:
        return f"it is called {len(calls)} ways ({'; '.join(calls[:2])})"
    return None


def _signatures(members: list[InstanceUse]) -> tuple[list[CallUse], list[tuple[str, int]]]:
    """The distinct calls of ``members`` (one call, other shapes; the same tensors kept as the
    first's), at most MAX_SIGNATURES, with where each came from."""
    found: list[CallUse] = []
    origins: list[tuple[str, int]] = []
    kept = [u.fixed for u in members[0].signatures[0].tensors]
    for inst in members:
        for k, sig in enumerate(inst.signatures):
            alike = [u.fixed for u in sig.tensors] == kept
            if alike and sig not in found and len(found) < MAX_SIGNATURES:
                found.append(sig)
                origins.append((inst.path, k))
    return found, origins


def _repeated(choice: ClassChoice) -> bool:
    """Several instances configured alike (the same state shapes and plain attributes): a
    repeated block (a decoder layer, a ViT block), even where each is its own op (a decoder layer
    built with its index). Its kernel fuses across its parts (a norm into the projections after
    it, the residual additions) and runs as one call where its parts make a dozen."""
    carved = {p for g in choice.groups for p in g.paths}
    configs = [i.config for i in choice.cls.instances if i.path in carved]
    return any(configs.count(c) >= 2 for c in set(configs))


def _eligible(cls: ClassUse, included: bool, min_share: float) -> str | None:
    """Why the class is left out on its own account (None: it is a candidate)."""
    if cls.container:
        return "a container: its parts are the work"
    if included:
        return None
    if cls.torch_builtin:
        return f"torch's own module (a tuned kernel or a library call already); --include {cls.name} tries it"
    if cls.share < min_share:
        return f"{cls.share:.1%} of the model's time, below the {min_share:.0%} threshold (--min-share)"
    if cls.library_share > 0 and 1 / cls.library_share < MIN_CEILING:
        return (
            f"library producers (matmul, convolution, attention) take {cls.library_share:.0%} of its time: "
            f"fusing the rest gains at most {1 / cls.library_share:.2f}x (Amdahl), within the noise"
        )
    return None


def choose_classes(
    profile: ModelProfile,
    stem: str,
    include: set[str] | None = None,
    exclude: set[str] | None = None,
    min_share: float = MIN_SHARE,
    whole_model: bool = False,
) -> list[ClassChoice]:
    """Every class of the model with whether it is optimized and why (chosen first, by share);
    ``whole_model``: the model's own class too, beside its parts."""
    include, exclude = include or set(), exclude or set()
    choices = [ClassChoice(cls) for cls in profile.classes]
    names = [c.name for c in profile.classes]

    def base(cls: ClassUse) -> str:  # two classes of one name (in two modules) get their module's too
        own = cls.name.replace(".", "_")
        return f"{stem}_{own}" if names.count(cls.name) == 1 else f"{stem}_{cls.module.replace('.', '_')}_{own}"

    root = next((c for c in choices if c.cls.key == profile.root), None)
    for c in choices:
        if c is root:
            c.reason = "the model itself: optimized whole when no class inside it is"
            continue
        if names_class(c.cls, exclude):
            c.reason = "excluded (--exclude)"
            continue
        why = _eligible(c.cls, names_class(c.cls, include), min_share)
        if why is None:
            c.groups, refused = _groups(c.cls, base(c.cls))
            why = None if c.groups else refused or "no instance ran"
        c.chosen, c.reason = why is None, why or ""
    eligible = [c for c in choices if c.chosen]  # judged against one set: the order does not matter
    blocks = []
    for c in eligible:
        inner = [o for o in eligible if o is not c and _inside(o.cls, c.cls)]
        if inner and not names_class(c.cls, include) and _own_work(c.cls, [o.cls for o in inner]) < OWN_WORK:
            if _repeated(c):
                blocks.append(c)
                continue
            c.chosen = False
            c.reason = f"its parts ({', '.join(o.cls.name for o in inner)}) are optimized at their own level"
    for c in blocks:  # a block inside another repeated block: the outer one is the level above its parts
        outer = next((o for o in blocks if o is not c and _inside(c.cls, o.cls)), None)
        if outer is not None:
            c.chosen = False
            c.reason = f"inside {outer.cls.name}, which is optimized whole, and its parts are optimized too"
    for c in choices:
        if c.chosen:
            c.reason = f"{sum(g.share for g in c.groups):.1%} of the model's time; {len(c.groups)} op(s)"
            if c in blocks:
                c.reason += "; a repeated block: optimized whole (fusion across its parts), its parts too"
    if root is not None and not names_class(root.cls, exclude) and (whole_model or not any(c.chosen for c in choices)):
        parts = any(c.chosen for c in choices)
        root.groups, refused = _groups(root.cls, base(root.cls))
        root.chosen = bool(root.groups)
        why = (
            "optimized whole beside its parts (one call where they make many)"
            if parts
            else ("no class inside it is worth optimizing: the model is optimized whole")
        )
        root.reason = why if root.chosen else refused
    return sorted(choices, key=lambda c: (not c.chosen, -c.cls.share))
