"""scripts/plot_stitch.py's title: the run's seeds from the definition's "seeds" list (the title
said "seed None" for every run since the definition names "seeds"), "seed" of older folders."""

import pytest

from conftest import script_module


@pytest.fixture(scope="module")
def plot():
    return script_module("plot_stitch")


def test_figure_title(plot):
    run = {"host": "/m/granite-h-tiny/", "donor": "/m/qwen35-tiny", "vocabulary": {"values": 22},
           "study": {"host_blocks": ["0-1"], "donor_blocks": ["0-2"], "seeds": [1]}}
    assert plot.figure_title(run) == "stitch: qwen35-tiny blocks 0-2 -> granite-h-tiny blocks 0-1 (seed 1, 22 values)"
    run["study"]["seeds"] = [1, 2]
    assert plot.figure_title(run).endswith("(seeds 1,2, 22 values)")
    del run["study"]["seeds"], run["vocabulary"]
    run["study"]["seed"] = 7  # a folder written before the definition listed its seeds
    assert plot.figure_title(run).endswith("blocks 0-1 (seed 7)")
