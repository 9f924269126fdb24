"""An op's identity hash (kept free of heavy imports: the runtime computes it on load)."""

from __future__ import annotations

import ast
import hashlib
import inspect

from forge.core.importing import parse_python


def normalized_hash(source: str) -> str:
    """sha256 of the source with comments and formatting removed (ast round trip)."""
    try:
        norm = ast.unparse(parse_python(source))
    except SyntaxError:
        norm = source
    return hashlib.sha256(norm.encode()).hexdigest()


def op_identity(op_source_hash: str, model_cls: type | None) -> str:
    """The op hash, extended by the source of ``model_cls`` when Model comes from user code."""
    if model_cls is None:
        return op_source_hash
    try:
        part = normalized_hash(inspect.getsource(model_cls))
    except (OSError, TypeError):
        part = f"{model_cls.__module__}:{model_cls.__qualname__}"
    return hashlib.sha256(f"{op_source_hash}\n{part}".encode()).hexdigest()
