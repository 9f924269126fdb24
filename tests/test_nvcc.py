"""CUDA sources forge emits (the LLM coder's examples for the CUDA backend) and receives (the CUDA
candidates the verifier and the GPU suite use) compile with nvcc for sm_90, on a machine with no
GPU: a candidate's compile errors show before a GPU is lent. Skipped where nvcc is not installed;
marked ``gpu_suite`` (the default run leaves it out, .ci/run runs it)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import CANDIDATES
from tests.support.nvcc import cuda_source, find_nvcc, nvcc_error, one_translation_unit

PROMPT_EXAMPLES = Path(__file__).parents[1] / "forge" / "agents" / "prompts" / "examples"
SOURCES = {
    "the coder's CUDA rowwise example": PROMPT_EXAMPLES / "cuda_rowwise.txt",
    "the coder's CUDA pointwise example": PROMPT_EXAMPLES / "cuda_pointwise.txt",
    "the honest CUDA softmax candidate": CANDIDATES / "softmax" / "honest_cuda.py",
}

pytestmark = [
    pytest.mark.gpu_suite,  # minutes of nvcc over torch's headers: with the GPU suite's dry run, in .ci/run
    pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed"),
]


@pytest.fixture(scope="module")
def complaints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """nvcc's complaint about each source (None: it compiled). All of them are compiled as one
    translation unit (torch's headers parsed once); only if that fails is each compiled alone, to
    say which one nvcc refuses."""
    sources = {what: cuda_source(path.read_text()) for what, path in SOURCES.items()}
    missing = [what for what, source in sources.items() if source is None]
    assert not missing, f"no CUDA_SOURCE string in: {missing}"
    into = tmp_path_factory.mktemp("nvcc")
    texts = [source for source in sources.values() if source is not None]
    if nvcc_error(one_translation_unit(texts), into / "all") is None:
        return dict.fromkeys(sources)
    with ThreadPoolExecutor(len(sources)) as pool:
        done = {what: pool.submit(nvcc_error, str(src), into / str(i)) for i, (what, src) in enumerate(sources.items())}
        return {what: future.result() for what, future in done.items()}


@pytest.mark.parametrize("what", sorted(SOURCES))
def test_cuda_sources_compile_for_sm90(what, complaints):
    assert complaints[what] is None


def test_a_cuda_compile_error_is_caught(tmp_path):
    broken = "#include <torch/extension.h>\n__global__ void k(float* y) { y[threadIdx.x] = undefined_name; }\n"
    said = nvcc_error(broken, tmp_path)
    assert said is not None and "undefined_name" in said
