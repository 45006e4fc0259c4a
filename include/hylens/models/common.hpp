#pragma once
// Shared pieces of the family loaders: a checkpoint seen through a key prefix, with every
// tensor's shape checked against what config.json implies, and the aliases of the three
// family model types.

#include <cmath>       // std::isfinite
#include <cstddef>     // std::size_t
#include <filesystem>  // std::filesystem::path
#include <limits>      // std::numeric_limits
#include <string>      // std::string
#include <vector>      // std::vector

#include "../core/error.hpp"
#include "../core/weight.hpp"
#include "../io/checkpoint.hpp"
#include "../io/config_json.hpp"
#include "../layers/attention.hpp"
#include "../layers/deltanet.hpp"
#include "../layers/ffn.hpp"
#include "../layers/mamba2.hpp"
#include "../layers/parallel.hpp"
#include "../stack/causal_lm.hpp"
#include "../stack/hybrid_stack.hpp"

namespace hylens {

using QwenStack = HybridStack<DeltaNetLayer<>, AttentionLayer<>>;
using GraniteStack = HybridStack<Mamba2Layer<>, AttentionLayer<>>;
using FalconH1Stack = HybridStack<ParallelLayer<AttentionLayer<>, Mamba2Layer<>>>;

/// Qwen3.5, Qwen3.5-MoE and Qwen3-Next (Gated DeltaNet + gated attention).
using Qwen35Model = CausalLM<QwenStack>;
/// IBM Granite 4.0 H (Mamba-2 + attention, dense or MoE).
using GraniteModel = CausalLM<GraniteStack>;
/// Falcon-H1 (attention and Mamba-2 in parallel in every layer).
using FalconH1Model = CausalLM<FalconH1Stack>;

namespace models {

/// A checkpoint seen through a key prefix ("model." or "model.language_model."). With
/// `check_finite`, the small parameters read by vec() are scanned for NaN and infinity.
class TensorSource {
public:
    TensorSource(io::Checkpoint ckpt, std::string prefix, bool check_finite = true)
        : ckpt_(std::move(ckpt)), prefix_(std::move(prefix)), check_finite_(check_finite) {}

    const io::Checkpoint& checkpoint() const noexcept { return ckpt_; }
    const std::string& prefix() const noexcept { return prefix_; }
    bool has(const std::string& key) const { return ckpt_.contains(prefix_ + key); }
    bool has_global(const std::string& name) const { return ckpt_.contains(name); }

