#pragma once
// CausalLM<Stack>: token embedding, a HybridStack, the final norm and the LM head, with the
// families' scalar multipliers. One forward call for any number of tokens: prefill and decode
// are the same call and continue whatever the cache holds.
//   h0 = embed_mult * E[id];  h = stack(h0);  logits = logits_mult * (W_head · norm(h))
// Granite: embed_mult = embedding_multiplier, logits_mult = 1 / logits_scaling.
// Falcon-H1: embed_mult = embedding_multiplier, logits_mult = lm_head_multiplier.

#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <exception>  // std::exception
#include <limits>   // std::numeric_limits
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../core/interrupt.hpp"
#include "../core/precision.hpp"  // HoldRoundActivations
#include "../core/tensor.hpp"
#include "../core/thread_pool.hpp"
#include "../core/weight.hpp"
#include "../kernels/linear.hpp"
#include "../kernels/rms_norm.hpp"
#include "../layers/hooks.hpp"
#include "../kernels/workspace.hpp"
#include "finite_check.hpp"
#include "tokens.hpp"

namespace hylens {

struct LMConfig {
    std::string model_type;       ///< config.json model_type ("qwen3_5", "granitemoehybrid", ...)
    std::size_t vocab = 0, hidden = 0;
    float eps = 1e-6f;            ///< final norm epsilon
    bool norm_one_plus = false;   ///< final norm is RMSNorm_1p (Qwen)
    float embed_multiplier = 1.0f;
    float logits_multiplier = 1.0f;
};

struct ForwardOptions {
    std::span<const std::int64_t> positions{};  ///< T positions; empty = cache.next_position() + [0, T)
    const Hook* hook = nullptr;                 ///< sees (and may overwrite) every site
    bool last_only = false;                     ///< logits of the last position only ([B, 1, V])
    bool skip_logits = false;                   ///< run the stack only (returns an empty tensor)
    /// Throw NonFiniteError at the first NaN / infinity in the embedding, a layer's mixer or
    /// MLP output or residual stream, the final norm or the logits (stack/finite_check.hpp).
    bool check_finite = false;
    /// Run layers [0, layers) only (needs skip_logits: the head reads the last layer's output).
    /// The cache is then marked torn, its later layers not having taken the tokens: for a
    /// throwaway cache, as capture() runs to its deepest site.
    std::size_t layers = static_cast<std::size_t>(-1);
};

template <class Stack>
class CausalLM {
public:
    using stack_type = Stack;
    using cache_type = typename Stack::cache_type;

    CausalLM() = default;
    /// lm_head empty = tied to the embedding.
    CausalLM(LMConfig cfg, Weight embed, Stack stack, std::vector<float> final_norm, Weight lm_head)
        : c_(std::move(cfg)), embed_(std::move(embed)), stack_(std::move(stack)), norm_(std::move(final_norm)),
          head_(lm_head.empty() ? embed_ : std::move(lm_head)), tied_(lm_head.empty()) {
        require_shape(embed_, {c_.vocab, c_.hidden}, "CausalLM embed_tokens");
        require_shape(head_, {c_.vocab, c_.hidden}, "CausalLM lm_head");
        require_size(norm_, c_.hidden, "CausalLM final norm");
    }

    const LMConfig& config() const noexcept { return c_; }
    const Stack& stack() const noexcept { return stack_; }
    Stack& stack() noexcept { return stack_; }
    std::size_t num_layers() const noexcept { return stack_.size(); }
    bool tied_embeddings() const noexcept { return tied_; }
    const Weight& embedding() const noexcept { return embed_; }
    const Weight& lm_head() const noexcept { return head_; }
    /// Weight of the final norm ([hidden]); with embedding(), lm_head() and config() it rebuilds
    /// the model around another stack (block stitching, interp/stitch.hpp).
    const std::vector<float>& final_norm() const noexcept { return norm_; }

