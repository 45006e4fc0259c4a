#pragma once
// The gated delta rule, the core of Gated DeltaNet (families.md §1; HF
// torch_recurrent_gated_delta_rule / torch_chunk_gated_delta_rule, FLA naive.py). Per value
// head h (reading key head h / (Hv/Hk)) and token t, with q^ = L2Norm(q)/sqrt(dk), k^ = L2Norm(k)
// (or q/sqrt(dk), k without the norm):
//   S <- exp(g_t) S;   u = beta_t (v_t - S^T k^);   S <- S + k^ u^T;   o_t = S^T q^
// S: (dk, dv) per head, key index first (HF layout [Hv, dk, dv]). float32 throughout; the
// in-chunk cumulative log decays are summed in double so exp(gamma_i - gamma_j) keeps its
// relative precision when the decays are large.
//
// Two forms with the same results (to float32 rounding), both exact continuations of any state:
//  * gated_delta_rule_recurrent: token by token, one fused pass over S per token (the update of
//    token t and the reads S^T k, S^T q of token t+1 share the pass), at the instruction-set
//    level chosen at run time (core/simd.hpp, isa/recurrent_body.inl). Decode path, and the
//    prefill at the avx512 levels.
//  * gated_delta_rule_chunked: §1.4 on chunks of `chunk` tokens (the last one shorter, which is
//    the same as zero padding). Per chunk and head: 7 small products (kernels/gemm_nt.hpp: our
//    own kernels at avx2 and up, OpenBLAS sgemm at baseline) and a forward substitution for
//    (I + A)^-1. Prefill path where the measured rule of gated_delta_dispatch says so (level
//    avx2 from 4 tokens on, baseline from 8).
// Both run the value heads in parallel on the pool. Plain twin: reference/gated_delta.hpp.

#include <cmath>    // std::exp, std::sqrt
#include <cstddef>  // std::size_t
#include <utility>  // std::swap
#include <vector>   // std::vector

#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
#include "gemm_nt.hpp"
#include "isa/recurrent.hpp"
#include "recurrent_common.hpp"

namespace hylens::kernels {

namespace detail {

// q^ (scaled by 1/sqrt(dk)) and k^ of token t for key head kh, into qn and kn (dk each).
inline void gdr_prepare_qk(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                           std::size_t ld_k, std::size_t t, std::size_t kh, bool l2norm_qk, float* qn, float* kn) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.dk));
    const float* qr = q + t * ld_q + kh * s.dk;
    const float* kr = k + t * ld_k + kh * s.dk;
    if (l2norm_qk) {
        l2_normalize(qr, s.dk, scale, qn);
        l2_normalize(kr, s.dk, 1.0f, kn);
    } else {
        for (std::size_t i = 0; i < s.dk; ++i) {
            qn[i] = qr[i] * scale;
            kn[i] = kr[i];
        }
    }
}

// The recurrence for one value head over all T tokens (see the top comment); the passes over S
// at the instruction-set level of `tag` (a tag of isa::with_isa, isa/recurrent_body.inl).
template <class IsaTag>
inline void gdr_recurrent_head(IsaTag tag, const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                               std::size_t ld_k, const float* v, std::size_t ld_v, const float* g,
                               const float* beta, float* state, float* out, std::size_t ld_o, bool l2norm_qk,
                               std::size_t h) {
    const std::size_t dk = s.dk, dv = s.dv, kh = h / (s.Hv / s.Hk);
    float* S = state + h * dk * dv;  // (dk, dv)
    // Per-head vectors: on the stack for head dims up to 256 (no pool thread allocates on its
    // first call), else per thread.
    constexpr std::size_t kStackFloats = 7 * 256;
    float on_stack[kStackFloats];
    float* qn = on_stack;  // (dk) this token
    if (4 * dk + 3 * dv > kStackFloats) {
        thread_local std::vector<float> wide;
        wide.resize(4 * dk + 3 * dv);
        qn = wide.data();
    }
    float* kn = qn + dk;
    float* qn2 = kn + dk;  // (dk) next token
    float* kn2 = qn2 + dk;
    float* e = kn2 + dk;  // (dv) S^T k^ before this token's update
    float* p = e + dv;    // (dv) S^T q^ before this token's update
    float* u = p + dv;    // (dv) delta-rule correction

    gdr_prepare_qk(s, q, ld_q, k, ld_k, 0, kh, l2norm_qk, qn, kn);
    gdr_read(tag, S, dk, dv, kn, qn, e, p);
    for (std::size_t t = 0; t < s.T; ++t) {
        const float a = std::exp(g[t * s.Hv + h]);
        const float b = beta[t * s.Hv + h];
        float kq = 0.0f;
        for (std::size_t i = 0; i < dk; ++i) kq += kn[i] * qn[i];
        // With S_t = a S + k u^T:  S_t^T k = a e + ..., and o = S_t^T q = a p + (k . q) u.
        const float* vr = v + t * ld_v + h * dv;
        float* orow = out + t * ld_o + h * dv;
        for (std::size_t j = 0; j < dv; ++j) {
            u[j] = b * (vr[j] - a * e[j]);
            orow[j] = a * p[j] + kq * u[j];
        }
        const bool next = t + 1 < s.T;
        if (next) gdr_prepare_qk(s, q, ld_q, k, ld_k, t + 1, kh, l2norm_qk, qn2, kn2);
        gdr_update(tag, S, dk, dv, a, kn, u, kn2, qn2, e, p, next);  // e, p: the next token's reads
        std::swap(qn, qn2);
        std::swap(kn, kn2);
    }
}

