"""Rendering the coder's and judge's prompts from the jinja2 templates in ``agents/prompts``."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"
_ROWWISE = re.compile(r"softmax|norm|\.sum\(|\.mean\(|amax|logsumexp|torch\.(sum|mean|max|var)\b")


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # prompts, not HTML
    )


def render(name: str, **values: Any) -> str:
    return str(_env().get_template(name).render(**values))


def category(op_source: str) -> str:
    """The op's family, to pick an example of the same kind: rowwise or pointwise."""
    return "rowwise" if _ROWWISE.search(op_source) else "pointwise"


def example(backend: str, op_source: str) -> str:
    kind = backend if backend in ("triton", "cuda") else "cpp"
    path = PROMPTS / "examples" / f"{kind}_{category(op_source)}.txt"
    return path.read_text().strip()
