#pragma once
// The umbrella header: everything hylens offers. Each header below also compiles on its own;
// include the narrow ones to keep build times down.

#include "core/bf16.hpp"
#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/indices.hpp"
#include "core/tensor.hpp"
#include "core/tensor_view.hpp"
#include "core/thread_pool.hpp"
#include "core/weight.hpp"

#include "io/checkpoint.hpp"
#include "io/config_json.hpp"
#include "io/safetensors.hpp"
#include "io/safetensors_writer.hpp"

#include "text/chat.hpp"
#include "text/tokenizer.hpp"

#include "kernels/attention.hpp"
#include "kernels/conv1d.hpp"
#include "kernels/gated_delta.hpp"
#include "kernels/linear.hpp"
#include "kernels/moe.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"
#include "kernels/ssd.hpp"
#include "kernels/swiglu.hpp"

#include "cache/cache_diff.hpp"
#include "cache/cache_io.hpp"
#include "cache/channels.hpp"
#include "cache/kv_cache.hpp"
#include "cache/parallel_cache.hpp"
#include "cache/parts.hpp"
#include "cache/mask_state.hpp"
#include "cache/recurrent_cache.hpp"
#include "cache/surgery.hpp"

#include "layers/attention.hpp"
#include "layers/decoder.hpp"
#include "layers/deltanet.hpp"
#include "layers/ffn.hpp"
#include "layers/hooks.hpp"
#include "layers/mamba2.hpp"
#include "layers/parallel.hpp"

#include "stack/causal_lm.hpp"
#include "stack/generate.hpp"
#include "stack/hybrid_stack.hpp"
#include "stack/split_prefill.hpp"

#include "interp/circuit.hpp"
#include "interp/lens.hpp"
#include "interp/metrics.hpp"
#include "interp/reader_search.hpp"
#include "interp/ridge.hpp"
#include "interp/run.hpp"
#include "interp/stitch.hpp"
#include "interp/transplant.hpp"

#include "models/load.hpp"