    /// A fresh cache for `batch` sequences (every state zero, no K/V).
    cache_type new_cache(std::size_t batch = 1) const {
        cache_type c = stack_.new_cache(batch);
        c.set_model(c_.model_type);
        return c;
    }

    /// Runs ids [B, T] on top of `cache` (updated in place); returns logits [B, T, V]
    /// (or [B, 1, V] with last_only). The returned tensor is the one heap allocation of a warm
    /// decode step; the overload below writes into a tensor the caller keeps instead.
    Tensor3 forward(const TokenBatch& ids, cache_type& cache, const ForwardOptions& opt = {}) const {
        Tensor3 logits;
        forward(ids, cache, logits, opt);
        return logits;
    }

    /// The same, the logits written into `logits`: resized to [B, T, V] (or [B, 1, V]) unless it
    /// has that shape already, in which case its storage is reused, so a decode loop passing the
    /// same tensor allocates nothing once warm (docs/kernels.md, "Per-call buffers"). With
    /// skip_logits `logits` is left as it was.
    void forward(const TokenBatch& ids, cache_type& cache, Tensor3& logits, const ForwardOptions& opt = {}) const {
        const std::size_t B = ids.batch, T = ids.T(), H = c_.hidden;
        check_loaded("CausalLM::forward");
        interrupt::poll();  // a host's stop (Python's Ctrl-C), before any layer takes a token
        const precision::HoldRoundActivations one_arithmetic;  // every projection of the forward
        (void)ThreadPool::instance();  // a bad HYLENS_THREADS fails here, before any layer takes a token
        check<ShapeError>(B >= 1 && T >= 1 && ids.ids.size() == B * T, "[CausalLM::forward] need B >= 1 sequences of T >= 1 tokens, got ",
                          ids.ids.size(), " ids for batch ", B);
        for (std::size_t i = 0; i < ids.ids.size(); ++i)
            check<ShapeError>(ids.ids[i] >= 0 && static_cast<std::size_t>(ids.ids[i]) < c_.vocab,
                              "[CausalLM::forward] token id ", ids.ids[i], " at sequence ", i / T, ", position ", i % T,
                              " is outside the vocabulary [0, ", c_.vocab, ")");
        stack_.check_cache(cache, B);
        // Positions are int64: a cache whose count would pass 2^63 - 1 (a tokens_seen set near it)
        // went on to wrap into negative positions.
        constexpr std::size_t kLast = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
        check<ShapeError>(cache.tokens_seen() <= kLast - T && cache.next_position() <= kLast - T, "[CausalLM::forward] ", T,
                          " more tokens after ", cache.next_position(), " pass the largest position, 2^63 - 1");
        Workspace::Frame ws;
        const std::span<std::int64_t> pos = ws.zeros<std::int64_t>(T);
        if (opt.positions.empty()) {
            const std::size_t p0 = cache.next_position();
            for (std::size_t t = 0; t < T; ++t) pos[t] = static_cast<std::int64_t>(p0 + t);
        } else {
            check<ShapeError>(opt.positions.size() == T, "[CausalLM::forward] ", opt.positions.size(),
                              " positions for ", T, " tokens");
            for (std::size_t t = 0; t < T; ++t) {
                check<ShapeError>(opt.positions[t] >= 0, "[CausalLM::forward] negative position ", opt.positions[t]);
                pos[t] = opt.positions[t];
            }
        }
        const std::span<float> h = ws.zeros<float>(B * T * H);
        for (std::size_t r = 0; r < B * T; ++r) {
            embed_.read(static_cast<std::size_t>(ids.ids[r]) * H, H, h.data() + r * H);
            if (c_.embed_multiplier != 1.0f)
                for (std::size_t d = 0; d < H; ++d) h[r * H + d] *= c_.embed_multiplier;
        }
        Hook checking;
        const Hook* hook = opt.hook;
        const bool check_finite = opt.check_finite || in_check_finite_scope();
        if (check_finite) {
            checking = detail::finite_checking_hook(opt.hook, "model " + c_.model_type);
            hook = &checking;
        }
        ForwardContext ctx{no_layer, pos.data(), hook};
        ctx.fire(Site::embed, h.data(), B, T, H, H);
        const bool some_layers = opt.layers < stack_.size();
        check<ShapeError>(!some_layers || opt.skip_logits, "[CausalLM::forward] a forward of layers [0, ", opt.layers,
                          ") of ", stack_.size(), " computes no logits: set skip_logits");
        try {
            stack_.forward(h.data(), B, T, cache, pos.data(), hook, 0, opt.layers);
        } catch (const std::exception& e) {  // some layers have taken the tokens, others not
            cache.mark_torn(e.what());
            throw;
        } catch (...) {
            cache.mark_torn("an exception that is not a std::exception");
            throw;
        }
        cache.set_tokens_seen(cache.tokens_seen() + T);
        if (some_layers)
            cache.mark_torn("a forward of layers [0, " + std::to_string(opt.layers) + ") of " + std::to_string(stack_.size()) +
                            " only (ForwardOptions::layers)");
        if (opt.skip_logits) return;
        head(h.data(), B, T, logits, opt.last_only, ctx);
        if (check_finite) {
            const std::size_t Tout = logits.shape(1), V = c_.vocab;
            detail::check_view_finite("model " + c_.model_type, "logits", -1, ActivationView{logits.data(), B, Tout, V, V},
                                      pos.data() + (T - Tout));
        }
    }

