#pragma once
// Named activation sites and the hook that sees them (the llama.cpp `cb(cur, name, il)`
// habit, made typed). A layer calls ctx.fire(site, rows) when it has computed an activation;
// the hook may read the rows or overwrite them in place (patching), and everything downstream
// is computed from what the hook left. With no hook set, fire() is one pointer test.

#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t
#include <functional>  // std::function
#include <string_view> // std::string_view

#include "../core/indices.hpp"

namespace hylens {

/// Activation sites (protocols.md §C.4). Rows are [B, T, D] (batch-major, contiguous per row).
enum class Site {
    embed,         ///< token embedding after the family's embedding multiplier
    resid_pre,     ///< residual stream entering decoder layer l
    mixer_in,      ///< normed input of the token mixer
    mixer_out,     ///< token-mixer output before any residual multiplier (parallel layers: the sum)
    attn_out,      ///< parallel layers: attention half, before attention_out_multiplier
    ssm_out,       ///< parallel layers: Mamba half, before ssm_out_multiplier
    mlp_out,       ///< feed-forward (MLP or MoE) output, before any residual multiplier
    resid_post,    ///< residual stream leaving decoder layer l
    q, k, v,       ///< attention projections before q/k norm and RoPE, [B, T, heads*head_dim] (q without the gate half)
    attn_probs,    ///< softmax probabilities, rows [B, Hq*Tq, Tk] (fired only when the hook wants them)
    head_out,      ///< o_proj input (after Qwen's output gate), [B, T, Hq*hd]
    lin_head_out,  ///< out_proj input of a DeltaNet / Mamba-2 mixer (after its gated norm)
    gate_g,        ///< DeltaNet log decay g, [B, T, Hv]
    gate_beta,     ///< DeltaNet write strength beta, [B, T, Hv]
    gate_dt,       ///< Mamba-2 clamped time step, [B, T, H]
    final_norm,    ///< output of the final norm (input of the LM head)
};

inline std::string_view site_name(Site s) noexcept {
    switch (s) {
        case Site::embed: return "embed";
        case Site::resid_pre: return "resid_pre";
        case Site::mixer_in: return "mixer_in";
        case Site::mixer_out: return "mixer_out";
        case Site::attn_out: return "attn_out";
        case Site::ssm_out: return "ssm_out";
        case Site::mlp_out: return "mlp_out";
        case Site::resid_post: return "resid_post";
        case Site::q: return "q";
        case Site::k: return "k";
        case Site::v: return "v";
        case Site::attn_probs: return "attn_probs";
        case Site::head_out: return "head_out";
        case Site::lin_head_out: return "lin_head_out";
        case Site::gate_g: return "gate_g";
        case Site::gate_beta: return "gate_beta";
        case Site::gate_dt: return "gate_dt";
        case Site::final_norm: return "final_norm";
    }
    return "?";
}

/// A block of activation rows: row r = b*T + t holds D values at data + r*ld.
struct ActivationView {
    float* data;
    std::size_t B, T, D, ld;
    float* row(std::size_t b, std::size_t t) const noexcept { return data + (b * T + t) * ld; }
};

/// Called at each site; `layer` is the decoder-layer index (`no_layer` for embed and
/// final_norm). `positions` holds the T absolute positions of the rows.
struct Hook {
    std::function<bool(Site, LayerIndex layer)> wants;  ///< optional filter (default: every site)
    std::function<void(Site, LayerIndex layer, const ActivationView&, const std::int64_t* positions)> fn;
};

/// What every layer receives besides its input: where it sits and who is listening.
struct ForwardContext {
    LayerIndex layer = no_layer;
    const std::int64_t* positions = nullptr;  ///< T absolute positions (shared by the batch)
    const Hook* hook = nullptr;

    bool wants(Site s) const { return hook && hook->fn && (!hook->wants || hook->wants(s, layer)); }
    void fire(Site s, float* data, std::size_t B, std::size_t T, std::size_t D, std::size_t ld) const {
        if (wants(s)) hook->fn(s, layer, ActivationView{data, B, T, D, ld}, positions);
    }
};

}  // namespace hylens
