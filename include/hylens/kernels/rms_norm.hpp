#pragma once
// The RMSNorm variants of families.md §0.2 (the L2 norm lives in gated_delta.hpp).
// r(x) = 1 / sqrt(mean(x^2) + eps), statistics accumulated in float32 like PyTorch.
//   RMSNorm_std : y = w * x * r(x)
//   RMSNorm_1p  : y = (1 + w) * x * r(x)        (pass one_plus = true)
//   GNorm_nbg   : y = w * x * r(x) * silu(z)     (norm, then gate)
//   GNorm_gbn   : u = x * silu(z); y = w * u * r(u)   (gate, then norm)
// The gated forms work group-wise: the row of d values is cut into d / group contiguous
// groups with their own r(.), and w is the full-length vector.

#include <cmath>    // std::sqrt
#include <cstddef>  // std::size_t

#include "../core/error.hpp"
#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
#include "isa/recurrent.hpp"
#include "matvec.hpp"

namespace hylens::kernels {

enum class GateOrder { norm_before_gate, gate_before_norm };

/// r(x) = 1 / sqrt(ss / n + eps) from the float32 sum of squares `ss` of the n values at `x`.
/// Finite values whose squares pass float32's range (a residual of 1e20, from a multiplier of
/// 1e30 in config.json) made ss infinite and r zero: every output 0, every logit 0, no NaN for
/// the finite check to see. Such a row is summed again in double, where it fits; a row holding
/// an infinity or a NaN stays non-finite, for the check.
inline float inv_rms(const float* x, std::size_t n, float ss, float eps) {
    if (std::isfinite(ss)) return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return static_cast<float>(1.0 / std::sqrt(s / static_cast<double>(n) + static_cast<double>(eps)));
}

/// y[r] = norm(x[r]) for `rows` rows of d values (row strides ldx, ldy; y may alias x). Rows are
/// split over the pool (row_grain); each row is computed alike whatever the split.
inline void rms_norm(const float* x, std::size_t ldx, std::size_t rows, std::size_t d, const float* w, float eps,
                     float* y, std::size_t ldy, bool one_plus) {
    check<ShapeError>(d > 0 && ldx >= d && ldy >= d, "[rms_norm] row length ", d, " with strides ", ldx, "/", ldy);
    parallel_for(
        rows,
        [&](std::size_t r0, std::size_t r1) {
            for (std::size_t r = r0; r < r1; ++r) {
                const float* xr = x + r * ldx;
                float* yr = y + r * ldy;
                const float ss = sum_squares(xr, d);  // dispatched SIMD reduction (kernels/matvec.hpp)
                const float inv = inv_rms(xr, d, ss, eps);
                if (one_plus) {
                    for (std::size_t i = 0; i < d; ++i) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
                } else {
                    for (std::size_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
                }
            }
        },
        row_grain(d));
}

/// Gated RMSNorm, group-wise: y = GNorm(x, z) per row. group = d for one group per row.
/// w may be nullptr for the ungated-weight case (weight 1).
inline void gated_rms_norm(const float* x, std::size_t ldx, const float* z, std::size_t ldz, std::size_t rows,
                           std::size_t d, std::size_t group, const float* w, float eps, GateOrder order, float* y,
                           std::size_t ldy) {
    check<ShapeError>(group > 0 && d % group == 0, "[gated_rms_norm] row length ", d, " is not a multiple of group ",
                      group);
    const simd::Level level = simd::active();
    parallel_for(
        rows,
        [&](std::size_t r0, std::size_t r1) {
            isa::with_isa(level, [&](auto tag) {
                for (std::size_t r = r0; r < r1; ++r) {
                    const float* xr = x + r * ldx;
                    const float* zr = z + r * ldz;
                    float* yr = y + r * ldy;
                    for (std::size_t g0 = 0; g0 < d; g0 += group) {
                        float ss = 0.0f;
                        if (order == GateOrder::gate_before_norm) {
                            silu_mul(tag, zr + g0, 1.0f, xr + g0, yr + g0, group);  // u = x * silu(z)
                            for (std::size_t i = g0; i < g0 + group; ++i) ss += yr[i] * yr[i];
                            const float inv = inv_rms(yr + g0, group, ss, eps);
                            for (std::size_t i = g0; i < g0 + group; ++i) yr[i] = (w ? w[i] : 1.0f) * (yr[i] * inv);
                        } else {
                            for (std::size_t i = g0; i < g0 + group; ++i) ss += xr[i] * xr[i];
                            const float inv = inv_rms(xr + g0, group, ss, eps);
                            for (std::size_t i = g0; i < g0 + group; ++i) yr[i] = (w ? w[i] : 1.0f) * (xr[i] * inv);
                            silu_mul(tag, zr + g0, 1.0f, yr + g0, yr + g0, group);  // then * silu(z)
                        }
                    }
                }
            });
        },
        row_grain(d));
}

}  // namespace hylens::kernels
