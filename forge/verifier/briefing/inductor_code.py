"""Inductor's output code trimmed to what a kernel writer competes with: the kernels it generated
(C++ or Triton sources inside ``async_compile`` calls) and the ``call`` that launches them and the
library routines (``extern_kernels.mm`` ...) between them. Imports, guards, the benchmark harness
and the argument generators are dropped, and C++ kernels are condensed (``condensed_cpp``): the
casts, lone braces and bookkeeping Inductor writes around every index take a third of a
listing that a coder reads for its loops and arithmetic, and pays for in tokens every round."""

from __future__ import annotations

import re

_KERNEL_START = re.compile(r"^\w+ = async_compile\.\w+\(")
_CALL_START = re.compile(r"^(\s*)def call\(")
_KERNEL_END = re.compile(r"^'{3}(\)|, device_str=)")  # the end of the source string a kernel is built from
_NOISE = re.compile(r"^\s*(assert_size_stride|assert_alignment|del |args\.clear\(\))")  # guards and frees
CODE_LIMIT_CHARS = 12_000
_CAST = re.compile(r"static_cast<int64_t>\(")
_PLAIN = re.compile(r"[\w.\[\]]*")  # a name, a literal or an element: no parentheses needed
_KEPT_CAST = re.compile(r"std::|\d\.\d|\d\.?[eE]|\d\.\b")  # floor, ceil, a float: the cast converts
_INITIALIZER = re.compile(r"\bauto\s+\w+\s*=\s*$")  # ``auto x = static_cast<int64_t>(0)``: the cast types x
_LONG = re.compile(r"\b(\d+)L\b")
_DROPPED = re.compile(r"^\s*([{}]|.*inductor_cpu_integer_div_error.*)\s*$")
_THREAD_ID = re.compile(r"^\s*int tid = omp_get_thread_num\(\);\s*$")


def condensed_cpp(kernel: str) -> str:
    """A C++ kernel as Inductor wrote it, shorter and the same program to read: ``static_cast`` of
    an integer expression to ``int64_t`` and the ``L`` of integer literals dropped, and lines that
    are a lone brace (Inductor indents every block, so the indentation keeps the nesting), the
    integer-division error flag's bookkeeping, or the thread id where nothing reads it, removed. A
    cast that converts (of ``std::floor``, of a float) or that types an ``auto`` variable is kept."""
    tid_read = len(re.findall(r"\btid\b", kernel)) > len(re.findall(r"\bint tid\b", kernel))
    out = []
    for line in kernel.splitlines():
        if _DROPPED.match(line) or (_THREAD_ID.match(line) and not tid_read):
            continue
        out.append(_LONG.sub(r"\1", _uncast(line)))
    return "\n".join(out)


def _uncast(line: str) -> str:
    """``line`` with each ``static_cast<int64_t>(e)`` of an integer expression written ``e``
    (``(e)`` where ``e`` is an expression), nested ones too; the others kept."""
    pos = 0
    while (m := _CAST.search(line, pos)) is not None:
        depth, j = 1, m.end()
        while j < len(line) and depth:
            depth += {"(": 1, ")": -1}.get(line[j], 0)
            j += 1
        if depth:  # unbalanced (a line cut short): left as it is
            return line
        inner = line[m.end() : j - 1]
        if _KEPT_CAST.search(inner) or _INITIALIZER.search(line[: m.start()]):
            pos = m.end()  # kept; the casts inside it are still looked at
            continue
        line = line[: m.start()] + (inner if _PLAIN.fullmatch(inner) else f"({inner})") + line[j:]
    return line


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
        block = "\n".join(ln for ln in lines[i:end] if not _NOISE.match(ln)).rstrip()
        into.append(condensed_cpp(block) if "cpp_pybinding" in line else block)
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
