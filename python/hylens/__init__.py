"""hylens: interpretability of hybrid language models (Qwen3.5, Granite 4.0 H, Falcon-H1).

The C++ library through pybind11: load a Hugging Face checkpoint, run it, read and patch
activations as NumPy arrays, and cut, mix and transplant the KV and recurrent channels of its
cache. See docs/python.md.
"""

from . import _core
from ._core import __version__  # noqa: F401
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
    NonFiniteError,
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
from ._tasks import StudyPrompt, score_answer, task_info, task_items  # noqa: E402,F401



def load(path, **kwargs):
    """Loads a model folder (config.json + safetensors, F32 or BF16) of any supported family;
    as hylens._core.load (mmap=, check_finite=), and warns (UserWarning) when the checkpoint
    holds tensors the model does not use (Model.unused_tensors: a config.json describing fewer
    layers than the file, another model's config)."""
    import warnings

    model = _core.load(path, **kwargs)
    warning = model.unused_tensors_warning
    if warning:
        warnings.warn(warning, stacklevel=2)
    return model


__all__ = [name for name in dir() if not name.startswith("_")]
