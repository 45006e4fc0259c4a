"""scripts/plot_channels.py's layer-sweep classification: which sweep (single, cumulative
[0, l], cumulative-top [l, L-1]) each condition's layer set belongs to, and at which l. The
cumulative-top sweeps were not drawn at all, and [0, 7] of a top sweep was drawn as a
cumulative point."""

import pytest

from conftest import script_module


@pytest.fixture(scope="module")
def plot():
    return script_module("plot_channels")


def test_sweep_points(plot):
    last = 7  # an 8-layer model
    assert plot.sweep_points("3", last) == [("single", 3)]
    assert plot.sweep_points("0-3", last) == [("cumulative", 3)]
    assert plot.sweep_points("3-7", last) == [("cumulative-top", 3)]
    assert plot.sweep_points("0-7", last) == [("cumulative", 7), ("cumulative-top", 0)]
    assert plot.sweep_points("0", last) == [("single", 0), ("cumulative", 0)]
    assert plot.sweep_points("7", last) == [("single", 7), ("cumulative-top", 7)]
    assert plot.sweep_points("2-5", last) == []
    assert plot.sweep_points("0-3+5", last) == []
    # without run.json's num_layers the top sweeps cannot be told
    assert plot.sweep_points("3-7", None) == []
    assert plot.sweep_points("0-7", None) == [("cumulative", 7)]


def row(layers, base="NONE", task="t"):
    return {"task": task, "base": base, "layers": layers}


def test_layer_series_draws_only_the_sweeps_that_ran(plot):
    last = 7
    single = [row(str(l)) for l in range(8)]
    cumulative = [row(f"0-{l}") for l in range(1, 8)]
    rows = single + cumulative + [row("all")]
    # single and cumulative ran: "0" ends both; "0-7" is not a cumulative-top point, "7" neither
    s = plot.layer_series(rows, "t", last, {"single", "cumulative"})
    assert set(s) == {("NONE", "single"), ("NONE", "cumulative")}
    assert [x for x, _ in s[("NONE", "single")]] == list(range(8))
    assert [x for x, _ in s[("NONE", "cumulative")]] == list(range(8))  # {0} is its first set
    # without run.json's layer_sweeps the same rows gave a two-point cumulative-top line of
    # [0, 7] and {7}; that guess is what layer_sweeps removes
    guessed = plot.layer_series(rows, "t", last, None)
    assert ("NONE", "cumulative-top") in guessed
    # cumulative-top alone: its sets [l, 7], and {7} its last
    top = [row(f"{l}-7") for l in range(0, 7)] + [row("7")]
    t = plot.layer_series(top, "t", last, {"cumulative-top"})
    assert set(t) == {("NONE", "cumulative-top")}
    assert [x for x, _ in t[("NONE", "cumulative-top")]] == list(range(8))
