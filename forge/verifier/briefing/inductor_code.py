"""Inductor's output code trimmed to what a kernel writer competes with: the kernels it generated
(C++ or Triton sources inside ``async_compile`` calls) and the ``call`` that launches them and the
library routines (``extern_kernels.mm`` ...) between them. Imports, guards, the benchmark harness
and the argument generators are dropped."""

from __future__ import annotations

import re

_KERNEL_START = re.compile(r"^\w+ = async_compile\.\w+\(")
_CALL_START = re.compile(r"^(\s*)def call\(")
_KERNEL_END = re.compile(r"^'{3}(\)|, device_str=)")  # the end of the source string a kernel is built from
_NOISE = re.compile(r"^\s*(assert_size_stride|assert_alignment|del |args\.clear\(\))")  # guards and frees
CODE_LIMIT_CHARS = 12_000


def _kernel_block(lines: list[str], i: int) -> int:
    """The index past the kernel block that starts at ``lines[i]``."""
    j = i + 1
    while j < len(lines) and not _KERNEL_END.match(lines[j]):
        j += 1
    return min(j + 1, len(lines))


def _call_block(lines: list[str], i: int, indent: str) -> int:
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or lines[j].startswith(indent + " ")):
        j += 1
    return j


def trim_output_code(code: str, limit: int = CODE_LIMIT_CHARS) -> str:
    """The kernels and ``call``(s) of ``code`` (one or more modules' output code) in at most
    about ``limit`` characters: the calls whole (up to a third of it: they show the order of the
    kernels and library calls), the kernels in what is left, cut with a note saying how much was
    left out."""
    lines = code.splitlines()
    kernels: list[str] = []
    calls: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _KERNEL_START.match(line):
            end, into = _kernel_block(lines, i), kernels
        elif (m := _CALL_START.match(line)) is not None:
            end, into = _call_block(lines, i, m.group(1)), calls
        else:
            i += 1
            continue
        into.append("\n".join(ln for ln in lines[i:end] if not _NOISE.match(ln)).rstrip())
        i = end
    if not kernels and not calls:
        return _cut("\n".join(lines), limit)
    launched = _cut("\n\n".join(calls), limit // 3)
    return _cut("\n\n".join(kernels), limit - len(launched)) + "\n\n" + launched


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    kept = text[:limit].rsplit("\n", 1)[0]
    return kept + f"\n# ... {len(text) - len(kept)} more characters of Inductor's code left out"
