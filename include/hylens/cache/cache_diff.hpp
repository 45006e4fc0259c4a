#pragma once
// diff(a, b): how far apart two caches of one stack are, per channel part (max |a - b| of the
// K/V at every filled position, the conv windows and the SSM states). operator== on the
// caches is the exact (bitwise) comparison; diff() says by how much they differ.

#include <cmath>        // std::fabs, std::isnan
#include <cstddef>      // std::size_t
#include <limits>       // std::numeric_limits
#include <type_traits>  // std::is_same_v

#include "layer_set.hpp"
#include "layered_cache.hpp"
#include "parts.hpp"

namespace hylens {

namespace detail {
/// The larger of two differences, NaN counting as the largest (std::max(0, NaN) is 0: a cache
/// of NaN compared as equal).
inline double worse(double a, double b) noexcept { return std::isnan(a) ? a : !(b <= a) ? b : a; }
}  // namespace detail

struct CacheDiff {
    double kv = 0.0;     ///< max |a - b| over K and V of every filled position
    double conv = 0.0;   ///< max |a - b| over the conv windows
    double state = 0.0;  ///< max |a - b| over the SSM / delta-rule states
    /// False when the caches cannot be compared element by element: other layer layout,
    /// batch, dimensions or KV lengths. A part that cannot be compared is infinite (all three
    /// for another layout or batch; kv for other KV lengths), and so is max(), so that no such
    /// pair reads 0, "identical".
    bool same_layout = true;
    double max() const noexcept {
        return same_layout ? detail::worse(kv, detail::worse(conv, state)) : std::numeric_limits<double>::infinity();
    }
};

namespace detail {
inline double max_abs_diff(const float* a, const float* b, std::size_t n) noexcept {
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
        if (std::isnan(d)) return d;  // NaN counts as a difference, the largest
        if (d > worst) worst = d;
    }
    return worst;
}
}  // namespace detail

/// Compares the layers of `layers` of two caches of the same stack type.
template <LayeredCache Cache>
CacheDiff diff(const Cache& a, const Cache& b, const LayerSet& layers = {}) {
    CacheDiff d;
    constexpr double inf = std::numeric_limits<double>::infinity();
    if (a.num_layers() != b.num_layers() || !(a.order() == b.order()) || a.batch() != b.batch()) {
        d.same_layout = false;
        d.kv = d.conv = d.state = inf;
        return d;
    }
    layers.check_against(a.num_layers(), "diff");
    for (std::size_t i = 0; i < a.num_layers(); ++i) {
        if (!layers.contains(i)) continue;
        a.visit(i, [&](const auto& ca) {
            b.visit(i, [&](const auto& cb) {
                if constexpr (std::is_same_v<decltype(ca), decltype(cb)>) {
                    if (!same_nested_layout(ca, cb)) {  // stitched blocks of two plans
                        d.same_layout = false;
                        d.kv = d.conv = d.state = inf;
                        return;
                    }
                    // Every part, a stitched block's donor layers' too (they read 0 when skipped).
                    for_each_kv_pair(ca, cb, [&](const KVCache& ka, const KVCache& kb) {
                        if (ka.length() != kb.length() || ka.kv_heads() != kb.kv_heads() || ka.head_dim() != kb.head_dim()) {
                            d.same_layout = false;  // K/V not comparable; the layer's recurrent part still is
                            d.kv = inf;
                            return;
                        }
                        const std::size_t n = ka.length() * ka.head_dim();  // (L, hd) per head
                        for (std::size_t s = 0; s < ka.batch(); ++s)
                            for (std::size_t j = 0; j < ka.kv_heads(); ++j) {
                                d.kv = detail::worse(d.kv, detail::max_abs_diff(ka.k(s, j), kb.k(s, j), n));
                                d.kv = detail::worse(d.kv, detail::max_abs_diff(ka.v(s, j), kb.v(s, j), n));
                            }
                    });
                    for_each_recurrent_pair(ca, cb, [&](const RecurrentCache& ra, const RecurrentCache& rb) {
                        if (ra.conv_channels() != rb.conv_channels() || ra.conv_width() != rb.conv_width() ||
                            ra.state_shape() != rb.state_shape()) {
                            d.same_layout = false;
                            d.conv = d.state = inf;
                            return;
                        }
                        const std::size_t nc = ra.conv_channels() * ra.conv_width();  // (C, K)
                        for (std::size_t s = 0; s < ra.batch(); ++s) {
                            d.conv = detail::worse(d.conv, detail::max_abs_diff(ra.conv(s), rb.conv(s), nc));
                            d.state = detail::worse(d.state, detail::max_abs_diff(ra.state(s), rb.state(s), ra.state_size()));
                        }
                    });
                }
            });
        });
    }
    return d;
}

}  // namespace hylens
