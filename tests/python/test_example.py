"""examples/python/notebook_tour.py runs end to end on the shipped Qwen3.5 model and writes its
figure (a PNG): the example in docs/python.md stays runnable."""

import os
import subprocess
import sys

from conftest import GOLDEN, SOURCE_DIR


def test_notebook_tour_runs(tmp_path):
    png = tmp_path / "tour.png"
    r = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "python" / "notebook_tour.py"),
                        str(GOLDEN / "models" / "qwen3_5_dense"), "--png", str(png)],
                       capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"), timeout=300)
    assert r.returncode == 0, r.stderr
    for line in ("split-prefill", "REC_ONLY  query starts at  0", "state swap", "continues at position 24",
                 "transplanted into B's last position"):
        assert line in r.stdout, line
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