    /// A matrix (or any tensor) used in place, shape checked against config.json's.
    Weight matrix(const std::string& key, const std::vector<std::size_t>& shape) const {
        return global_matrix(prefix_ + key, shape);
    }
    Weight global_matrix(const std::string& name, const std::vector<std::size_t>& shape) const {
        check<FormatError>(ckpt_.contains(name), "[load] ", ckpt_.dir().string(), ": missing tensor '", name, "'");
        const auto& info = ckpt_.info(name);
        check<ShapeError>(info.shape == shape, "[load] ", ckpt_.dir().string(), ": tensor '", name, "' has shape ",
                          shape_string(info.shape), " but config.json implies ", shape_string(shape));
        return ckpt_.weight(name);
    }
    /// A small parameter widened to float32 (norm weights, conv kernels, per-head scalars, biases).
    /// A non-finite value is a FormatError naming the tensor and the index: some of these would
    /// not turn the activations non-finite (A_log = +inf makes the decay 0, dt_bias = -inf the
    /// step 0), so the forward's finite check could not catch them. The large matrices are left
    /// to that check and to `hylens verify` (scanning them would read the whole model at load).
    std::vector<float> vec(const std::string& key, const std::vector<std::size_t>& shape) const {
        const std::string name = prefix_ + key;
        (void)global_matrix(name, shape);
        std::vector<float> v = ckpt_.read_f32(name);
        if (check_finite_)
            for (std::size_t i = 0; i < v.size(); ++i)
                check<FormatError>(std::isfinite(v[i]), "[load] ", ckpt_.dir().string(), ": tensor '", name, "' ",
                                   shape_string(shape), " holds ", v[i], " at flat index ", i,
                                   " (`hylens verify --model DIR` lists every non-finite weight)");
        return v;
    }
    /// As vec(), or empty when the tensor is absent.
    std::vector<float> optional_vec(const std::string& key, const std::vector<std::size_t>& shape) const {
        return has(key) ? vec(key, shape) : std::vector<float>{};
    }

private:
    io::Checkpoint ckpt_;
    std::string prefix_;
    bool check_finite_;
};

/// rope_theta and partial_rotary_factor from rope_parameters (new format) or the top level.
struct RopeParams {
    double theta;
    double partial_rotary_factor;
};
/// A floating-point field that must be finite, > 0 and below `below` (rope_theta; rms_norm_eps
/// below 1), `fallback` when absent. An epsilon of 1e30 or infinity would load and turn every
/// logit into 0 (a uniform distribution, no NaN for the finite check to catch), one of 0 or
/// below into NaN, blamed on the weights.
inline double positive_finite(const io::Config& c, std::string_view key, double fallback,
                              double below = std::numeric_limits<double>::infinity()) {
    const double v = c.get_double(key, fallback);
    if (!(std::isfinite(v) && v > 0 && v < below)) {
        const std::string where = c.key_prefix().empty() ? std::string(key) : c.key_prefix() + "." + std::string(key);
        if (std::isfinite(below))
            fail<ConfigError>("[load] ", c.path(), ": ", where, " must be finite, > 0 and below ", below, ", got ", v);
        fail<ConfigError>("[load] ", c.path(), ": ", where, " must be finite and > 0, got ", v);
    }
    return v;
}

/// rms_norm_eps: the norms' variance floor, in (0, 1) (released models: 1e-6 to 1e-5).
inline float norm_eps(const io::Config& c, double fallback) {
    return static_cast<float>(positive_finite(c, "rms_norm_eps", fallback, 1.0));
}

/// rope_theta: finite, > 0, and a normal float32 (the kernels compute in float32: a theta of
/// 1e-300 became 0, and 1 / 0^e made every logit NaN, blamed on the weights).
inline double rope_theta(const io::Config& c, double fallback) {
    const double v = positive_finite(c, "rope_theta", fallback);
    const std::string where = c.key_prefix().empty() ? std::string("rope_theta") : c.key_prefix() + ".rope_theta";
    check<ConfigError>(v >= static_cast<double>(std::numeric_limits<float>::min()) &&
                           v <= static_cast<double>(std::numeric_limits<float>::max()),
                       "[load] ", c.path(), ": ", where, " must be a normal float32 value (", std::numeric_limits<float>::min(),
                       " to ", std::numeric_limits<float>::max(), "), got ", v);
    return v;
}

inline RopeParams read_rope(const io::Config& c, double default_theta) {
    RopeParams r{default_theta, c.get_double("partial_rotary_factor", 1.0)};
    r.theta = rope_theta(c, default_theta);
    std::string type = "default";
    if (c.is_object("rope_parameters")) {
        const io::Config rp = c.sub("rope_parameters");
        r.theta = rope_theta(rp, r.theta);
        r.partial_rotary_factor = rp.get_double("partial_rotary_factor", r.partial_rotary_factor);
        type = rp.get_string("rope_type", rp.get_string("type", "default"));
    }
    if (c.is_object("rope_scaling")) {
        const io::Config rs = c.sub("rope_scaling");
        type = rs.get_string("rope_type", rs.get_string("type", type));
    }
    check<UnsupportedError>(type == "default", "[load] ", c.path(), ": rope_type '", type,
                            "' is not supported (only \"default\")");
    check<ConfigError>(r.partial_rotary_factor > 0 && r.partial_rotary_factor <= 1, "[load] ", c.path(),
                       ": partial_rotary_factor must be in (0, 1], got ", r.partial_rotary_factor);
    return r;
}

namespace detail {
/// The largest width or count a config may give: products of two of them (heads x head width,
/// expand x hidden) and sums of a few such stay far inside 64 bits. Without the bound a head
/// count of 2^60 + 4 made 16 x heads wrap to 64, the width of the real q projection, so the
/// checkpoint loaded and the attention wrote past its buffers.
inline constexpr std::int64_t kMaxConfigDimension = (std::int64_t{1} << 31) - 1;

inline std::size_t at_least(const io::Config& c, std::string_view key, std::int64_t v, std::int64_t least) {
    const std::string where = c.key_prefix().empty() ? std::string(key) : c.key_prefix() + "." + std::string(key);
    check<ConfigError>(v >= least, "[load] ", c.path(), ": ", where, least == 1 ? " must be > 0, got " : " must be >= 0, got ", v);
    check<ConfigError>(v <= kMaxConfigDimension, "[load] ", c.path(), ": ", where, " must be at most ", kMaxConfigDimension,
                       ", got ", v, " (no model has such a width or count: the config.json is damaged)");
    return static_cast<std::size_t>(v);
}
}  // namespace detail

/// A positive integer field, with a message naming the key when it is not.
inline std::size_t positive(const io::Config& c, std::string_view key) { return detail::at_least(c, key, c.get_int(key), 1); }
/// The same, `fallback` when the key is absent or null (a negative width wrapped around into
/// 18446744073709551612 in the shape messages).
inline std::size_t positive(const io::Config& c, std::string_view key, std::int64_t fallback) {
    return detail::at_least(c, key, c.get_int(key, fallback), 1);
}
/// A count that may be 0 (experts, a shared MLP's width), `fallback` when absent or null.
inline std::size_t non_negative(const io::Config& c, std::string_view key, std::int64_t fallback) {
    return detail::at_least(c, key, c.get_int(key, fallback), 0);
}

/// num_hidden_layers: positive, and at most the checkpoint's number of tensors (every layer holds
/// tensors of its own). A larger count is a damaged config.json, found here before per-layer
/// tables of that size are allocated (a std::bad_alloc at 2^40 layers).
inline std::size_t layer_count(const io::Config& c, const io::Checkpoint& ckpt) {
    const std::size_t L = positive(c, "num_hidden_layers");
    check<ConfigError>(L <= ckpt.size(), "[load] ", c.path(), ": ", c.key_prefix().empty() ? "" : c.key_prefix() + ".",
                       "num_hidden_layers is ", L, " but the checkpoint holds only ", ckpt.size(), " tensors");
    return L;
}

/// time_step_limit = [lo, hi] (default (0, inf)).
inline std::pair<float, float> read_time_step_limit(const io::Config& c) {
    if (!c.has("time_step_limit")) return {0.0f, std::numeric_limits<float>::infinity()};
    const std::vector<double> v = c.get_double_list("time_step_limit");
    check<ConfigError>(v.size() == 2 && v[0] <= v[1], "[load] ", c.path(), ": time_step_limit must be [lo, hi]");
    return {static_cast<float>(v[0]), static_cast<float>(v[1])};
}

/// The SwiGLU built from three separate projections at key prefix p (p + "gate_proj.weight" ...).
inline SwiGLU dense_swiglu(const TensorSource& src, const std::string& p, std::size_t H, std::size_t I,
                           bool with_bias = false) {
    SwiGLU s;
    s.hidden = H;
    s.inter = I;
    s.gate = src.matrix(p + "gate_proj.weight", {I, H});
    s.up = src.matrix(p + "up_proj.weight", {I, H});
    s.down = src.matrix(p + "down_proj.weight", {H, I});
    if (with_bias) {
        s.gate_bias = src.optional_vec(p + "gate_proj.bias", {I});
        s.up_bias = src.optional_vec(p + "up_proj.bias", {I});
        s.down_bias = src.optional_vec(p + "down_proj.bias", {H});
    }
    return s;
}

/// Experts stored fused: gate_up [E, 2I, H] (rows gate then up) and down [E, H, I].
inline std::vector<SwiGLU> fused_experts(const Weight& gate_up, const Weight& down, std::size_t E, std::size_t H,
                                         std::size_t I) {
    std::vector<SwiGLU> ex(E);
    for (std::size_t e = 0; e < E; ++e) {
        ex[e].hidden = H;
        ex[e].inter = I;
        ex[e].gate_up = gate_up.slice(e * 2 * I * H, {2 * I, H});
        ex[e].down = down.slice(e * H * I, {H, I});
    }
    return ex;
}

/// The decoder-layer pattern of a config: true where the layer is attention. Accepts the
/// current names ("full_attention" / "linear_attention") and the legacy ones
/// ("attention" / "mamba"); anything else is an UnsupportedError naming it.
inline std::vector<bool> attention_pattern(const io::Config& c, std::string_view key, std::size_t L) {
    const std::vector<std::string> types = c.get_string_list(key);
    check<ConfigError>(types.size() == L, "[load] ", c.path(), ": ", key, " has ", types.size(),
                       " entries, num_hidden_layers is ", L);
    std::vector<bool> attn(L);
    for (std::size_t i = 0; i < L; ++i) {
        const std::string& t = types[i];
        if (t == "full_attention" || t == "attention") {
            attn[i] = true;
        } else if (t == "linear_attention" || t == "mamba") {
            attn[i] = false;
        } else {
            fail<UnsupportedError>("[load] ", c.path(), ": layer ", i, " has unsupported type '", t, "' in ", key);
        }
    }
    return attn;
}

/// The attention projections at prefix p + "self_attn." for a config (q_proj holds 2 x Hq x hd
/// rows when gated), with biases when the model has them.
inline AttentionWeights attention_weights(const TensorSource& src, const std::string& p, const AttentionConfig& ac,
                                          bool with_bias) {
    const std::size_t H = ac.hidden, Qd = ac.Hq * ac.head_dim, KVd = ac.Hkv * ac.head_dim;
    const std::size_t Qrows = ac.gated ? 2 * Qd : Qd;
    const std::string a = p + "self_attn.";
    AttentionWeights w;
    w.q_proj = src.matrix(a + "q_proj.weight", {Qrows, H});
    w.k_proj = src.matrix(a + "k_proj.weight", {KVd, H});
    w.v_proj = src.matrix(a + "v_proj.weight", {KVd, H});
    w.o_proj = src.matrix(a + "o_proj.weight", {H, Qd});
    if (with_bias) {
        w.q_bias = src.vec(a + "q_proj.bias", {Qrows});
        w.k_bias = src.vec(a + "k_proj.bias", {KVd});
        w.v_bias = src.vec(a + "v_proj.bias", {KVd});
        w.o_bias = src.vec(a + "o_proj.bias", {H});
    }
    if (ac.qk_norm) {
        w.q_norm = src.vec(a + "q_norm.weight", {ac.head_dim});
        w.k_norm = src.vec(a + "k_norm.weight", {ac.head_dim});
    }
    return w;
}

/// Which optional Mamba-2 tensors a checkpoint has.
struct Mamba2Options {
    bool in_proj_bias = false, conv_bias = true, norm = true, out_proj_bias = false;
};

/// The Mamba-2 mixer tensors at prefix m ("layers.i.mamba."), shapes from the config.
inline Mamba2Weights mamba2_weights(const TensorSource& src, const std::string& m, const Mamba2Config& mc,
                                    const Mamba2Options& o) {
    const std::size_t Z = mc.proj_rows(), Cm = mc.conv_channels(), Di = mc.d_inner(), H = mc.hidden;
    Mamba2Weights w;
    w.in_proj = src.matrix(m + "in_proj.weight", {Z, H});
    if (o.in_proj_bias) w.in_proj_bias = src.vec(m + "in_proj.bias", {Z});
    w.conv = src.vec(m + "conv1d.weight", {Cm, 1, mc.conv_width});
    if (o.conv_bias) w.conv_bias = src.vec(m + "conv1d.bias", {Cm});
    w.dt_bias = src.vec(m + "dt_bias", {mc.H});
    w.A_log = src.vec(m + "A_log", {mc.H});
    w.D = src.vec(m + "D", {mc.H});
    if (o.norm) w.norm = src.vec(m + "norm.weight", {Di});
    w.out_proj = src.matrix(m + "out_proj.weight", {H, Di});
    if (o.out_proj_bias) w.out_proj_bias = src.vec(m + "out_proj.bias", {H});
    return w;
}

/// Embedding, final norm and LM head (lm_head.weight unless tied) around a finished stack.
template <class Stack>
CausalLM<Stack> assemble(const TensorSource& src, LMConfig lc, Stack stack, const std::string& final_norm_key,
                         bool tied) {
    const std::size_t V = lc.vocab, H = lc.hidden;
    Weight embed = src.matrix("embed_tokens.weight", {V, H});
    Weight head;
    if (!tied) head = src.global_matrix("lm_head.weight", {V, H});
    std::vector<float> norm = src.vec(final_norm_key, {H});
    return CausalLM<Stack>(std::move(lc), std::move(embed), std::move(stack), std::move(norm), std::move(head));
}

}  // namespace models
}  // namespace hylens