// One chunk of L tokens starting at t0 for value head h (§1.4), updating S in place.
// Scratch sizes are for chunk length C >= L.
inline void gdr_chunk(simd::Level level, const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                      std::size_t ld_k, const float* v, std::size_t ld_v, const float* g, const float* beta, float* S,
                      float* out, std::size_t ld_o, bool l2norm_qk, std::size_t h, std::size_t t0, std::size_t L,
                      std::size_t C, float* scratch, double* gam) {
    const std::size_t dk = s.dk, dv = s.dv, kh = h / (s.Hv / s.Hk), ldu = dv + dk;
    float* Qs = scratch;          // (L, dk) q^, later e^gamma q^
    float* Ks = Qs + L * dk;      // (L, dk) k^ (right after Qs: [Q; K] is one (2L, dk) operand)
    float* Gm = Qs + 2 * C * dk;  // (2L, L): rows 0..L-1 Q K^T -> M, rows L..2L-1 K K^T -> A
    float* Tm = Gm + 2 * C * C;   // (L, L) (I + A)^-1
    float* Tb = Tm + C * C;       // (L, L) Tm diag(beta)
    float* UW = Tb + C * C;       // (L, dv + dk): [U | W], then U <- V_new
    float* eg = UW + C * ldu;     // (L) e^gamma_i
    float* ew = eg + C;           // (L) e^(gamma_last - gamma_i)
    float* pack = ew + C;         // gemm_nt_pack_floats(dk): the packed K^ of the first product
    const float* bt = beta + t0 * s.Hv + h;  // beta of row i at bt[i * Hv]

    // gamma_i, the log decay from the chunk start: each step counts at most -kMaxLogDecayStep
    // (exp of it is 0 in double), so a step of -1e15 or -inf leaves the later steps' sums exact
    // and gamma_i - gamma_j finite, as the recurrent form's exp(g) = 0 does.
    double acc = 0;
    for (std::size_t i = 0; i < L; ++i) {
        gdr_prepare_qk(s, q, ld_q, k, ld_k, t0 + i, kh, l2norm_qk, Qs + i * dk, Ks + i * dk);
        gam[i] = acc += clamp_log_decay(g[(t0 + i) * s.Hv + h]);
    }
    for (std::size_t i = 0; i < L; ++i) {
        eg[i] = static_cast<float>(std::exp(gam[i]));
        ew[i] = static_cast<float>(std::exp(gam[L - 1] - gam[i]));
    }
    // [Q; K] K^T in one product: (2L, dk) x (dk, L).
    gemm_nt(level, 2 * L, L, dk, 1.0f, Qs, dk, Ks, dk, Gm, L, false, pack);
    float* M = Gm;       // (L, L)
    float* A = Gm + L * L;  // (L, L)
    for (std::size_t i = 0; i < L; ++i) {
        const float bi = bt[i * s.Hv];
        for (std::size_t j = 0; j < i; ++j) {
            const float d = static_cast<float>(std::exp(gam[i] - gam[j]));  // decay j -> i, <= 1
            A[i * L + j] *= bi * d;
            M[i * L + j] *= d;
        }
        for (std::size_t j = i + 1; j < L; ++j) M[i * L + j] = 0.0f;
    }
    // Tm = (I + A)^-1 by forward substitution: Tm[i] = e_i - sum_{m<i} A[i][m] Tm[m]
    // (Tm[m] is zero right of its diagonal, so the axpy runs over columns 0..m only).
    for (std::size_t i = 0; i < L; ++i) {
        float* ti = Tm + i * L;
        for (std::size_t j = 0; j < L; ++j) ti[j] = 0.0f;
        ti[i] = 1.0f;
        for (std::size_t m = 0; m < i; ++m) {
            const float aim = A[i * L + m];
            const float* tm = Tm + m * L;
            for (std::size_t j = 0; j <= m; ++j) ti[j] -= aim * tm[j];
        }
    }
    // U = Tm diag(beta) V (V read in place), W = Tm diag(beta e^gamma) K^.
    for (std::size_t i = 0; i < L; ++i) {
        for (std::size_t j = 0; j <= i; ++j) {
            const float bj = bt[j * s.Hv];
            Tb[i * L + j] = Tm[i * L + j] * bj;
            Tm[i * L + j] *= bj * eg[j];
        }
        for (std::size_t j = i + 1; j < L; ++j) Tb[i * L + j] = 0.0f;
    }
    float* U = UW;
    float* W = UW + dv;
    gemm_nn(level, false, L, dv, L, 1.0f, Tb, L, v + t0 * ld_v + h * dv, ld_v, 0.0f, U, ldu);
    gemm_nn(level, false, L, dk, L, 1.0f, Tm, L, Ks, dk, 0.0f, W, ldu);
    // V_new = U - W S
    gemm_nn(level, false, L, dv, dk, -1.0f, W, ldu, S, dv, 1.0f, U, ldu);
    // O = diag(e^gamma) Q^ S + M V_new, written straight into out.
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t j = 0; j < dk; ++j) Qs[i * dk + j] *= eg[i];
    float* O = out + t0 * ld_o + h * dv;
    gemm_nn(level, false, L, dv, dk, 1.0f, Qs, dk, S, dv, 0.0f, O, ld_o);
    gemm_nn(level, false, L, dv, L, 1.0f, M, L, U, ldu, 1.0f, O, ld_o);
    // S' = e^gamma_last S + (diag(e^(gamma_last - gamma)) K^)^T V_new
    for (std::size_t i = 0; i < L; ++i)
        for (std::size_t j = 0; j < dk; ++j) Ks[i * dk + j] *= ew[i];
    gemm_nn(level, true, dk, dv, L, 1.0f, Ks, dk, U, ldu, eg[L - 1], S, dv);
}

}  // namespace detail

