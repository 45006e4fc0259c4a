// The inner loops of the recurrent kernels (causal conv1d, the gated-delta-rule step, the SSD
// step), written once over the float-vector operations every level defines (vf, kW, vload,
// vstore, vset, vadd, vsub, vmul, vdiv, vmin, vmax, vneg, vshift_bits, vhsum) and compiled
// once per level: kernels/isa/recurrent.hpp includes this file inside each level's namespace with
// HYLENS_ISA_FN set to that level's function attributes (no include guard on purpose). The entry
// points (conv_block, conv_step, add_weighted_rows, gdr_read, gdr_update, ssd_rows) take the
// level's Tag first, so a call with the tag that isa::with_isa hands out finds the level's
// version by argument-dependent lookup.
//
// Per output element every level does the same operations in the same order (the vector width
// only decides which elements share an instruction), except the SSD row's dot product with C,
// whose reduction follows the vector width. A multiply-add is a multiply and then an add, never
// a fused FMA: the xsimd 8.1 code these loops replaced computed xsimd::fma that way (8.1 has no
// AVX-512 override of its generic x * y + z, and the project builds with -ffp-contract=off), so
// a -march=native build keeps its former results bit for bit (the SSD reduction follows xsimd's
// order at each width), and the gated delta rule and conv1d give the same bits at every level.

/// e^x lane by lane, within 2 ulp over the clamped range [-87.3, 88.3] (which keeps 2^n normal):
/// n = round(x log2 e) by the 1.5 * 2^23 rounding trick, r = x - n ln 2 in two parts (Cephes
/// constants), e^r by its degree-7 Taylor polynomial (|r| <= 0.35, truncation 5e-9), 2^n built in
/// the exponent bits. (A vectorised exp because a scalar expf per channel and token made silu 90 %
/// of a 512-token conv at 6144 channels; not xsimd::exp, whose AVX-512 path makes g++ 12 at -O1
/// raise a false -Wuninitialized, GCC bug 105593.) The same operations as the scalar exp_fast
/// conv1d.hpp had before it was dispatched, so the outputs are unchanged.
HYLENS_ISA_FN vf vexp_fast(vf x) noexcept {
    x = vmin(vset(88.3f), vmax(vset(-87.3f), x));  // std::min(std::max(x, -87.3f), 88.3f)
    const vf round = vset(12582912.0f);              // 1.5 * 2^23
    const vf t = vadd(vmul(x, vset(1.44269504f)), round);
    const vf n = vsub(t, round);
    const vf r = vadd(vsub(x, vmul(n, vset(0.693359375f))), vmul(n, vset(2.12194440e-4f)));
    vf p = vset(1.0f / 5040.0f);
    p = vadd(vmul(p, r), vset(1.0f / 720.0f));
    p = vadd(vmul(p, r), vset(1.0f / 120.0f));
    p = vadd(vmul(p, r), vset(1.0f / 24.0f));
    p = vadd(vmul(p, r), vset(1.0f / 6.0f));
    p = vadd(vmul(p, r), vset(0.5f));
    p = vadd(vmul(p, r), vset(1.0f));
    p = vadd(vmul(p, r), vset(1.0f));
    return vmul(p, vshift_bits(t, 0x4B400000u - 127u));  // 2^n from t's bits
}

/// v[i] <- e^(v[i] - shift) for i < n by vexp_fast, the last n % kW values in one vector padded
/// with zeros: every level computes each element with the same operations (the same bits at
/// every level). The softmax rows of attention (shift: the row's max).
HYLENS_ISA_FN void exp_shifted_inplace(Tag, float* v, float shift, std::size_t n) noexcept {
    const vf sv = vset(shift);
    std::size_t i = 0;
    for (; i + kW <= n; i += kW) vstore(v + i, vexp_fast(vsub(vload(v + i), sv)));
    if (i < n) {
        float lane[kW] = {};
        for (std::size_t j = 0; i + j < n; ++j) lane[j] = v[i + j] - shift;
        vstore(lane, vexp_fast(vload(lane)));
        for (std::size_t j = 0; i + j < n; ++j) v[i + j] = lane[j];
    }
}

