"""scripts/plot_channels.py's layer-sweep classification: which sweep (single, cumulative
[0, l], cumulative-top [l, L-1]) each condition's layer set belongs to, and at which l. The
cumulative-top sweeps were not drawn at all, and [0, 7] of a top sweep was drawn as a
cumulative point."""

import importlib.util

import pytest

from conftest import SOURCE_DIR

SCRIPT = SOURCE_DIR / "scripts" / "plot_channels.py"


@pytest.fixture(scope="module")
def plot():
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("plot_channels", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
