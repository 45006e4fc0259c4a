#pragma once
// Mamba-2 selective state space scan, SSD (families.md §2; mamba_ssm
// selective_state_update / ssd_minimal_discrete, HF torch_forward). Per head h (group
// grp = h / (H/G)) and token t:
//   Delta = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max),  a = Delta * A[h]  (A < 0)
//   S <- e^a S + Delta x B^T   (S: (P, N), HF layout [H, P, N]);   y = S C + D[h] x
// float32 throughout; the in-chunk cumulative log decays are summed in double so that
// exp(Acum_l - Acum_s) keeps its relative precision (the role of the segment sum of §2.3).
//
// Two forms with the same results (to float32 rounding), both exact continuations of any state:
//  * ssd_recurrent: token by token, one fused pass over S per token (update and read), at the
//    instruction-set level chosen at run time (core/simd.hpp, isa/recurrent_body.inl). Decode.
//  * ssd_chunked: §2.3 on chunks of `chunk` tokens (the last one shorter, equivalent to zero
//    padding). C B^T is computed once per group and chunk and shared by the H/G heads. Each
//    thread takes a contiguous range of heads and stacks those of a group: per chunk one product
//    Y = e^Acum (C S^T) for all of them, one per head Y_h += L_h (Delta x)_h, and one for the state
//    hand-over S' = e^Acum_last S + (w Delta x)^T B of all of them, on gemm_nt (our own GEMM
//    at levels avx2 and up, sgemm at baseline). Three sgemms per head and chunk had run at
//    0.6-0.65x this speed at Granite-4.0-H-350M's and Falcon-H1-0.5B's shapes. Prefill.
// Heads run in parallel on the pool. Plain twin: reference/ssd.hpp.

#include <algorithm>  // std::min, std::max, std::fill
#include <cmath>      // std::exp
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
#include "gemm_nt.hpp"
#include "isa/recurrent.hpp"
#include "recurrent_common.hpp"