/// v[i] <- e^v[i] for i < n: exp_shifted_inplace with no shift (x - 0 is x exactly, -0 and NaN
/// included). The in-chunk decays of the chunked SSD.
HYLENS_ISA_FN void exp_inplace(Tag tag, float* v, std::size_t n) noexcept { exp_shifted_inplace(tag, v, 0.0f, n); }

/// The largest of v[0], ..., v[n - 1] (n >= 1; exact, whatever the order).
HYLENS_ISA_FN float max_of(Tag, const float* v, std::size_t n) noexcept {
    float m = v[0];
    std::size_t i = 0;
    if (n >= kW) {
        vf acc = vload(v);
        for (i = kW; i + kW <= n; i += kW) acc = vmax(acc, vload(v + i));
        float lane[kW];
        vstore(lane, acc);
        for (std::size_t j = 0; j < kW; ++j) m = lane[j] > m ? lane[j] : m;
    }
    for (; i < n; ++i) m = v[i] > m ? v[i] : m;
    return m;
}

/// v[i] *= s for i < n (the last n % kW values one at a time).
HYLENS_ISA_FN void scale_inplace(Tag, float* v, float s, std::size_t n) noexcept {
    const vf sv = vset(s);
    std::size_t i = 0;
    for (; i + kW <= n; i += kW) vstore(v + i, vmul(vload(v + i), sv));
    for (; i < n; ++i) v[i] *= s;
}

/// v[i] *= w[i] for i < n (the last n % kW values one at a time).
HYLENS_ISA_FN void mul_inplace(Tag, float* v, const float* w, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + kW <= n; i += kW) vstore(v + i, vmul(vload(v + i), vload(w + i)));
    for (; i < n; ++i) v[i] *= w[i];
}

/// silu(y) = y / (1 + e^-y) lane by lane.
HYLENS_ISA_FN vf vsilu(vf y) noexcept { return vdiv(y, vadd(vset(1.0f), vexp_fast(vneg(y)))); }

/// out[i] = silu(mult * z[i]) * x[i] for i < n (out may alias z or x), the last n % kW values in
/// one vector padded with zeros: the same bits at every level. The SwiGLU gate, the Mamba-2
/// output gate and the gated RMSNorms (a scalar expf per value was 3-4 % of a Falcon-H1 prefill).
HYLENS_ISA_FN void silu_mul(Tag, const float* z, float mult, const float* x, float* out, std::size_t n) noexcept {
    const vf mv = vset(mult);
    std::size_t i = 0;
    for (; i + kW <= n; i += kW) vstore(out + i, vmul(vsilu(vmul(mv, vload(z + i))), vload(x + i)));
    if (i < n) {
        float zl[kW] = {}, xl[kW] = {};
        for (std::size_t j = 0; i + j < n; ++j) zl[j] = z[i + j], xl[j] = x[i + j];
        vstore(zl, vmul(vsilu(vmul(mv, vload(zl))), vload(xl)));
        for (std::size_t j = 0; i + j < n; ++j) out[i + j] = zl[j];
    }
}

/// One token's outputs of a conv1d block of nc channels: yr[c] = bias[c] + sum_k wT[k][c] row(k)[c]
/// accumulated k = 0, 1, ... (a multiply, then an add), then silu; row(k) is tap k's input row.
template <class Row>
HYLENS_ISA_FN void conv_token(const float* wT, Row row, std::size_t K, std::size_t nc, const float* bias, float* yr,
                              bool apply_silu) noexcept {
    std::size_t c = 0;
    for (; c + kW <= nc; c += kW) {
        vf acc = bias ? vload(bias + c) : vset(0.0f);
        for (std::size_t k = 0; k < K; ++k) acc = vadd(acc, vmul(vload(wT + k * nc + c), vload(row(k) + c)));
        vstore(yr + c, apply_silu ? vsilu(acc) : acc);
    }
    if (c < nc) {  // the last channels: summed one by one, then one vector's silu (unused lanes 0)
        float lane[kW] = {};
        for (std::size_t i = 0; c + i < nc; ++i) {
            float acc = bias ? bias[c + i] : 0.0f;
            for (std::size_t k = 0; k < K; ++k) acc += wT[k * nc + c + i] * row(k)[c + i];
            lane[i] = acc;
        }
        if (apply_silu) vstore(lane, vsilu(vload(lane)));
        for (std::size_t i = 0; c + i < nc; ++i) yr[c + i] = lane[i];
    }
}

