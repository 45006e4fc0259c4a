"""hylens: interpretability of hybrid language models (Qwen3.5, Granite 4.0 H, Falcon-H1).

The C++ library through pybind11: load a Hugging Face checkpoint, run it, read and patch
activations as NumPy arrays, and cut, mix and transplant the KV and recurrent channels of its
cache. See docs/python.md.
"""

from ._core import (  # noqa: F401
    Cache,
    ChatPrompt,
    ConfigError,
    Encoding,
    Error,
    FormatError,
    GenerateResult,
    Intervention,
    Model,
    Positions,
    RunResult,
    ShapeError,
    SiteRef,
    SplitResult,
    Tokenizer,
    UnsupportedError,
    apply_split_mode,
    bf16_activations,
    channel_mask,
    conv_taps,
    experiment_tasks,
    head_zero,
    load,
    mean_ablate,
    patch,
    patch_heads,
    patch_state,
    proj_patch,
    set_bf16_activations,
    simd_level,
    site,
    site_names,
    skip_layers,
    state_reset_every,
    state_swap,
    surrogate,
    truncate_after,
    wrap_chat,
    zero,
)

from ._experiment import (  # noqa: E402,F401
    CircuitResult,
    EncodeSwapResult,
    ExperimentResult,
    QueryMapResult,
    StitchResult,
    TransplantResult,
    circuit_study,
    encode_swap_study,
    experiment,
    merge,
    query_map_study,
    stitch_study,
    transplant_study,
)

__all__ = [name for name in dir() if not name.startswith("_")]
