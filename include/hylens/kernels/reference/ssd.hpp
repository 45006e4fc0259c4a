#pragma once
// Plain twin of kernels/ssd.hpp: the Mamba-2 SSD scan (families.md §2) written as the
// equations read, in double precision internally, as the oracle of the fast kernels.
//   Delta = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max),  a = Delta * A  (A < 0)
//   recurrent (§2.2, mamba_ssm selective_state_update): h <- e^a h + Delta x B^T;  y = h C + D x
//   chunked (§2.3, mamba_ssm ssd_minimal_discrete): zero-padded chunks of Q tokens, intra-chunk
//     Y_diag from the segment sums, inter-chunk state passing, Y_off = e^{Acum} S_in C.

#include <cmath>    // std::exp
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "../recurrent_common.hpp"

namespace hylens::reference {

using kernels::SsdShape;

/// Token-by-token SSD (§2.2). Shapes as kernels::ssd_recurrent.
inline void ssd_recurrent(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                          std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                          const float* A, const float* D, float dt_min, float dt_max, float* state, float* y,
                          std::size_t ld_y, float* dt_out) {
    kernels::detail::check_ssd_args("reference::ssd_recurrent", s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A,
                                    dt_min, dt_max, state, y, ld_y);
    const std::size_t P = s.P, N = s.N, per_group = s.H / s.G;
    std::vector<double> S(P * N);  // (P, N)
    for (std::size_t h = 0; h < s.H; ++h) {
        const std::size_t grp = h / per_group;
        float* Sh = state + h * P * N;
        for (std::size_t i = 0; i < P * N; ++i) S[i] = Sh[i];
        for (std::size_t t = 0; t < s.T; ++t) {
            const float dt = kernels::ssd_time_step(dt_raw[t * ld_dt + h], dt_bias[h], dt_min, dt_max);
            if (dt_out) dt_out[t * s.H + h] = dt;
            const double decay = std::exp(double(dt) * A[h]);
            const float* xr = x + t * ld_x + h * P;
            const float* Br = B + t * ld_bc + grp * N;
            const float* Cr = C + t * ld_bc + grp * N;
            for (std::size_t p = 0; p < P; ++p) {
                double acc = 0;
                for (std::size_t n = 0; n < N; ++n) {
                    double& e = S[p * N + n];
                    e = decay * e + double(dt) * xr[p] * Br[n];
                    acc += e * Cr[n];
                }
                y[t * ld_y + h * P + p] = static_cast<float>(acc + (D ? double(D[h]) * xr[p] : 0.0));
            }
        }
        for (std::size_t i = 0; i < P * N; ++i) Sh[i] = static_cast<float>(S[i]);
    }
}

/// Chunked SSD (§2.3), the padded algorithm verbatim, with exp(Acum_l - Acum_s) taken from the
/// segment sum sum_{m=s+1..l} a_m. Same results as the recurrent form for any T and chunk >= 1.
inline void ssd_chunked(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                        std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias,
                        const float* A, const float* D, float dt_min, float dt_max, float* state, float* y,
                        std::size_t ld_y, float* dt_out, std::size_t chunk = 64) {
    const char* op = "reference::ssd_chunked";
    kernels::detail::check_ssd_args(op, s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, dt_min, dt_max, state,
                                    y, ld_y);
    check<ShapeError>(chunk >= 1, "[", op, "] expected chunk >= 1, got ", chunk);
    const std::size_t P = s.P, N = s.N, Q = chunk, per_group = s.H / s.G;
    const std::size_t n_chunks = (s.T + Q - 1) / Q;
    const std::size_t Tp = n_chunks * Q;
    std::vector<double> X(Tp * P), Bp(Tp * N), Cp(Tp * N), a(Tp), Sin(P * N), Sc(P * N), seg(Q * Q), wrow(Q), ew(Q);
    for (std::size_t h = 0; h < s.H; ++h) {
        const std::size_t grp = h / per_group;
        // Padded inputs: x~ = Delta x, a = Delta A; zero past T.
        for (std::size_t t = 0; t < Tp; ++t) {
            const bool live = t < s.T;
            const float dt = live ? kernels::ssd_time_step(dt_raw[t * ld_dt + h], dt_bias[h], dt_min, dt_max) : 0.f;
            if (live && dt_out) dt_out[t * s.H + h] = dt;
            a[t] = live ? kernels::clamp_log_decay(double(dt) * A[h]) : 0.0;  // (0 x -inf past T was NaN)
            for (std::size_t p = 0; p < P; ++p) X[t * P + p] = live ? double(dt) * x[t * ld_x + h * P + p] : 0.0;
            for (std::size_t n = 0; n < N; ++n) {
                Bp[t * N + n] = live ? B[t * ld_bc + grp * N + n] : 0.0;
                Cp[t * N + n] = live ? C[t * ld_bc + grp * N + n] : 0.0;
            }
        }
        float* Sh = state + h * P * N;
        for (std::size_t i = 0; i < P * N; ++i) Sin[i] = Sh[i];
        for (std::size_t c = 0; c < n_chunks; ++c) {
            const std::size_t t0 = c * Q;
            // seg[l][s] = sum_{m=s+1..l} a_m for s <= l: the log decay from s to l.
            for (std::size_t l = 0; l < Q; ++l) {
                double acc = 0;
                seg[l * Q + l] = 0;
                for (std::size_t sidx = l; sidx-- > 0;) seg[l * Q + sidx] = acc += a[t0 + sidx + 1];
            }
            for (std::size_t l = 0; l < Q && t0 + l < s.T; ++l) {
                // Acum_l = sum_{m<=l} a_m = seg[l][0] + a_0
                const double acum_l = seg[l * Q + 0] + a[t0];
                for (std::size_t sidx = 0; sidx <= l; ++sidx) {  // wrow[s] = (C_l . B_s) exp(seg[l][s])
                    double cb = 0;
                    for (std::size_t n = 0; n < N; ++n) cb += Cp[(t0 + l) * N + n] * Bp[(t0 + sidx) * N + n];
                    wrow[sidx] = cb * std::exp(seg[l * Q + sidx]);
                }
                for (std::size_t p = 0; p < P; ++p) {
                    double diag = 0;
                    for (std::size_t sidx = 0; sidx <= l; ++sidx) diag += wrow[sidx] * X[(t0 + sidx) * P + p];
                    double off = 0;
                    for (std::size_t n = 0; n < N; ++n) off += Sin[p * N + n] * Cp[(t0 + l) * N + n];
                    const double xd = D ? double(D[h]) * x[(t0 + l) * ld_x + h * P + p] : 0.0;
                    y[(t0 + l) * ld_y + h * P + p] = static_cast<float>(diag + std::exp(acum_l) * off + xd);
                }
            }
            // S_in(c+1) = exp(Acum_last) S_in(c) + sum_s exp(Acum_last - Acum_s) x~_s B_s^T
            const double acum_last = seg[(Q - 1) * Q + 0] + a[t0];
            for (std::size_t sidx = 0; sidx < Q; ++sidx) ew[sidx] = std::exp(seg[(Q - 1) * Q + sidx]);
            for (std::size_t p = 0; p < P; ++p)
                for (std::size_t n = 0; n < N; ++n) {
                    double r = std::exp(acum_last) * Sin[p * N + n];
                    for (std::size_t sidx = 0; sidx < Q; ++sidx)
                        r += ew[sidx] * X[(t0 + sidx) * P + p] * Bp[(t0 + sidx) * N + n];
                    Sc[p * N + n] = r;
                }
            Sin.swap(Sc);
        }
        for (std::size_t i = 0; i < P * N; ++i) Sh[i] = static_cast<float>(Sin[i]);
    }
}

/// The reference dispatch: always the token-by-token form.
inline void ssd(const SsdShape& s, const float* x, std::size_t ld_x, const float* B, const float* C,
                std::size_t ld_bc, const float* dt_raw, std::size_t ld_dt, const float* dt_bias, const float* A,
                const float* D, float dt_min, float dt_max, float* state, float* y, std::size_t ld_y,
                float* dt_out) {
    reference::ssd_recurrent(s, x, ld_x, B, C, ld_bc, dt_raw, ld_dt, dt_bias, A, D, dt_min, dt_max, state, y, ld_y, dt_out);
}

}  // namespace hylens::reference