    /// A fresh cache filled with `ids` (the prompt); the logits are discarded.
    cache_type prefill(const TokenBatch& ids, const ForwardOptions& opt = {}) const {
        cache_type cache = new_cache(ids.batch);
        ForwardOptions o = opt;
        o.skip_logits = true;
        forward(ids, cache, o);
        return cache;
    }

    /// Final norm + LM head of residual rows h [B*T, H] (the logit lens uses this too).
    Tensor3 head(const float* h, std::size_t B, std::size_t T, bool last_only = false,
                 const ForwardContext& ctx = {}) const {
        Tensor3 logits;
        head(h, B, T, logits, last_only, ctx);
        return logits;
    }

    /// The same into `logits`, resized to [B, T or 1, V] unless it has that shape already.
    void head(const float* h, std::size_t B, std::size_t T, Tensor3& logits, bool last_only = false,
              const ForwardContext& ctx = {}) const {
        const std::size_t H = c_.hidden, V = c_.vocab, Tout = last_only ? 1 : T;
        check_loaded("CausalLM::head");
        check<ShapeError>(h != nullptr && B >= 1 && T >= 1, "[CausalLM::head] need B >= 1 sequences of T >= 1 rows, got ",
                          B, " x ", T);
        Workspace::Frame ws;
        const std::span<float> x = ws.zeros<float>(B * Tout * H);
        for (std::size_t b = 0; b < B; ++b) {
            const float* src = h + (b * T + (last_only ? T - 1 : 0)) * H;
            kernels::rms_norm(src, H, Tout, H, norm_.data(), c_.eps, x.data() + b * Tout * H, H, c_.norm_one_plus);
        }
        ctx.fire(Site::final_norm, x.data(), B, Tout, H, H);
        const std::array<std::size_t, 3> shape{B, Tout, V};
        if (logits.shape() != shape) logits.resize(shape);
        kernels::linear(x.data(), H, B * Tout, head_, nullptr, logits.data(), V, c_.logits_multiplier);
    }

private:
    /// A model default-constructed or moved from has no layers and no final norm (its config
    /// may remain): an Error, where a forward read a null norm.
    void check_loaded(const char* op) const {
        check(stack_.size() > 0 && norm_.size() == c_.hidden && c_.hidden > 0, "[", op,
              "] the model is empty (default-constructed or moved from): load one first");
    }

    LMConfig c_;
    Weight embed_;
    Stack stack_;
    std::vector<float> norm_;
    Weight head_;
    bool tied_ = false;
};

}  // namespace hylens