/// One block of nc channels of causal_conv1d over T tokens (kernels/conv1d.hpp): wT and win are
/// the block's weights and window, tap-major (K rows of nc); row s of the extended sequence is
/// win + s*nc for s < K, else x + (s-K)*ldx + c0.
HYLENS_ISA_FN void conv_block(Tag, const float* wT, const float* win, const float* x, std::size_t ldx, std::size_t c0,
                              std::size_t T, std::size_t K, std::size_t nc, const float* bias, float* y,
                              std::size_t ldy, bool apply_silu) noexcept {
    auto ext = [&](std::size_t s) { return s < K ? win + s * nc : x + (s - K) * ldx + c0; };
    const float* b = bias ? bias + c0 : nullptr;
    constexpr std::size_t kMaxTaps = 16;  // the taps' rows of a token listed once, not looked up per vector
    const float* rows[kMaxTaps];
    for (std::size_t t = 0; t < T; ++t) {
        float* yr = y + t * ldy + c0;
        if (K <= kMaxTaps) {
            for (std::size_t k = 0; k < K; ++k) rows[k] = ext(t + 1 + k);
            conv_token(wT, [&](std::size_t k) { return rows[k]; }, K, nc, b, yr, apply_silu);
        } else {
            conv_token(wT, [&](std::size_t k) { return ext(t + 1 + k); }, K, nc, b, yr, apply_silu);
        }
    }
}

// conv_step's sums and shifts; KT > 0: the tap count known at compile time (K = 4, the conv width
// of every model family here, which lets the compiler keep a channel's window in registers).
template <std::size_t KT>
HYLENS_ISA_FN void conv_step_taps(const float* x, const float* weight, std::size_t K_any, std::size_t c0,
                                  std::size_t c1, const float* bias, float* state, float* yr) noexcept {
    const std::size_t K = KT > 0 ? KT : K_any;
    for (std::size_t c = c0; c < c1; ++c) {
        float* s = state + c * K;
        const float* w = weight + c * K;
        float acc = bias ? bias[c] : 0.0f;
        for (std::size_t k = 0; k + 1 < K; ++k) {
            acc += w[k] * s[k + 1];
            s[k] = s[k + 1];
        }
        acc += w[K - 1] * x[c];
        s[K - 1] = x[c];
        yr[c] = acc;
    }
}

/// One token of causal_conv1d for channels [c0, c1) (kernels/conv1d.hpp, the decode step):
/// yr[c] = bias[c] + sum_k weight[c][k] tap_k[c], accumulated k = 0, 1, ... (a multiply, then an
/// add) as conv_token does, the taps being the window's last K - 1 values and x[c]; the window
/// (state, (C, K)) shifted by one in place, then silu in vectors. The same operations per channel
/// as conv_block's, so the same bits, without its transposes into tap-major blocks (those were
/// four fifths of a decode step's conv: 8 us for 1,792 channels, now 1.3).
HYLENS_ISA_FN void conv_step(Tag, const float* x, const float* weight, std::size_t K, std::size_t c0, std::size_t c1,
                             const float* bias, float* state, float* yr, bool apply_silu) noexcept {
    if (K == 4)
        conv_step_taps<4>(x, weight, K, c0, c1, bias, state, yr);
    else
        conv_step_taps<0>(x, weight, K, c0, c1, bias, state, yr);
    if (!apply_silu) return;
    std::size_t c = c0;
    for (; c + kW <= c1; c += kW) vstore(yr + c, vsilu(vload(yr + c)));
    if (c < c1) {
        float lane[kW] = {};
        for (std::size_t i = 0; c + i < c1; ++i) lane[i] = yr[c + i];
        vstore(lane, vsilu(vload(lane)));
        for (std::size_t i = 0; c + i < c1; ++i) yr[c + i] = lane[i];
    }
}

