#pragma once
// Plain twin of kernels/gated_delta.hpp: the gated delta rule (families.md §1) written as
// the equations read, in double precision internally (state and outputs rounded to float32 on
// the way out), to serve as the oracle of the fast kernels.
//   recurrent (§1.3, HF torch_recurrent_gated_delta_rule): per token and value head
//     S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q
//   chunked (§1.4, HF torch_chunk_gated_delta_rule): zero-padded chunks of C tokens,
//     Tm = (I + A)^-1 by forward substitution, U = Tm (beta V), W = Tm (beta e^gamma K), ...
// q and k are L2-normalised (eps 1e-6 inside the root) when l2norm_qk, and q is always scaled
// by 1/sqrt(dk) after the norm.

#include <cmath>    // std::exp, std::sqrt
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "../recurrent_common.hpp"

namespace hylens::reference {

using kernels::GatedDeltaShape;

namespace detail {
// q (scaled) and k of token t for value head h, normalised as the kernel does, in double.
inline void gdr_qk(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k, std::size_t ld_k,
                   std::size_t t, std::size_t h, bool l2norm_qk, double* qn, double* kn) {
    const std::size_t kh = h / (s.Hv / s.Hk);
    const float* qr = q + t * ld_q + kh * s.dk;
    const float* kr = k + t * ld_k + kh * s.dk;
    double qq = 0, kk = 0;
    for (std::size_t i = 0; i < s.dk; ++i) {
        qq += double(qr[i]) * qr[i];
        kk += double(kr[i]) * kr[i];
    }
    const double qi = l2norm_qk ? 1.0 / std::sqrt(qq + 1e-6) : 1.0;
    const double ki = l2norm_qk ? 1.0 / std::sqrt(kk + 1e-6) : 1.0;
    const double scale = 1.0 / std::sqrt(double(s.dk));
    for (std::size_t i = 0; i < s.dk; ++i) {
        qn[i] = qr[i] * qi * scale;
        kn[i] = kr[i] * ki;
    }
}
}  // namespace detail

/// Token-by-token gated delta rule (§1.3). Shapes as kernels::gated_delta_rule_recurrent.
inline void gated_delta_rule_recurrent(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                                       std::size_t ld_k, const float* v, std::size_t ld_v, const float* g,
                                       const float* beta, float* state, float* out, std::size_t ld_o,
                                       bool l2norm_qk) {
    kernels::detail::check_gated_delta_args("reference::gated_delta_rule_recurrent", s, q, ld_q, k, ld_k, v, ld_v,
                                            g, beta, state, out, ld_o);
    const std::size_t dk = s.dk, dv = s.dv;
    std::vector<double> S(dk * dv), qn(dk), kn(dk), u(dv);  // S: (dk, dv)
    for (std::size_t h = 0; h < s.Hv; ++h) {
        float* Sh = state + h * dk * dv;
        for (std::size_t i = 0; i < dk * dv; ++i) S[i] = Sh[i];
        for (std::size_t t = 0; t < s.T; ++t) {
            detail::gdr_qk(s, q, ld_q, k, ld_k, t, h, l2norm_qk, qn.data(), kn.data());
            const double decay = std::exp(double(g[t * s.Hv + h]));
            const double b = beta[t * s.Hv + h];
            const float* vr = v + t * ld_v + h * dv;
            for (auto& e : S) e *= decay;
            for (std::size_t j = 0; j < dv; ++j) {
                double e = 0;  // (S^T k)[j]
                for (std::size_t i = 0; i < dk; ++i) e += S[i * dv + j] * kn[i];
                u[j] = b * (vr[j] - e);
            }
            for (std::size_t i = 0; i < dk; ++i)
                for (std::size_t j = 0; j < dv; ++j) S[i * dv + j] += kn[i] * u[j];
            float* orow = out + t * ld_o + h * dv;
            for (std::size_t j = 0; j < dv; ++j) {
                double o = 0;
                for (std::size_t i = 0; i < dk; ++i) o += S[i * dv + j] * qn[i];
                orow[j] = static_cast<float>(o);
            }
        }
        for (std::size_t i = 0; i < dk * dv; ++i) Sh[i] = static_cast<float>(S[i]);
    }
}

/// Chunked gated delta rule (§1.4), the padded algorithm verbatim. Same results as the
/// recurrent form for any T, any initial state and any chunk >= 1.
inline void gated_delta_rule_chunked(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                                     std::size_t ld_k, const float* v, std::size_t ld_v, const float* g,
                                     const float* beta, float* state, float* out, std::size_t ld_o,
                                     bool l2norm_qk, std::size_t chunk = 64) {
    const char* op = "reference::gated_delta_rule_chunked";
    kernels::detail::check_gated_delta_args(op, s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out, ld_o);
    check<ShapeError>(chunk >= 1, "[", op, "] expected chunk >= 1, got ", chunk);
    const std::size_t dk = s.dk, dv = s.dv, C = chunk;
    const std::size_t n_chunks = (s.T + C - 1) / C;
    const std::size_t Tp = n_chunks * C;  // padded length
    std::vector<double> Q(Tp * dk, 0.0), K(Tp * dk, 0.0), V(Tp * dv, 0.0), G(Tp, 0.0), Bt(Tp, 0.0);
    std::vector<double> S(dk * dv), gam(C), eg(C), ew(C), A(C * C), Tm(C * C), U(C * dv), W(C * dk), Vn(C * dv);
    for (std::size_t h = 0; h < s.Hv; ++h) {
        // Padded inputs of this head: q = k = v = 0, g = 0, beta = 0 past T.
        for (std::size_t t = 0; t < s.T; ++t) {
            detail::gdr_qk(s, q, ld_q, k, ld_k, t, h, l2norm_qk, &Q[t * dk], &K[t * dk]);
            for (std::size_t j = 0; j < dv; ++j) V[t * dv + j] = v[t * ld_v + h * dv + j];
            G[t] = g[t * s.Hv + h];
            Bt[t] = beta[t * s.Hv + h];
        }
        float* Sh = state + h * dk * dv;
        for (std::size_t i = 0; i < dk * dv; ++i) S[i] = Sh[i];
        for (std::size_t c = 0; c < n_chunks; ++c) {
            const std::size_t t0 = c * C;
            const double* Qc = &Q[t0 * dk];
            const double* Kc = &K[t0 * dk];
            const double* Vc = &V[t0 * dv];
            const double* bc = &Bt[t0];
            double acc = 0;
            for (std::size_t i = 0; i < C; ++i) gam[i] = acc += kernels::clamp_log_decay(G[t0 + i]);
            for (std::size_t i = 0; i < C; ++i) {
                eg[i] = std::exp(gam[i]);               // decay from the chunk start to i
                ew[i] = std::exp(gam[C - 1] - gam[i]);  // decay from i to the chunk end
            }
            auto dot_k = [&](const double* a, const double* b) {
                double r = 0;
                for (std::size_t m = 0; m < dk; ++m) r += a[m] * b[m];
                return r;
            };
            // A[i][j] = beta_i (k_i . k_j) exp(gam_i - gam_j), j < i
            for (std::size_t i = 0; i < C; ++i)
                for (std::size_t j = 0; j < C; ++j)
                    A[i * C + j] = j < i ? bc[i] * dot_k(&Kc[i * dk], &Kc[j * dk]) * std::exp(gam[i] - gam[j]) : 0.0;
            // Tm = (I + A)^-1, forward substitution row by row: Tm[i] = e_i - sum_{m<i} A[i][m] Tm[m]
            for (std::size_t i = 0; i < C; ++i) {
                for (std::size_t j = 0; j < C; ++j) Tm[i * C + j] = i == j ? 1.0 : 0.0;
                for (std::size_t m = 0; m < i; ++m)
                    for (std::size_t j = 0; j <= m; ++j) Tm[i * C + j] -= A[i * C + m] * Tm[m * C + j];
            }
            // U = Tm (beta V), W = Tm (beta e^gam K)
            for (std::size_t i = 0; i < C; ++i) {
                for (std::size_t j = 0; j < dv; ++j) {
                    double r = 0;
                    for (std::size_t m = 0; m < C; ++m) r += Tm[i * C + m] * bc[m] * Vc[m * dv + j];
                    U[i * dv + j] = r;
                }
                for (std::size_t j = 0; j < dk; ++j) {
                    double r = 0;
                    for (std::size_t m = 0; m < C; ++m) r += Tm[i * C + m] * bc[m] * eg[m] * Kc[m * dk + j];
                    W[i * dk + j] = r;
                }
            }
            // V_new = U - W S
            for (std::size_t i = 0; i < C; ++i)
                for (std::size_t j = 0; j < dv; ++j) {
                    double r = U[i * dv + j];
                    for (std::size_t m = 0; m < dk; ++m) r -= W[i * dk + m] * S[m * dv + j];
                    Vn[i * dv + j] = r;
                }
            // O = diag(e^gam) Q S + M V_new, M[i][j] = (q_i . k_j) exp(gam_i - gam_j), j <= i
            for (std::size_t i = 0; i < C && t0 + i < s.T; ++i) {
                float* orow = out + (t0 + i) * ld_o + h * dv;
                for (std::size_t m = 0; m <= i; ++m)  // row i of M (A's storage is free again)
                    A[i * C + m] = dot_k(&Qc[i * dk], &Kc[m * dk]) * std::exp(gam[i] - gam[m]);
                for (std::size_t j = 0; j < dv; ++j) {
                    double inter = 0;
                    for (std::size_t m = 0; m < dk; ++m) inter += Qc[i * dk + m] * S[m * dv + j];
                    double intra = 0;
                    for (std::size_t m = 0; m <= i; ++m) intra += A[i * C + m] * Vn[m * dv + j];
                    orow[j] = static_cast<float>(eg[i] * inter + intra);
                }
            }
            // S' = e^{gam_last} S + (diag(e^{gam_last - gam}) K)^T V_new
            for (std::size_t a = 0; a < dk; ++a)
                for (std::size_t j = 0; j < dv; ++j) {
                    double r = eg[C - 1] * S[a * dv + j];
                    for (std::size_t m = 0; m < C; ++m) r += ew[m] * Kc[m * dk + a] * Vn[m * dv + j];
                    S[a * dv + j] = r;
                }
        }
        for (std::size_t i = 0; i < dk * dv; ++i) Sh[i] = static_cast<float>(S[i]);
    }
}

/// The reference dispatch: always the token-by-token form.
inline void gated_delta_rule(const GatedDeltaShape& s, const float* q, std::size_t ld_q, const float* k,
                             std::size_t ld_k, const float* v, std::size_t ld_v, const float* g, const float* beta,
                             float* state, float* out, std::size_t ld_o, bool l2norm_qk) {
    reference::gated_delta_rule_recurrent(s, q, ld_q, k, ld_k, v, ld_v, g, beta, state, out, ld_o, l2norm_qk);
}

}  // namespace hylens::reference
