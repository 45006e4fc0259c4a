#pragma once
// Test helper: largest relative difference between two stack caches (every K/V, conv
// window and state), relative to max(1, max |reference|).

#include "../support/nan_max.hpp"

#include <hylens/cache/parts.hpp>

#include <algorithm>
#include <cmath>

namespace hylens::test {

inline double rel_diff(const float* a, const float* b, std::size_t n) {
    double worst = 0.0, scale = 1.0;
    for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    for (std::size_t i = 0; i < n; ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (!(d <= worst)) worst = d;
        if (std::isnan(d)) break;  // a later finite difference would replace the NaN
    }
    return worst / scale;
}

template <class Cache>
double cache_rel_diff(const Cache& a, const Cache& b) {
    double worst = 0.0;
    if (a.num_layers() != b.num_layers()) return 1e30;
    for (std::size_t i = 0; i < a.num_layers(); ++i) {
        a.visit(i, [&](const auto& ca) {
            b.visit(i, [&](const auto& cb) {
                using A = std::remove_cvref_t<decltype(ca)>;
                using B = std::remove_cvref_t<decltype(cb)>;
                if constexpr (std::is_same_v<A, B>) {
                    if (auto* ra = recurrent_part(ca)) {
                        auto* rb = recurrent_part(cb);
                        for (std::size_t s = 0; s < ra->batch(); ++s) {
                            worst = hylens::test::nan_max(worst, rel_diff(ra->conv(s), rb->conv(s), ra->conv_channels() * ra->conv_width()));
                            worst = hylens::test::nan_max(worst, rel_diff(ra->state(s), rb->state(s), ra->state_size()));
                        }
                    }
                    if (auto* ka = kv_part(ca)) {
                        auto* kb = kv_part(cb);
                        if (ka->length() != kb->length()) {
                            worst = 1e30;
                            return;
                        }
                        for (std::size_t s = 0; s < ka->batch(); ++s)
                            for (std::size_t j = 0; j < ka->kv_heads(); ++j) {
                                const std::size_t n = ka->length() * ka->head_dim();
                                worst = hylens::test::nan_max(worst, rel_diff(ka->k(s, j), kb->k(s, j), n));
                                worst = hylens::test::nan_max(worst, rel_diff(ka->v(s, j), kb->v(s, j), n));
                            }
                    }
                } else {
                    worst = 1e30;
                }
            });
        });
    }
    return worst;
}

}  // namespace hylens::test
