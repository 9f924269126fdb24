"""What a call through forge.cpp costs before the C function's own work, measured for the brief."""

from __future__ import annotations

from forge.verifier.briefing.cpp_cost import MOST_TENSORS, CppCallCost, measure_cpp_cost


def test_the_fixed_cost_of_a_cpp_call_and_an_openmp_region_is_measured():
    got = measure_cpp_cost(3)
    assert got.tensors == 3 and got.threads >= 1
    # how long each takes depends on the machine and its load (a test beside it makes a woken thread
    # wait for a core: 6 ms, where a quiet VM reads 0.1 ms): measured, and said with the load
    # so the bands are wide; a figure off by a unit (ms read as µs, ns as µs) falls outside them
    assert 0.1 < got.call_us < 1_000 and 0.1 < got.region_us < 20_000, got
    assert 0.1 < got.region_after_idle_us < 100_000, got
    assert measure_cpp_cost(20).tensors == MOST_TENSORS  # an op with more tensors: as many as it takes


def test_a_cost_measured_under_load_says_so():
    loaded = CppCallCost(3, 3.9, 1.4, 6237.2, 2, load="other processes used 1.20 of 2 cores").said()
    assert "6237 µs after 5 ms idle" in loaded
    assert "(measured while other processes used 1.20 of 2 cores: a woken thread waited for a core" in loaded
    assert "these read high). A candidate profile's time in no row" in loaded


def test_the_brief_says_the_fixed_cost_in_words():
    said = CppCallCost(tensors=3, call_us=1.84, region_us=2.5, region_after_idle_us=31.0, threads=2).said()
    assert said.startswith("forge.cpp's fixed cost here: 1.8 µs a call passing 3 tensors and an int")
    assert "region on 2 threads 2.5 µs called back to back, 31 µs after 5 ms idle" in said
    assert "a warm call follows an untimed call of its own, back to back" in said
    assert "and does not). A candidate profile's time in no row is Python" in said and "measured while" not in said