/// Token-by-token gated delta rule (§1.3). q, k: token t key head g at q + t*ld_q + g*dk (same
/// for k with ld_k); v: token t value head h at v + t*ld_v + h*dv; g (log decay <= 0) and beta:
/// token t head h at g[t*Hv + h]; state: (Hv, dk, dv) in/out; out: token t head h at
/// out + t*ld_o + h*dv. Throws ShapeError (naming the kernel) on impossible shapes.
inline void gated_delta_rule_recurrent(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                                       std::size_t ld_k, const float* v, std::size_t ld_v, const float* g,
                                       const float* beta, float* state, float* out, std::size_t ld_o,
                                       bool l2norm_qk) {
    detail::check_gated_delta_args("gated_delta_rule_recurrent", s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out,
                                   ld_o);
    const simd::Level level = simd::active();
    parallel_for(s.Hv, [&](std::size_t h0, std::size_t h1) {
        isa::with_isa(level, [&](auto tag) {
            for (std::size_t h = h0; h < h1; ++h)
                detail::gdr_recurrent_head(tag, s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out, ld_o, l2norm_qk, h);
        });
    });
}

/// Chunked gated delta rule (§1.4), same arguments and results as the recurrent form, for any
/// T >= 1 and any incoming state; chunk >= 1 tokens per chunk (64 in HF).
inline void gated_delta_rule_chunked(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                                     std::size_t ld_k, const float* v, std::size_t ld_v, const float* g,
                                     const float* beta, float* state, float* out, std::size_t ld_o,
                                     bool l2norm_qk, std::size_t chunk = 64) {
    const char* op = "gated_delta_rule_chunked";
    detail::check_gated_delta_args(op, s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out, ld_o);
    check<ShapeError>(chunk >= 1, "[", op, "] expected chunk >= 1, got ", chunk);
    const std::size_t C = chunk < s.T ? chunk : s.T;  // a chunk longer than T only wastes scratch
    const std::size_t floats = 2 * C * s.dk + 4 * C * C + C * (s.dv + s.dk) + 2 * C + gemm_nt_pack_floats(s.dk);
    const simd::Level level = simd::active();
    parallel_for(s.Hv, [&](std::size_t h0, std::size_t h1) {
        thread_local std::vector<float> scratch;  // grows once, reused by every call on this thread
        thread_local std::vector<double> gam;
        scratch.resize(floats);
        gam.resize(C);
        for (std::size_t h = h0; h < h1; ++h) {
            float* S = state + h * s.dk * s.dv;
            for (std::size_t t0 = 0; t0 < s.T; t0 += C) {
                const std::size_t L = t0 + C <= s.T ? C : s.T - t0;
                detail::gdr_chunk(level, s, q, ld_q, k, ld_k, v, ld_v, g, beta, S, out, ld_o, l2norm_qk, h, t0, L,
                                  C, scratch.data(), gam.data());
            }
        }
    }, 1, kChunkedPartsPerThread);
}

