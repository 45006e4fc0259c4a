#pragma once
// Shapes, entry checks and small shared pieces of the recurrent kernels (causal conv1d,
// gated delta rule, Mamba-2 SSD) and of their reference:: twins. The kernels validate every
// argument here, before any work and outside any parallel region, so a bad call throws a
// ShapeError naming the kernel instead of reading out of bounds.

#include <cmath>    // std::sqrt, std::isnan
#include <cstddef>  // std::size_t

#include "../core/error.hpp"
#include "activations.hpp"  // softplus

namespace hylens::kernels {

/// One gated-delta-rule call (families.md §1): T tokens, Hk key heads, Hv value heads
/// (Hv % Hk == 0; value head h reads key head h / (Hv / Hk)), key dim dk, value dim dv.
struct GatedDeltaShape {
    std::size_t T, Hk, Hv, dk, dv;
};

/// One Mamba-2 SSD call (families.md §2): T tokens, H heads of P channels, state size N,
/// G groups of B/C (H % G == 0; head h reads group h / (H / G)).
struct SsdShape {
    std::size_t T, H, P, N, G;
};

/// Parts per pool thread of the chunked forms' regions over heads (prefill: milliseconds a
/// region): the threads claim parts as they come free, so when the host takes one core for a
/// while (a shared VM) the other takes over its heads instead of waiting at the region's end.
/// The heads are independent and each is computed alike in any part, so the bits do not change.
inline constexpr std::size_t kChunkedPartsPerThread = 4;

/// y = scale * x / sqrt(sum(x^2) + 1e-6) over d values (families.md §0.2 L2Norm; eps
/// inside the root as HF/FLA `l2norm`). scale = 1 gives the plain norm. y may alias x.
inline void l2_normalize(const float* x, std::size_t d, float scale, float* y) noexcept {
    float ss = 0.0f;
    for (std::size_t i = 0; i < d; ++i) ss += x[i] * x[i];
    const float inv = 1.0f / std::sqrt(ss + 1e-6f);
    for (std::size_t i = 0; i < d; ++i) y[i] = (x[i] * inv) * scale;
}

/// One step's log decay as the chunked forms sum it (Gated DeltaNet g, Mamba-2 Delta A): at
/// least -1000, whose exp is 0 in double as the recurrent forms' exp(-1e15) or exp(-inf) is.
/// The chunked forms add a chunk's steps and take exp of differences of the sums: after a step
/// of -1e15 the later small steps were lost to rounding (a decay of 1 where it is 0.995), and a
/// step of -inf (A_log = 89, finite in a checkpoint) made -inf - (-inf) = NaN. Steps above -1000
/// are summed bit for bit as before. NaN stays NaN.
inline double clamp_log_decay(double a) noexcept { return a < -1000.0 ? -1000.0 : a; }

/// Mamba-2 time step: clamp(softplus(dt_raw + dt_bias), dt_min, dt_max), softplus threshold 20
/// (families.md §2.1; dt_bias is added before the softplus, pitfall 16).
inline float ssd_time_step(float dt_raw, float dt_bias, float dt_min, float dt_max) noexcept {
    float d = softplus(dt_raw + dt_bias);
    if (d < dt_min) d = dt_min;
    if (d > dt_max) d = dt_max;
    return d;
}

namespace detail {

// Row stride check shared by the kernels: rows of `need` values must fit in a stride of `ld`.
inline void check_ld(const char* op, const char* name, std::size_t ld, std::size_t need) {
    check<ShapeError>(ld >= need, "[", op, "] ", name, ": expected a row stride >= ", need, ", got ", ld);
}

inline void check_ptr(const char* op, const char* name, const void* p) {
    check<ShapeError>(p != nullptr, "[", op, "] ", name, ": expected a pointer, got nullptr");
}

inline void check_conv_args(const char* op, const float* x, std::size_t ldx, std::size_t T, std::size_t C,
                            const float* weight, std::size_t K, const float* state, const float* y,
                            std::size_t ldy) {
    check<ShapeError>(T >= 1 && C >= 1 && K >= 1, "[", op, "] expected T, C, K >= 1, got T=", T, " C=", C,
                      " K=", K);
    check_ld(op, "x", ldx, C);
    check_ld(op, "y", ldy, C);
    check_ptr(op, "x", x);
    check_ptr(op, "weight", weight);
    check_ptr(op, "state", state);
    check_ptr(op, "y", y);
    // y must not overlap x: the kernel reads x rows after writing earlier y rows.
    const float* x_end = x + (T - 1) * ldx + C;
    const float* y_end = y + (T - 1) * ldy + C;
    check<ShapeError>(y_end <= x || x_end <= y, "[", op, "] y may not alias x (the ranges overlap)");
}

inline void check_gated_delta_args(const char* op, const GatedDeltaShape& s, const float* q, std::size_t ld_q,
                                   const float* k, std::size_t ld_k, const float* v, std::size_t ld_v,
                                   const float* g, const float* beta, const float* state, const float* out,
                                   std::size_t ld_o) {
    check<ShapeError>(s.T >= 1 && s.Hk >= 1 && s.Hv >= 1 && s.dk >= 1 && s.dv >= 1, "[", op,
                      "] expected every dimension >= 1, got T=", s.T, " Hk=", s.Hk, " Hv=", s.Hv, " dk=", s.dk,
                      " dv=", s.dv);
    check<ShapeError>(s.Hv % s.Hk == 0, "[", op, "] expected Hv a multiple of Hk, got Hv=", s.Hv, " Hk=", s.Hk);
    check_ld(op, "q", ld_q, s.Hk * s.dk);
    check_ld(op, "k", ld_k, s.Hk * s.dk);
    check_ld(op, "v", ld_v, s.Hv * s.dv);
    check_ld(op, "out", ld_o, s.Hv * s.dv);
    check_ptr(op, "q", q);
    check_ptr(op, "k", k);
    check_ptr(op, "v", v);
    check_ptr(op, "g", g);
    check_ptr(op, "beta", beta);
    check_ptr(op, "state", state);
    check_ptr(op, "out", out);
}

inline void check_ssd_args(const char* op, const SsdShape& s, const float* x, std::size_t ld_x, const float* B,
                           const float* C, std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt,
                           const float* dt_bias, const float* A, float dt_min, float dt_max, const float* state,
                           const float* y, std::size_t ld_y) {
    check<ShapeError>(s.T >= 1 && s.H >= 1 && s.P >= 1 && s.N >= 1 && s.G >= 1, "[", op,
                      "] expected every dimension >= 1, got T=", s.T, " H=", s.H, " P=", s.P, " N=", s.N,
                      " G=", s.G);
    check<ShapeError>(s.H % s.G == 0, "[", op, "] expected H a multiple of G, got H=", s.H, " G=", s.G);
    check_ld(op, "x", ld_x, s.H * s.P);
    check_ld(op, "B/C", ld_bc, s.G * s.N);
    check_ld(op, "dt_raw", ld_dt, s.H);
    check_ld(op, "y", ld_y, s.H * s.P);
    check<ShapeError>(!std::isnan(dt_min) && !std::isnan(dt_max) && dt_min <= dt_max, "[", op,
                      "] expected dt_min <= dt_max, got ", dt_min, " and ", dt_max);
    check_ptr(op, "x", x);
    check_ptr(op, "B", B);
    check_ptr(op, "C", C);
    check_ptr(op, "dt_raw", dt_raw);
    check_ptr(op, "dt_bias", dt_bias);
    check_ptr(op, "A", A);
    check_ptr(op, "state", state);
    check_ptr(op, "y", y);
}

}  // namespace detail
}  // namespace hylens::kernels