namespace hylens::kernels {

namespace detail {

// One head over all T tokens; the pass over its state rows at the instruction-set level of `tag`
// (a tag of isa::with_isa, isa/recurrent_body.inl's ssd_rows).
template <class IsaTag>
inline void ssd_recurrent_head(IsaTag tag, const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                               std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                               const float* A, const float* D, float dt_min, float dt_max, float* state, float* y,
                               std::size_t ld_y, float* dt_out, std::size_t h) {
    const std::size_t P = s.P, N = s.N, grp = h / (s.H / s.G);
    float* S = state + h * P * N;  // (P, N)
    const float d = D ? D[h] : 0.0f;
    for (std::size_t t = 0; t < s.T; ++t) {
        const float dt = ssd_time_step(dt_raw[t * ld_dt + h], dt_bias[h], dt_min, dt_max);
        if (dt_out) dt_out[t * s.H + h] = dt;
        const float a = std::exp(dt * A[h]);
        const float* xr = x + t * ld_x + h * P;
        const float* Br = B + t * ld_bc + grp * N;
        const float* Cr = C + t * ld_bc + grp * N;
        float* yr = y + t * ld_y + h * P;
        ssd_rows(tag, S, P, N, a, dt, xr, Br, Cr, d, yr);
    }
}

// Floats of ssd_chunk's scratch for chunks of up to Q tokens and nh heads.
inline std::size_t ssd_chunk_floats(const SsdShape& s, std::size_t Q, std::size_t nh) noexcept {
    return nh * s.P * Q + Q * Q + nh * Q + gemm_nt_pack_floats(std::max(s.N, Q));
}

// One chunk of L tokens from t0 for the heads [a, a + nh) of one group, updating their states
// (nh P rows of N values from S) in place; the heads stacked, so two of the three products run
// over all of them at once (§2.3):
//   Y = diag(e^Acum_h) C S^T            one product, the nh P columns of Y at once
//   Y_h += Lm_h (Delta x)_h             per head, Lm_h = (C B^T) o e^(Acum_l - Acum_s), s <= l
//   S' = e^Acum_last S + X^T B          one product, X = diag(e^(Acum_last - Acum)) Delta x
// CB: (L, L) = C B^T of this chunk and group, BT: (N, L) its B transposed, both at row stride
// Q. Scratch (ssd_chunk_floats): XT (nh P, L) the scaled inputs transposed, Lm (L, L), eA
// (nh, Q), the pack; acum (nh, Q) in double. The L(L+1)/2 decays of a head run on the vector
// exp of `tag`'s level (isa/recurrent_body.inl's exp_inplace, within 2 ulp of e^x at the
// float32-rounded difference): one double exp each was 5-6 % of a Falcon-H1-0.5B prefill.
template <class IsaTag>
inline void ssd_chunk(IsaTag tag, simd::Level level, const SsdShape& s, const float* x, std::size_t ld_x,
                      const float* C, std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                      const float* A, const float* D, float dt_min, float dt_max, float* S, float* y,
                      std::size_t ld_y, float* dt_out, std::size_t a, std::size_t nh, std::size_t t0, std::size_t L,
                      const float* CB, const float* BT, std::size_t Q, float* scratch, double* acum) {
    const std::size_t P = s.P, N = s.N, grp = a / (s.H / s.G), W = nh * P;
    float* XT = scratch;       // (W, L): XT[(j P + p) L + l] = Delta_l x[t0 + l, (a + j) P + p]
    float* Lm = XT + W * Q;    // (L, L) of one head
    float* eA = Lm + Q * Q;    // (nh, Q) e^Acum_l
    float* pack = eA + nh * Q;
    for (std::size_t j = 0; j < nh; ++j) {
        const std::size_t h = a + j;
        double* ac = acum + j * Q;
        double acc = 0;
        for (std::size_t l = 0; l < L; ++l) {
            const std::size_t t = t0 + l;
            const float dt = ssd_time_step(dt_raw[t * ld_dt + h], dt_bias[h], dt_min, dt_max);
            if (dt_out) dt_out[t * s.H + h] = dt;
            // a_l rounded as the recurrent form rounds it, at most -1000 (recurrent_common.hpp)
            ac[l] = acc += clamp_log_decay(dt * A[h]);
            eA[j * Q + l] = static_cast<float>(std::exp(ac[l]));
            const float* xr = x + t * ld_x + h * P;
            float* col = XT + j * P * L + l;
            for (std::size_t p = 0; p < P; ++p) col[p * L] = dt * xr[p];
        }
    }
    const float* Cc = C + t0 * ld_bc + grp * N;  // (L, N) at stride ld_bc
    float* Y = y + t0 * ld_y + a * P;  // (L, W) at stride ld_y
    // Y = diag(e^Acum) C S^T + Lm (Delta x) + D x
    gemm_nt(level, L, W, N, 1.0f, Cc, ld_bc, S, N, Y, ld_y, false, pack);
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t j = 0; j < nh; ++j) scale_inplace(tag, Y + l * ld_y + j * P, eA[j * Q + l], P);
    for (std::size_t j = 0; j < nh; ++j) {
        const double* ac = acum + j * Q;
        for (std::size_t l = 0; l < L; ++l) {
            // The first n >= l + 1 values of the row, n a multiple of 16 where the row allows
            // (whole vectors at every level), those past l from e^0 and zeroed after.
            float* row = Lm + l * L;
            const std::size_t n = std::min(L, (l + 16) / 16 * 16);
            for (std::size_t i = 0; i <= l; ++i) row[i] = static_cast<float>(ac[l] - ac[i]);
            std::fill(row + l + 1, row + n, 0.0f);
            exp_inplace(tag, row, n);
            mul_inplace(tag, row, CB + l * Q, l + 1);
            std::fill(row + l + 1, row + L, 0.0f);
        }
        gemm_nt(level, L, P, L, 1.0f, Lm, L, XT + j * P * L, L, Y + j * P, ld_y, true, pack);
    }
    if (D) {
        for (std::size_t l = 0; l < L; ++l) {
            const float* xr = x + (t0 + l) * ld_x + a * P;
            float* Yr = Y + l * ld_y;
            for (std::size_t j = 0; j < nh; ++j)
                for (std::size_t p = 0; p < P; ++p) Yr[j * P + p] += D[a + j] * xr[j * P + p];
        }
    }
    // S' = e^Acum_last S + (diag(e^(Acum_last - Acum)) Delta x)^T B
    for (std::size_t j = 0; j < nh; ++j) {
        const double* ac = acum + j * Q;
        float* w = Lm;  // (L) the hand-over weights of head j (Lm is free again)
        for (std::size_t l = 0; l < L; ++l) w[l] = static_cast<float>(std::exp(ac[L - 1] - ac[l]));
        for (std::size_t p = 0; p < P; ++p) mul_inplace(tag, XT + (j * P + p) * L, w, L);
        scale_inplace(tag, S + j * P * N, eA[j * Q + L - 1], P * N);
    }
    gemm_nt(level, W, N, L, 1.0f, XT, L, BT, Q, S, N, true, pack);
}

}  // namespace detail