/// The form gated_delta_rule takes at an instruction-set level: the chunked form, in chunks of
/// `chunk` tokens, from `min_t` tokens on; the recurrent form below.
struct GatedDeltaDispatch {
    std::size_t min_t;
    std::size_t chunk;
};

/// The rule per level, measured at Qwen3.5-0.8B's 16 heads of 128 x 128 at 1 and 2 threads
/// (docs/kernels.md "Gated delta rule"; a head's state is 64 KiB):
///  * avx512, avx512bf16 (AMD Zen 5, 48 KiB L1 data cache): the fused recurrent pass was faster
///    at every T from 8 to 512 (the chunked form 1.2-1.5x its time with OpenBLAS's AVX-512
///    kernels forced, 1.8-2.1x with its default AVX2 ones): never chunked.
///  * avx2 (AMD Zen 3, 32 KiB L1), the chunk's products on our own kernels (gemm_nt, gemm_nn):
///    chunks of 16 tokens 1.04-1.41x the recurrent form's speed at T = 4 to 8 and 1.3-1.6x from
///    T = 16 on (chunks of 32: 1.1-1.3x, of 64: 0.85-1.04x); the recurrent form faster at T = 2
///    (chunked 0.8x), the two about even at T = 3 (0.93-1.08x). (On OpenBLAS's products,
///    session 25: chunks of 32 from T = 8.)
///  * baseline (the same Zen 3 forced to it, 1 thread: the recurrent pass in SSE2, the chunked
///    form's products still OpenBLAS's AVX2 kernels): chunked 1.8-2.2x from T = 8 (1.33x at
///    T = 4). Unmeasured on aarch64, whose baseline is NEON.
/// (The avx512 levels' verdict was measured with the products on OpenBLAS; the chunk now runs
/// them on the avx2 kernels there too, not measured on an AVX-512 machine since.)
inline GatedDeltaDispatch gated_delta_dispatch(simd::Level level) noexcept {
    if (simd::at_least(level, simd::Level::avx512))
        return {static_cast<std::size_t>(-1), 64};
    if (simd::at_least(level, simd::Level::avx2))
        return {4, 16};
    return {8, 32};
}

/// Dispatch: the form gated_delta_dispatch(simd::active()) names. Same arguments and results as
/// gated_delta_rule_recurrent (to float32 rounding).
inline void gated_delta_rule(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                             std::size_t ld_k, const float* v, std::size_t ld_v, const float* g, const float* beta,
                             float* state, float* out, std::size_t ld_o, bool l2norm_qk) {
    const GatedDeltaDispatch rule = gated_delta_dispatch(simd::active());
    if (s.T < rule.min_t)
        gated_delta_rule_recurrent(s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out, ld_o, l2norm_qk);
    else
        gated_delta_rule_chunked(s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out, ld_o, l2norm_qk, rule.chunk);
}

}  // namespace hylens::kernels