/// out[d] += sum_t p[t] V[t*ldv + d] for d < hd, t < n, accumulated t = 0, 1, ... onto out's
/// values (a multiply, then an add): attention's P V for one query row (kernels/attention.hpp,
/// the decode step). Every level does the same operations per element (the vector width only
/// decides which share an instruction): the same bits at every level.
HYLENS_ISA_FN void add_weighted_rows(Tag, const float* p, std::size_t n, const float* V, std::size_t ldv,
                                     std::size_t hd, float* out) noexcept {
    constexpr std::size_t NB = 8;  // accumulators held in registers over the n rows
    std::size_t d = 0;
    for (; d + NB * kW <= hd; d += NB * kW) {
        vf acc[NB];
        for (std::size_t b = 0; b < NB; ++b) acc[b] = vload(out + d + b * kW);
        for (std::size_t t = 0; t < n; ++t) {
            const vf pv = vset(p[t]);
            const float* v = V + t * ldv + d;
            for (std::size_t b = 0; b < NB; ++b) acc[b] = vadd(acc[b], vmul(pv, vload(v + b * kW)));
        }
        for (std::size_t b = 0; b < NB; ++b) vstore(out + d + b * kW, acc[b]);
    }
    for (; d + kW <= hd; d += kW) {
        vf acc = vload(out + d);
        for (std::size_t t = 0; t < n; ++t) acc = vadd(acc, vmul(vset(p[t]), vload(V + t * ldv + d)));
        vstore(out + d, acc);
    }
    for (; d < hd; ++d) {
        float acc = out[d];
        for (std::size_t t = 0; t < n; ++t) acc += p[t] * V[t * ldv + d];
        out[d] = acc;
    }
}

/// Columns [j0, j0 + NB*kW) of e = S^T kn and p = S^T qn (S: dk x dv).
template <std::size_t NB>
HYLENS_ISA_FN void gdr_read_cols(const float* S, std::size_t dk, std::size_t dv, std::size_t j0, const float* kn,
                                 const float* qn, float* e, float* p) noexcept {
    vf ae[NB], ap[NB];
    for (std::size_t b = 0; b < NB; ++b) ae[b] = ap[b] = vset(0.0f);
    for (std::size_t i = 0; i < dk; ++i) {
        const float* row = S + i * dv + j0;
        const vf ki = vset(kn[i]), qi = vset(qn[i]);
        for (std::size_t b = 0; b < NB; ++b) {
            const vf sv = vload(row + b * kW);
            ae[b] = vadd(vmul(ki, sv), ae[b]);
            ap[b] = vadd(vmul(qi, sv), ap[b]);
        }
    }
    for (std::size_t b = 0; b < NB; ++b) {
        vstore(e + j0 + b * kW, ae[b]);
        vstore(p + j0 + b * kW, ap[b]);
    }
}

/// e = S^T kn and p = S^T qn over all dv columns: blocks of 4 vectors (4 independent chains per
/// operand hide the FMA latency), then single vectors, then a scalar tail.
HYLENS_ISA_FN void gdr_read(Tag, const float* S, std::size_t dk, std::size_t dv, const float* kn, const float* qn, float* e,
                            float* p) noexcept {
    std::size_t j0 = 0;
    for (; j0 + 4 * kW <= dv; j0 += 4 * kW) gdr_read_cols<4>(S, dk, dv, j0, kn, qn, e, p);
    for (; j0 + kW <= dv; j0 += kW) gdr_read_cols<1>(S, dk, dv, j0, kn, qn, e, p);
    for (std::size_t j = j0; j < dv; ++j) {
        float ej = 0, pj = 0;
        for (std::size_t i = 0; i < dk; ++i) {
            ej += kn[i] * S[i * dv + j];
            pj += qn[i] * S[i * dv + j];
        }
        e[j] = ej;
        p[j] = pj;
    }
}

/// Columns [j0, j0 + NB*kW) of S <- a S + kn u^T and, when Next, of e2 = S^T kn2, p2 = S^T qn2
/// read from the updated S in the same pass.
template <std::size_t NB, bool Next>
HYLENS_ISA_FN void gdr_update_cols(float* S, std::size_t dk, std::size_t dv, std::size_t j0, float a,
                                   const float* kn, const float* u, const float* kn2, const float* qn2, float* e2,
                                   float* p2) noexcept {
    vf ub[NB], ae[NB], ap[NB];
    for (std::size_t b = 0; b < NB; ++b) {
        ub[b] = vload(u + j0 + b * kW);
        ae[b] = ap[b] = vset(0.0f);
    }
    const vf av = vset(a);
    for (std::size_t i = 0; i < dk; ++i) {
        float* row = S + i * dv + j0;
        const vf ki = vset(kn[i]);
        for (std::size_t b = 0; b < NB; ++b) {
            const vf sv = vadd(vmul(ki, ub[b]), vmul(av, vload(row + b * kW)));
            vstore(row + b * kW, sv);
            if constexpr (Next) {
                ae[b] = vadd(vmul(vset(kn2[i]), sv), ae[b]);
                ap[b] = vadd(vmul(vset(qn2[i]), sv), ap[b]);
            }
        }
    }
    if constexpr (Next) {
        for (std::size_t b = 0; b < NB; ++b) {
            vstore(e2 + j0 + b * kW, ae[b]);
            vstore(p2 + j0 + b * kW, ap[b]);
        }
    }
}

