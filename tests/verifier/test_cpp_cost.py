"""What a call through forge.cpp costs before the C function's own work, measured for the brief."""

from __future__ import annotations

from forge.verifier.briefing.cpp_cost import MOST_TENSORS, CppCallCost, measure_cpp_cost


def test_the_fixed_cost_of_a_cpp_call_and_an_openmp_region_is_measured():
    got = measure_cpp_cost(3)
    assert got.tensors == 3 and got.threads >= 1
    # microseconds, not nothing and not milliseconds: a call that did work would read far more
    assert 0 < got.call_us < 500 and 0 < got.region_us < 500 and 0 < got.region_after_idle_us < 5000
    assert measure_cpp_cost(20).tensors == MOST_TENSORS  # an op with more tensors: as many as it takes


def test_the_brief_says_the_fixed_cost_in_words():
    said = CppCallCost(tensors=3, call_us=1.84, region_us=2.5, region_after_idle_us=31.0, threads=2).said()
    assert said.startswith("forge.cpp's fixed cost here: 1.8 µs a call passing 3 tensors and an int")
    assert "region on 2 threads 2.5 µs called back to back, 31 µs after 5 ms idle" in said
