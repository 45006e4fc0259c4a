"""Shared fixtures of the Python suite: where the golden data is, a reader for safetensors
files that does not go through hylens (so the references are read independently of the code
under test), the manifests' tolerances, and the `hylens` command-line tool for the
comparisons (HYLENS_CLI, set by ctest when the tool is built)."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

SOURCE_DIR = Path(os.environ.get("HYLENS_SOURCE_DIR", Path(__file__).resolve().parents[2]))
GOLDEN = SOURCE_DIR / "tests" / "golden"

_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def read_safetensors(path):
    """{name: array} of a safetensors file (F32 / I64 / BF16 widened to float32)."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = memoryview(data)[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(body[b:e], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(body[b:e], dtype=_DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


def max_abs_diff(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"shape {got.shape} != reference {ref.shape}"
    d = np.abs(got - ref)
    return float(np.nanmax(np.where(np.isnan(d), np.inf, d))) if d.size else 0.0


def assert_close(got, ref, atol, what):
    worst = max_abs_diff(got, ref)
    assert worst <= atol, f"{what}: max |diff| {worst:.3g} > atol {atol:.3g}"


def assert_bitwise(got, ref, what):
    got = np.ascontiguousarray(got)
    ref = np.ascontiguousarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    assert got.tobytes() == ref.tobytes(), f"{what}: not bit-identical (max |diff| {max_abs_diff(got, ref):.3g})"


# Python and the hylens tool run the same C++ functions, compiled in two translation units.
# Every target of the project is built with -ffp-contract=off (root CMakeLists.txt), so g++ does
# not contract a*b+c into FMAs differently per TU, and the two binaries compute the same bits:
# the comparison with the tool is bit for bit.
def assert_matches_tool(got, want, what):
    assert_bitwise(got, want, what)
    return True


def script_module(name):
    """scripts/<name>.py imported as a module (its functions tested without running main)."""
    import importlib.util

    pytest.importorskip("matplotlib")  # the figure scripts import it at the top
    spec = importlib.util.spec_from_file_location(name, SOURCE_DIR / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def golden_model_dirs():
    return sorted(p for p in (GOLDEN / "models").iterdir() if (p / "golden.safetensors").exists())


def surgery_dirs():
    return sorted(p for p in (GOLDEN / "surgery").iterdir() if (p / "surgery.safetensors").exists())


def load_manifest(path):
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="session")
def cli():
    """The hylens command-line tool, or a skip when this build has none."""
    path = os.environ.get("HYLENS_CLI")
    if not path or not Path(path).exists():
        pytest.skip("HYLENS_CLI not set (the command-line tool is built with HYLENS_BUILD_EXAMPLES)")
    return path


def run_cli(cli_path, *args):
    r = subprocess.run([cli_path, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"hylens {' '.join(map(str, args))} failed ({r.returncode}): {r.stderr}"
    return r


def byte_char(b):
    printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
    if printable:
        return chr(b)
    return chr(256 + sum(1 for x in range(b) if not (33 <= x <= 126 or 161 <= x <= 172 or 174 <= x <= 255)))


@pytest.fixture(scope="session")
def byte_tokenizer(tmp_path_factory):
    """A byte-level tokenizer small enough for the golden models' 320-token vocabulary (256 byte
    tokens and the three families' chat specials, as in tests/experiments/fixtures.hpp)."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>",
                "<|start_of_role|>", "<|end_of_role|>"]
    j = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 256 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(specials)]
                        + [{"id": 263 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": False} for i, s in enumerate(["<think>", "</think>"])],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {byte_char(b): b for b in range(256)}, "merges": []},
    }
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    path.write_text(json.dumps(j))
    import hylens

    return hylens.Tokenizer(str(path))


@pytest.fixture(scope="session")
def organisms(tmp_path_factory):
    """Copies of the shipped organisms models/qwen35-tiny and models/granite-h-tiny (a retraining
    of an organism in the middle of the suite cannot change their weights)."""
    import shutil

    root = tmp_path_factory.mktemp("organisms")
    for name in ("qwen35-tiny", "granite-h-tiny"):
        shutil.copytree(SOURCE_DIR / "models" / name, root / name)
    return root / "qwen35-tiny", root / "granite-h-tiny"


def same_files(a, b, files):
    """The files of folder a and folder b are equal byte for byte."""
    for f in files:
        assert (Path(a) / f).read_bytes() == (Path(b) / f).read_bytes(), f