/// S <- a S + kn u^T over all dv columns; when next, also e2 = S^T kn2 and p2 = S^T qn2 of the
/// updated S (the next token's reads) in the same pass.
template <bool Next>
HYLENS_ISA_FN void gdr_update_all(float* S, std::size_t dk, std::size_t dv, float a, const float* kn, const float* u,
                                  const float* kn2, const float* qn2, float* e2, float* p2) noexcept {
    std::size_t j0 = 0;
    for (; j0 + 4 * kW <= dv; j0 += 4 * kW) gdr_update_cols<4, Next>(S, dk, dv, j0, a, kn, u, kn2, qn2, e2, p2);
    for (; j0 + kW <= dv; j0 += kW) gdr_update_cols<1, Next>(S, dk, dv, j0, a, kn, u, kn2, qn2, e2, p2);
    for (std::size_t j = j0; j < dv; ++j) {
        float ej = 0, pj = 0;
        for (std::size_t i = 0; i < dk; ++i) {
            float& sij = S[i * dv + j];
            sij = a * sij + kn[i] * u[j];
            if constexpr (Next) {
                ej += kn2[i] * sij;
                pj += qn2[i] * sij;
            }
        }
        if constexpr (Next) {
            e2[j] = ej;
            p2[j] = pj;
        }
    }
}

HYLENS_ISA_FN void gdr_update(Tag, float* S, std::size_t dk, std::size_t dv, float a, const float* kn, const float* u,
                              const float* kn2, const float* qn2, float* e2, float* p2, bool next) noexcept {
    if (next)
        gdr_update_all<true>(S, dk, dv, a, kn, u, kn2, qn2, e2, p2);
    else
        gdr_update_all<false>(S, dk, dv, a, kn, u, nullptr, nullptr, nullptr, nullptr);
}

/// One SSD state row: row <- a row + dx B, returns the updated row . C (two accumulator chains
/// of 2*kW values a pass, reduced with vhsum, then a scalar tail).
HYLENS_ISA_FN float ssd_row(float* row, std::size_t N, float a, float dx, const float* B, const float* C) noexcept {
    const vf av = vset(a), dxv = vset(dx);
    vf acc0 = vset(0.0f), acc1 = vset(0.0f);
    std::size_t n = 0;
    for (; n + 2 * kW <= N; n += 2 * kW) {
        const vf s0 = vadd(vmul(dxv, vload(B + n)), vmul(av, vload(row + n)));
        const vf s1 = vadd(vmul(dxv, vload(B + n + kW)), vmul(av, vload(row + n + kW)));
        vstore(row + n, s0);
        vstore(row + n + kW, s1);
        acc0 = vadd(vmul(s0, vload(C + n)), acc0);
        acc1 = vadd(vmul(s1, vload(C + n + kW)), acc1);
    }
    float acc = vhsum(vadd(acc0, acc1));
    for (; n < N; ++n) {
        row[n] = a * row[n] + dx * B[n];
        acc += row[n] * C[n];
    }
    return acc;
}

/// One token of one SSD head: yr[p] = (S[p] <- a S[p] + dt x[p] B) . C + d x[p] for the P rows.
HYLENS_ISA_FN void ssd_rows(Tag, float* S, std::size_t P, std::size_t N, float a, float dt, const float* xr,
                            const float* B, const float* C, float d, float* yr) noexcept {
    for (std::size_t p = 0; p < P; ++p) yr[p] = ssd_row(S + p * N, N, a, dt * xr[p], B, C) + d * xr[p];
}
