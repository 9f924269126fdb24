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

Each chosen class becomes one op per state and call its instances share (parameters' and
buffers' shapes and dtypes, the call's form), whatever their plain attributes (a layer index, a
drop-path rate): the op is searched on its first instance, and its kernel is then verified on
every other (``model_run.instances``), which decides by evidence whether an attribute that
differs changes what the layer computes. Every input signature those instances were called with
is verified.
"""

from __future__ import annotations

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
    """Instances of one class that may compute alike: one op, searched on its first instance, its
    banked kernel then verified on each of the others (``model_run.instances``)."""

    name: str  # the op's FORGE_NAME
    cls: ClassUse
    members: list[InstanceUse]  # the instances it stands for; the first is the one searched
    signatures: list[CallUse]  # the first is the op's own call, the rest its shape variants (the same call)
    origins: list[tuple[str, int]]  # per signature: the instance path and its signature index it came from
    share: float  # of the model's time

    @property
    def paths(self) -> list[str]:
        return [m.path for m in self.members]

    @property
    def init_from_model(self) -> bool:
        """The constructor arguments are taken from the model built (``InitCall.from_model``)."""
        return self.members[0].init.from_model

    @property
    def init_args(self) -> list[str]:
        """The searched instance's constructor arguments (Python source, one per positional one)."""
        return list(self.members[0].init.args)


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


def _share_key(inst: InstanceUse) -> tuple[object, ...]:
    """What instances that may share one op agree on: their state's shapes and dtypes, how they
    are built (literal arguments or the model's own), the form of their call and which of its
    tensors are the model's own values, and its tensors' ranks and dtypes. Their plain
    attributes may differ (a layer index, a drop-path rate): whether the kernel still computes
    what each one does is decided by verifying it on each (``model_run.instances``)."""
    call = inst.signatures[0]
    return inst.state, inst.init.from_model, call.call, _pattern(call)


def _pattern(call: CallUse) -> tuple[tuple[int, str, bool], ...]:
    """What every call of one op shares: its tensors' ranks and dtypes, and which are kept (the
    op file's size constants, ``FORGE_FIXED_INPUTS`` and the stress cases are written from its
    first call)."""
    return tuple((len(u.shape), u.dtype, u.fixed) for u in call.tensors)


def _fits(members: list[InstanceUse], inst: InstanceUse) -> bool:
    """``inst``'s calls can be verified as the op's: with those of ``members`` they make at most
    MAX_SIGNATURES distinct calls (each is verified, so a kernel never runs on a call it was not)."""
    calls = {s.model_dump_json() for m in (*members, inst) for s in m.signatures}
    return len(calls) <= MAX_SIGNATURES


def _groups(cls: ClassUse, base: str) -> tuple[list[OpGroup], str]:
    """The class's ops (one per state and call its instances share, named from ``base``), or why
    none can be carved out."""
    if "<locals>" in cls.name:
        return [], f"{cls.name} is defined inside a function: an op file cannot import it"
    found: list[tuple[tuple[object, ...], list[InstanceUse]]] = []
    refused = ""
    for inst in cls.instances:
        why = inst.refusal or inst.init.refusal or _call_refusal(inst)
        if why is not None:
            refused = refused or f"{inst.path}: {why}"
            continue
        key = _share_key(inst)
        home = next((m for k, m in found if k == key and _fits(m, inst)), None)
        if home is None:
            found.append((key, [inst]))
        else:
            home.append(inst)
    class_ms = sum(i.inclusive_ms for i in cls.instances) or 1.0
    ordered = sorted((members for _, members in found), key=lambda m: -len(m))
    return [
        op_group(cls, base if n == 0 else f"{base}_{n + 1}", members, class_ms) for n, members in enumerate(ordered)
    ], refused


def op_group(cls: ClassUse, name: str, members: list[InstanceUse], class_ms: float | None = None) -> OpGroup:
    """The op named ``name`` standing for ``members`` of ``cls`` (the first is searched)."""
    total = class_ms or sum(i.inclusive_ms for i in cls.instances) or 1.0
    signatures, origins = _signatures(members)
    share = round(cls.share * sum(i.inclusive_ms for i in members) / total, 4)
    return OpGroup(name=name, cls=cls, members=members, signatures=signatures, origins=origins, share=share)


def _call_refusal(inst: InstanceUse) -> str | None:
    """Why an instance's calls cannot be one op's (None: they can): a kernel verified on one call
    would run on the others unverified."""
    if len(inst.signatures) > MAX_SIGNATURES:
        return f"data-dependent shapes ({len(inst.signatures)} input shapes over {inst.calls} calls a forward)"
    calls = sorted({s.call for s in inst.signatures})
    if len(calls) > 1:
        return f"it is called {len(calls)} ways ({'; '.join(calls[:2])})"
    if len({_pattern(s) for s in inst.signatures}) > 1:
        return "its calls differ in their tensors' ranks or dtypes, or in which are the model's own values"
    return None


def _signatures(members: list[InstanceUse]) -> tuple[list[CallUse], list[tuple[str, int]]]:
    """The distinct calls of ``members`` (one call, other shapes; ``_fits`` kept them within
    MAX_SIGNATURES), with where each was first seen."""
    found: list[CallUse] = []
    origins: list[tuple[str, int]] = []
    for inst in members:
        for k, sig in enumerate(inst.signatures):
            if sig not in found:
                found.append(sig)
                origins.append((inst.path, k))
    return found, origins


def _repeated(choice: ClassChoice) -> bool:
    """Several instances sharing one op: a repeated block (a decoder layer, a ViT block). Its
    kernel fuses across its parts (a norm into the projections after it, the residual additions)
    and runs as one call where its parts make a dozen."""
    return any(len(g.members) >= 2 for g in choice.groups)


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
            itself = "the model itself: optimized whole when no class inside it is"
            c.reason = "excluded (--exclude)" if names_class(c.cls, exclude) else itself
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