/// Token-by-token SSD (§2.2). x: token t head h at x + t*ld_x + h*P; B, C: token t group g at
/// B + t*ld_bc + g*N; dt_raw: token t head h at dt_raw[t*ld_dt + h]; dt_bias, A (negative),
/// D (or nullptr): (H); state: (H, P, N) in/out; y: token t at y + t*ld_y, H*P values including
/// D x; dt_out: nullptr or (T, H), receives the clamped Delta. Throws ShapeError on bad shapes.
inline void ssd_recurrent(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                          std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                          const float* A, const float* D, float dt_min, float dt_max, float* state, float* y,
                          std::size_t ld_y, float* dt_out) {
    detail::check_ssd_args("ssd_recurrent", s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, dt_min, dt_max,
                           state, y, ld_y);
    const simd::Level level = simd::active();
    parallel_for(s.H, [&](std::size_t h0, std::size_t h1) {
        isa::with_isa(level, [&](auto tag) {
            for (std::size_t h = h0; h < h1; ++h)
                detail::ssd_recurrent_head(tag, s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max,
                                           state, y, ld_y, dt_out, h);
        });
    });
}

/// Chunked SSD (§2.3): same arguments and results as ssd_recurrent for any T >= 1 and any
/// incoming state; chunk >= 1 tokens per chunk (the model's mamba_chunk_size does not change
/// the result beyond rounding).
inline void ssd_chunked(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                        std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                        const float* A, const float* D, float dt_min, float dt_max, float* state, float* y,
                        std::size_t ld_y, float* dt_out, std::size_t chunk = 64) {
    const char* op = "ssd_chunked";
    detail::check_ssd_args(op, s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, dt_min, dt_max, state, y, ld_y);
    check<ShapeError>(chunk >= 1, "[", op, "] expected chunk >= 1, got ", chunk);
    const std::size_t Q = chunk < s.T ? chunk : s.T;
    const std::size_t n_chunks = (s.T + Q - 1) / Q;
    // C B^T and B transposed per (group, chunk): (G, n_chunks, Q, Q) and (G, n_chunks, N, Q), shared
    // by the H/G heads of a group.
    thread_local std::vector<float> cb, bt;
    cb.resize(s.G * n_chunks * Q * Q);
    bt.resize(s.G * n_chunks * s.N * Q);
    float* CB = cb.data();
    float* BT = bt.data();
    const simd::Level level = simd::active();
    parallel_for(s.G * n_chunks, [&](std::size_t i0, std::size_t i1) {
        thread_local std::vector<float> pack;
        pack.resize(gemm_nt_pack_floats(s.N));
        for (std::size_t i = i0; i < i1; ++i) {
            const std::size_t grp = i / n_chunks, t0 = (i % n_chunks) * Q;
            const std::size_t L = t0 + Q <= s.T ? Q : s.T - t0;
            const float* Cc = C + t0 * ld_bc + grp * s.N;
            const float* Bc = B + t0 * ld_bc + grp * s.N;
            gemm_nt(level, L, L, s.N, 1.0f, Cc, ld_bc, Bc, ld_bc, CB + i * Q * Q, Q, false, pack.data());
            float* bti = BT + i * s.N * Q;
            for (std::size_t l = 0; l < L; ++l)
                for (std::size_t n = 0; n < s.N; ++n) bti[n * Q + l] = Bc[l * ld_bc + n];
        }
    });
    const std::size_t per_group = s.H / s.G;
    parallel_for(s.H, [&](std::size_t h0, std::size_t h1) {
        thread_local std::vector<float> scratch;  // grows once, reused by every call on this thread
        thread_local std::vector<double> acum;
        const std::size_t nh_max = std::min(h1 - h0, per_group);
        scratch.resize(detail::ssd_chunk_floats(s, Q, nh_max));
        acum.resize(nh_max * Q);
        isa::with_isa(level, [&](auto tag) {
            // The thread's heads in runs within one group (they share C B^T, B and C).
            for (std::size_t a = h0; a < h1;) {
                const std::size_t grp = a / per_group, b = std::min(h1, (grp + 1) * per_group);
                float* S = state + a * s.P * s.N;
                for (std::size_t c = 0; c < n_chunks; ++c) {
                    const std::size_t t0 = c * Q, L = t0 + Q <= s.T ? Q : s.T - t0;
                    detail::ssd_chunk(tag, level, s, x, ld_x, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, S, y,
                                      ld_y, dt_out, a, b - a, t0, L, CB + (grp * n_chunks + c) * Q * Q,
                                      BT + (grp * n_chunks + c) * s.N * Q, Q, scratch.data(), acum.data());
                }
                a = b;
            }
        });
    }, 1, kChunkedPartsPerThread);
}

