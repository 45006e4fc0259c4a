#pragma once
// The non-finite check of CausalLM::forward (ForwardOptions::check_finite): a hook that scans
// the embedding, every layer's mixer / MLP outputs and residual stream, the final norm and
// the logits as they are computed, and throws NonFiniteError at the FIRST site holding a NaN
// or an infinity, naming the model, the layer, the site and the row. The scan reads each
// activation once (a few per layer, against the matmuls that produce them: cheap). A user
// hook still sees every site it wants, first; the check sees what that hook left.

#include <cmath>        // std::isfinite
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "../core/error.hpp"
#include "../layers/hooks.hpp"

namespace hylens {

/// A forward produced a NaN or an infinity (damaged weights, a diverging state, a patch that
/// wrote garbage). When it is thrown inside the layers, the cache of that forward is left
/// part-updated and marked so (StackCache::torn): later uses of it are refused.
class NonFiniteError : public Error {
public:
    using Error::Error;
};

namespace detail {

/// Index of the first non-finite value of x[0..n), or n.
inline std::size_t first_non_finite(const float* x, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return i;
    return n;
}

inline bool finite_check_site(Site s) noexcept {
    switch (s) {
        case Site::embed:
        case Site::mixer_out:
        case Site::attn_out:
        case Site::ssm_out:
        case Site::mlp_out:
        case Site::resid_post:
        case Site::final_norm: return true;
        default: return false;
    }
}

[[noreturn]] inline void report_non_finite(const std::string& model, LayerIndex layer, std::string_view site, float value,
                                           std::size_t b, std::size_t t, std::int64_t position, std::size_t d,
                                           std::size_t D) {
    fail<NonFiniteError>("[forward] ", model, ": first non-finite value (", value, ") at ",
                         layer != no_layer ? "layer " + std::to_string(layer) + ", " : std::string(), "site ", site,
                         ", sequence ", b, ", token ", t, " (position ", position, "), index ", d, " of ", D,
                         "; if the weights may be damaged, `hylens verify --model DIR` scans them");
}

/// Scans one activation view; throws NonFiniteError at its first non-finite value.
inline void check_view_finite(const std::string& model, std::string_view site, LayerIndex layer, const ActivationView& v,
                              const std::int64_t* positions) {
    for (std::size_t b = 0; b < v.B; ++b)
        for (std::size_t t = 0; t < v.T; ++t) {
            const float* row = v.row(b, t);
            const std::size_t d = first_non_finite(row, v.D);
            if (d < v.D)
                report_non_finite(model, layer, site, row[d], b, t, positions ? positions[t] : -1, d, v.D);
        }
}

/// `user` (may be null) followed by the finite check on the checked sites.
inline Hook finite_checking_hook(const Hook* user, std::string model) {
    Hook h;
    h.wants = [user](Site s, LayerIndex layer) {
        return finite_check_site(s) || (user && user->fn && (!user->wants || user->wants(s, layer)));
    };
    h.fn = [user, model = std::move(model)](Site s, LayerIndex layer, const ActivationView& v, const std::int64_t* pos) {
        if (user && user->fn && (!user->wants || user->wants(s, layer))) user->fn(s, layer, v, pos);
        if (finite_check_site(s)) check_view_finite(model, site_name(s), layer, v, pos);
    };
    return h;
}

/// How many CheckFiniteScope objects live on this thread.
inline thread_local int finite_check_scopes = 0;

}  // namespace detail

/// While one lives, every CausalLM::forward on this thread runs with the non-finite check, as
/// with ForwardOptions::check_finite, whatever path reaches it (captures, interventions,
/// transplants, maps, generation). The studies hold one for their whole run, so a model that
/// produces a NaN stops a study with the layer and site instead of writing null scores.
class CheckFiniteScope {
public:
    CheckFiniteScope() noexcept { ++detail::finite_check_scopes; }
    ~CheckFiniteScope() { --detail::finite_check_scopes; }
    CheckFiniteScope(const CheckFiniteScope&) = delete;
    CheckFiniteScope& operator=(const CheckFiniteScope&) = delete;
};

/// Whether a CheckFiniteScope lives on this thread.
inline bool in_check_finite_scope() noexcept { return detail::finite_check_scopes > 0; }

}  // namespace hylens
