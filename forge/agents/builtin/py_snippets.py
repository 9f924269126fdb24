"""Python source that the candidates of several families carry, written into them as it is here."""

# Source of the attribute helpers rendered candidates carry (every family needs ``_attr``).
ATTR_SOURCE = """def _attr(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


"""
ATTR_HELPERS = (
    ATTR_SOURCE
    + """def _param(obj, path):
    return _attr(obj, path).detach().contiguous()


"""
)


PLAN_SOURCE = '''def _plan(shape, pshapes):
    """Split the output into outer blocks x an inner run over which each parameter is either
    constant or contiguous and full; per parameter: base offset of each outer block, full flag."""
    key = (shape, pshapes)
    if key in _plans:
        return _plans[key]
    nd = len(shape)
    aligned = [(1,) * (nd - len(p)) + tuple(p) for p in pshapes]
    split = nd
    for s in range(nd, -1, -1):
        if all(all(d == 1 for d in p[s:]) or tuple(p[s:]) == tuple(shape[s:]) for p in aligned):
            split = s
    inner = 1
    for d in shape[split:]:
        inner *= d
    outer_shape = tuple(shape[:split])
    out = []
    for p in aligned:
        full = any(d != 1 for d in p[split:])
        pouter = p[:split]
        count = 1
        for d in pouter:
            count *= d
        base = torch.arange(count, dtype=torch.int64).reshape(pouter).expand(outer_shape).reshape(-1)
        out.append((((base * inner) if full else base).contiguous(), int(full)))
    outer = 1
    for d in outer_shape:
        outer *= d
    _plans[key] = (outer, inner, out)
    return _plans[key]


'''