/// From this many tokens on ssd takes the chunked form at the levels below avx512 (products on
/// sgemm at baseline, on our AVX2 GEMM at avx2). Measured at Granite-4.0-H-1B shapes
/// (docs/kernels.md "Mamba-2 SSD"): recurrent 0.60 ms against chunked 0.67 ms at T = 8, chunked
/// ahead from T = 16 (1.1 against 1.6 ms); on an AVX2-only Zen 3 the crossover between 12 and 16
/// tokens, on sgemm and on our AVX2 GEMM alike.
inline constexpr std::size_t kSsdChunkedMinT = 16;

/// The same where they run on our AVX-512 GEMM (levels avx512, avx512bf16). Measured at the
/// shapes of Granite-4.0-H-350M, Falcon-H1-0.5B and Granite-4.0-H-1B, 1 and 2 threads, best of
/// 200: chunked / recurrent time 0.88-1.01 at T = 8, 0.75-0.93 at T = 12, 0.63-0.76 at
/// T = 16; recurrent ahead below 8 tokens (chunked 1.05-1.33x its time at T = 4, 0.97-1.19x
/// at T = 6).
inline constexpr std::size_t kSsdChunkedMinTAvx512 = 8;

/// The chunked/recurrent threshold of ssd at an instruction-set level: a constant per product
/// kernel, not a timing at run time, so the outputs do not depend on the machine's load.
inline std::size_t ssd_chunked_min_t(simd::Level level) noexcept {
    return simd::at_least(level, simd::Level::avx512) ? kSsdChunkedMinTAvx512 : kSsdChunkedMinT;
}

/// Dispatch: the recurrent form below ssd_chunked_min_t(simd::active()) tokens, the chunked form
/// (chunk 64) from there.
inline void ssd(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias, const float* A,
                const float* D, float dt_min, float dt_max, float* state, float* y, std::size_t ld_y,
                float* dt_out) {
    if (s.T < ssd_chunked_min_t(simd::active()))
        ssd_recurrent(s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, state, y, ld_y, dt_out);
    else
        ssd_chunked(s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, state, y, ld_y, dt_out,
                    64);
}

}  // namespace hylens::kernels
