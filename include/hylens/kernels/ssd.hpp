#pragma once
// Mamba-2 selective state space scan, SSD (architectures.md §2; mamba_ssm
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
//    padding). C B^T is computed once per group and chunk and shared by the H/G heads; per head
//    and chunk, 3 small sgemms (blas::gemm_serial): y = e^Acum (C S^T) + L (Delta x), and the
//    state hand-over S' = e^Acum_last S + (w Delta x)^T B. Prefill.
// Heads run in parallel on the pool. Plain twin: reference/ssd.hpp.

#include <cmath>    // std::exp
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "../core/blas.hpp"
#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
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

// One chunk of L tokens from t0 for head h (§2.3), updating S in place. CB: (L, L) = C B^T of
// this chunk and group, row stride ldcb. Scratch sized for chunk length Q >= L. The L(L+1)/2
// decays e^(Acum_l - Acum_s) run on the vector exp of `tag`'s level (isa/recurrent_body.inl's
// exp_inplace, within 2 ulp of e^x at the float32-rounded difference): one double exp each was
// 5-6 % of a Falcon-H1-0.5B prefill.
template <class IsaTag>
inline void ssd_chunk(IsaTag tag, const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                      std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                      const float* A, const float* D, float dt_min, float dt_max, float* S, float* y,
                      std::size_t ld_y, float* dt_out, std::size_t h, std::size_t t0, std::size_t L,
                      const float* CB, std::size_t ldcb, std::size_t Q, float* scratch, double* acum) {
    const std::size_t P = s.P, N = s.N, grp = h / (s.H / s.G);
    float* xt = scratch;      // (L, P) Delta x, later e^(Acum_last - Acum_s) Delta x
    float* Lm = xt + Q * P;   // (L, L) (C_l . B_s) e^(Acum_l - Acum_s), s <= l
    float* eA = Lm + Q * Q;   // (L) e^Acum_l
    float* dts = eA + Q;      // (L) Delta
    double acc = 0;
    for (std::size_t l = 0; l < L; ++l) {
        const std::size_t t = t0 + l;
        const float dt = ssd_time_step(dt_raw[t * ld_dt + h], dt_bias[h], dt_min, dt_max);
        if (dt_out) dt_out[t * s.H + h] = dt;
        dts[l] = dt;
        acum[l] = acc += double(dt * A[h]);  // a_l rounded as the recurrent form rounds it
        const float* xr = x + t * ld_x + h * P;
        for (std::size_t p = 0; p < P; ++p) xt[l * P + p] = dt * xr[p];
    }
    for (std::size_t l = 0; l < L; ++l) {
        eA[l] = static_cast<float>(std::exp(acum[l]));
        float* row = Lm + l * L;
        for (std::size_t j = 0; j <= l; ++j) row[j] = static_cast<float>(acum[l] - acum[j]);
        exp_inplace(tag, row, l + 1);
        for (std::size_t j = 0; j <= l; ++j) row[j] *= CB[l * ldcb + j];
        for (std::size_t j = l + 1; j < L; ++j) row[j] = 0.0f;
    }
    const float* Cc = C + t0 * ld_bc + grp * N;  // (L, N) at stride ld_bc
    const float* Bc = B + t0 * ld_bc + grp * N;
    float* Y = y + t0 * ld_y + h * P;  // (L, P) at stride ld_y
    // Y = diag(e^Acum) C S^T + Lm (Delta x) + D x
    blas::gemm_serial(false, true, L, P, N, 1.0f, Cc, ld_bc, S, N, 0.0f, Y, ld_y);
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t p = 0; p < P; ++p) Y[l * ld_y + p] *= eA[l];
    blas::gemm_serial(false, false, L, P, L, 1.0f, Lm, L, xt, P, 1.0f, Y, ld_y);
    if (D) {
        for (std::size_t l = 0; l < L; ++l) {
            const float* xr = x + (t0 + l) * ld_x + h * P;
            for (std::size_t p = 0; p < P; ++p) Y[l * ld_y + p] += D[h] * xr[p];
        }
    }
    // S' = e^Acum_last S + (diag(e^(Acum_last - Acum)) Delta x)^T B
    for (std::size_t l = 0; l < L; ++l) {
        const float w = static_cast<float>(std::exp(acum[L - 1] - acum[l]));
        for (std::size_t p = 0; p < P; ++p) xt[l * P + p] *= w;
    }
    blas::gemm_serial(true, false, P, N, L, 1.0f, xt, P, Bc, ld_bc, eA[L - 1], S, N);
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
    // C B^T per (group, chunk): (G, n_chunks, Q, Q), shared by the H/G heads of a group.
    thread_local std::vector<float> cb;
    cb.resize(s.G * n_chunks * Q * Q);
    float* CB = cb.data();
    parallel_for(s.G * n_chunks, [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1; ++i) {
            const std::size_t grp = i / n_chunks, t0 = (i % n_chunks) * Q;
            const std::size_t L = t0 + Q <= s.T ? Q : s.T - t0;
            const float* Cc = C + t0 * ld_bc + grp * s.N;
            const float* Bc = B + t0 * ld_bc + grp * s.N;
            blas::gemm_serial(false, true, L, L, s.N, 1.0f, Cc, ld_bc, Bc, ld_bc, 0.0f, CB + i * Q * Q, Q);
        }
    });
    const std::size_t floats = Q * s.P + Q * Q + 2 * Q;
    const simd::Level level = simd::active();
    parallel_for(s.H, [&](std::size_t h0, std::size_t h1) {
        thread_local std::vector<float> scratch;  // grows once, reused by every call on this thread
        thread_local std::vector<double> acum;
        scratch.resize(floats);
        acum.resize(Q);
        isa::with_isa(level, [&](auto tag) {
            for (std::size_t h = h0; h < h1; ++h) {
                const std::size_t grp = h / (s.H / s.G);
                float* S = state + h * s.P * s.N;
                for (std::size_t c = 0; c < n_chunks; ++c) {
                    const std::size_t t0 = c * Q, L = t0 + Q <= s.T ? Q : s.T - t0;
                    detail::ssd_chunk(tag, s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, S, y,
                                      ld_y, dt_out, h, t0, L, CB + (grp * n_chunks + c) * Q * Q, Q, Q, scratch.data(),
                                      acum.data());
                }
            }
        });
    });
}

/// From this many tokens on ssd takes the chunked form. Measured at Granite-4.0-H-1B shapes
/// (docs/kernels.md "Mamba-2 SSD"): recurrent 0.60 ms against chunked 0.67 ms at T = 8, chunked
/// ahead from T = 16 (1.1 against 1.6 ms).
inline constexpr std::size_t kSsdChunkedMinT = 16;

/// Dispatch: the recurrent form for T < kSsdChunkedMinT, the chunked form (chunk 64) otherwise.
inline void ssd(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias, const float* A,
                const float* D, float dt_min, float dt_max, float* state, float* y, std::size_t ld_y,
                float* dt_out) {
    if (s.T < kSsdChunkedMinT)
        ssd_recurrent(s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, state, y, ld_y, dt_out);
    else
        ssd_chunked(s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, state, y, ld_y, dt_out,
                    64);
}

}  // namespace hylens::kernels
