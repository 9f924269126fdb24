"""The environment a process that runs candidate code starts with: an allowlist.

A candidate's process gets what torch, the compilers, the GPU driver and forge's own worker
protocol read, and nothing else: no provider keys, cloud credentials, tokens, database URLs, the
bank's location or a cluster's address. A name that looks like a secret is dropped even where its
prefix is allowed (``FORGE_LLM_API_KEY``)."""

from __future__ import annotations

import re
from collections.abc import Mapping

_NAMES = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "USER",
        "LOGNAME",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONNOUSERSITE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "LD_LIBRARY_PATH",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "LIBRARY_PATH",
        "MAX_JOBS",
        "COLUMNS",
        "LINES",
        "PYTEST_CURRENT_TEST",
    }
)
# torch and its compilers, OpenMP and BLAS, glibc's allocator, CUDA and the driver, forge's own
_PREFIXES: tuple[str, ...] = ("LC_", "FORGE_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "TRITON_", "OMP_", "MKL_")
_PREFIXES += ("GOMP_", "KMP_", "MALLOC_", "CUDA_", "NVIDIA_", "CUBLAS_", "CUDNN_")
# forge's settings a candidate's process has no use for: where the bank is (a path or a database
# URL with its password), the cluster's address
_FORGE_WITHHELD = ("FORGE_BANK", "FORGE_RAY")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|DSN", re.IGNORECASE)


def allowed(name: str) -> bool:
    """Whether a variable of this name reaches a candidate's process."""
    if _SECRET.search(name) or name.startswith(_FORGE_WITHHELD):
        return False
    return name in _NAMES or name.startswith(_PREFIXES)


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with only what a candidate's process may see."""
    return {k: v for k, v in environ.items() if allowed(k)}
