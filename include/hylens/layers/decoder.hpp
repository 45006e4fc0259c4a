#pragma once
// DecoderLayer<Kind>: norms + token mixer + feed-forward + residual wiring, the same for
// every family (families.md §3.4, §4.4, §5.4):
//   x = norm_in(h);           m = mixer(x);  h = h + res_mult * m
//   y = norm_post(h);         f = ffn(y);    h = h + res_mult * f
// norm is RMSNorm_std or RMSNorm_1p (Qwen); res_mult is Granite's residual_multiplier.

#include <cstddef>  // std::size_t
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../kernels/rms_norm.hpp"
#include "concepts.hpp"
#include "ffn.hpp"
#include "hooks.hpp"
#include "../kernels/workspace.hpp"

namespace hylens {

struct DecoderConfig {
    std::size_t hidden = 0;
    float eps = 1e-6f;
    bool norm_one_plus = false;      ///< RMSNorm_1p (Qwen) instead of RMSNorm_std
    float residual_multiplier = 1.0f;
};

template <class Kind>
class DecoderLayer {
    static_assert(detail::assert_mixer_kind<Kind>());

public:
    using kind_type = Kind;
    using cache_type = typename Kind::cache_type;

    DecoderLayer() = default;
    DecoderLayer(DecoderConfig cfg, std::vector<float> input_norm, Kind mixer, std::vector<float> post_norm,
                 FeedForward ffn)
        : c_(cfg), in_norm_(std::move(input_norm)), mixer_(std::move(mixer)), post_norm_(std::move(post_norm)),
          ffn_(std::move(ffn)) {
        require_size(in_norm_, c_.hidden, "DecoderLayer input_layernorm");
        require_size(post_norm_, c_.hidden, "DecoderLayer post-mixer norm");
        ffn_.validate("DecoderLayer");
    }

    const DecoderConfig& config() const noexcept { return c_; }
    const Kind& mixer() const noexcept { return mixer_; }
    Kind& mixer() noexcept { return mixer_; }
    const FeedForward& ffn() const noexcept { return ffn_; }
    cache_type new_cache(std::size_t batch) const { return mixer_.new_cache(batch); }

    /// h: [B*T, hidden] residual stream, updated in place.
    void forward(float* h, std::size_t B, std::size_t T, cache_type& cache, const ForwardContext& ctx) const {
        const std::size_t H = c_.hidden, M = B * T;
        ctx.fire(Site::resid_pre, h, B, T, H, H);
        Workspace::Frame ws;
        // Both written in full before they are read (the norm's rows, the mixer's and the
        // feed-forward's outputs): not zeroed.
        const std::span<float> x = ws.uninitialized<float>(M * H), m = ws.uninitialized<float>(M * H);
        kernels::rms_norm(h, H, M, H, in_norm_.data(), c_.eps, x.data(), H, c_.norm_one_plus);
        ctx.fire(Site::mixer_in, x.data(), B, T, H, H);
        mixer_.forward(x.data(), B, T, m.data(), cache, ctx);
        ctx.fire(Site::mixer_out, m.data(), B, T, H, H);
        add_residual(h, m.data(), M);
        kernels::rms_norm(h, H, M, H, post_norm_.data(), c_.eps, x.data(), H, c_.norm_one_plus);
        ffn_.forward(x.data(), M, m.data());
        ctx.fire(Site::mlp_out, m.data(), B, T, H, H);
        add_residual(h, m.data(), M);
        ctx.fire(Site::resid_post, h, B, T, H, H);
    }

private:
    // h += residual_multiplier * m over M rows of the stream, rows split over the pool.
    void add_residual(float* h, const float* m, std::size_t M) const {
        const std::size_t H = c_.hidden;
        const float r = c_.residual_multiplier;
        for_each_element(M, H, [&](std::size_t i) { h[i] += r * m[i]; });
    }

    DecoderConfig c_;
    std::vector<float> in_norm_;
    Kind mixer_;
    std::vector<float> post_norm_;
    FeedForward ffn_;
};

}  // namespace hylens
