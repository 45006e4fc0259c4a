#pragma once
// Causal grouped-query softmax attention over a KV cache (families.md §0.5).
// Query head h reads KV head h / (Hq / Hkv). The Tq new tokens are the last Tq of the Tk
// keys, so query t sees keys 0 .. Tk - Tq + t. Scores and softmax in float32.
// Prefill, per head and block of query rows: S = scale * Q_h K_j^T over the keys the block sees,
// row softmax, O_h = P V_j; at the avx512 levels both products on our AVX-512 GEMM (gemm_nt,
// V transposed), below on sgemm; heads run on the thread pool. Decode: the query heads of a KV
// head as one block, on matvec's kernel and isa add_weighted_rows (no BLAS). The probabilities
// can be returned (interpretability: attn_probs).

#include <algorithm>  // std::max, std::min, std::copy, std::fill
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include "../core/blas.hpp"
#include "../core/error.hpp"
#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
#include "gemm_nt.hpp"
#include "isa/recurrent.hpp"
#include "matvec.hpp"

namespace hylens::kernels {

struct AttentionShape {
    std::size_t Tq;   ///< new query tokens
    std::size_t Tk;   ///< keys visible to the last query (cached + new), Tk >= Tq
    std::size_t Hq;   ///< query heads
    std::size_t Hkv;  ///< key/value heads, Hq % Hkv == 0
    std::size_t hd;   ///< head dim
};

inline void check_attention_shape(const AttentionShape& s, std::size_t ld_q, std::size_t ld_o) {
    check<ShapeError>(s.Hq > 0 && s.Hkv > 0 && s.hd > 0 && s.Hq % s.Hkv == 0, "[attention] ", s.Hq,
                      " query heads cannot share ", s.Hkv, " KV heads");
    check<ShapeError>(s.Tk >= s.Tq, "[attention] ", s.Tk, " keys for ", s.Tq, " queries");
    check<ShapeError>(ld_q >= s.Hq * s.hd && ld_o >= s.Hq * s.hd, "[attention] row strides ", ld_q, "/", ld_o,
                      " smaller than Hq*hd = ", s.Hq * s.hd);
}

/// Softmax over the first `visible` entries of a row of n; the rest (future keys) set to 0. The
/// exponentials run on the vector exp of `tag`'s level (isa/recurrent_body.inl's
/// exp_shifted_inplace, within 2 ulp of e^x), the sum in key order at every level.
template <class IsaTag>
inline void softmax_row(IsaTag tag, float* row, std::size_t visible, std::size_t n) noexcept {
    if (visible > 0) {
        exp_shifted_inplace(tag, row, max_of(tag, row, visible), visible);
        float sum = 0.0f;
        for (std::size_t k = 0; k < visible; ++k) sum += row[k];
        scale_inplace(tag, row, 1.0f / sum, visible);
    }
    std::fill(row + visible, row + n, 0.0f);
}

/// Query rows per block of the prefill: a block's scores and values span only the keys its last
/// row sees, so the products skip the masked upper triangle (about half of a 512-token prompt's
/// attention arithmetic) in blocks fixed by the prompt, not by the thread count.
inline constexpr std::size_t kAttentionQueryBlock = 64;

/// Keys per product of the prefill's P V (the products of a block add up over blocks of keys):
/// bounds the packed panel of V, 32 x 1,024 floats.
inline constexpr std::size_t kAttentionKeyBlock = 1024;

/// q: token t head h at q + t*ld_q + h*hd. K, V: KV head j, key τ at K + j*ld_head + τ*hd.
/// out: token t head h at out + t*ld_o + h*hd. probs: nullptr or [Hq, Tq, Tk] (zeros above the diagonal).
inline void attention(const AttentionShape& s, const float* q, std::size_t ld_q, const float* K, const float* V,
                      std::size_t ld_head, float scale, float* out, std::size_t ld_o, float* probs = nullptr) {
    check_attention_shape(s, ld_q, ld_o);
    if (s.Tq == 0) return;
    const std::size_t rep = s.Hq / s.Hkv;
    const std::size_t offset = s.Tk - s.Tq;  // cached keys before the first query
    if (s.Tq == 1) {
        // Decode: the rep query heads of a KV group read K_j and V_j once (the step is bound by
        // reading the cache). Scores: matvec's rows (K_j's rows are the keys; its kernel takes
        // the rep queries over each four keys while they are in L1); P V: each query row's sums
        // over the keys in key order (isa add_weighted_rows), over blocks of kDecodeKeyBlock
        // keys so that a block of V stays in L1/L2 for the rep rows. No BLAS call: those were
        // most of a short context's step (OpenBLAS's set-up of two tiny products a group). The
        // scores are computed in probs when it is given (the layers pass a reused buffer even
        // when nobody wants the probabilities: no per-thread scratch to grow), else in a
        // per-thread scratch. Groups split over the pool only with at least 32,768 keys' and
        // values' floats a part.
        constexpr std::size_t kDecodeKeyBlock = 64;
        const simd::Level level = simd::active();
        parallel_for(
            s.Hkv,
            [&](std::size_t j0, std::size_t j1) {
                float* scratch = nullptr;
                if (!probs) {
                    thread_local std::vector<float> scores;
                    scores.resize(rep * s.Tk);
                    scratch = scores.data();
                }
                for (std::size_t j = j0; j < j1; ++j) {
                    const float* Kj = K + j * ld_head;
                    const float* Vj = V + j * ld_head;
                    float* sc = probs ? probs + j * rep * s.Tk : scratch;
                    float* oj = out + j * rep * s.hd;
                    detail::matvec_rows(level, q + j * rep * s.hd, s.hd, rep, Kj, s.hd, 0, s.Tk, sc, s.Tk, scale);
                    std::fill(oj, oj + rep * s.hd, 0.0f);
                    isa::with_isa(level, [&](auto tag) {
                        for (std::size_t r = 0; r < rep; ++r) softmax_row(tag, sc + r * s.Tk, s.Tk, s.Tk);
                        for (std::size_t t0 = 0; t0 < s.Tk; t0 += kDecodeKeyBlock) {
                            const std::size_t nt = std::min(kDecodeKeyBlock, s.Tk - t0);
                            for (std::size_t r = 0; r < rep; ++r)
                                add_weighted_rows(tag, sc + r * s.Tk + t0, nt, Vj + t0 * s.hd, s.hd, s.hd,
                                                  oj + r * s.hd);
                        }
                    });
                }
            },
            row_grain(2 * s.Tk * s.hd));
        return;
    }
    const simd::Level level = simd::active();
    const bool own = detail::own_gemm(level);
    parallel_for(s.Hq, [&](std::size_t h0, std::size_t h1) {
        // One block's scores at a time: kAttentionQueryBlock x Tk floats a thread (1 MiB at 4,096
        // keys), not Tq x Tk; on our GEMM, V of the KV head in use transposed, [hd, Tk], so that
        // both products take the keys' rows as the columns of their result (gemm_nt).
        thread_local std::vector<float> scores, vt, pack;
        scores.resize(std::min(kAttentionQueryBlock, s.Tq) * s.Tk);
        if (own) {
            vt.resize(s.hd * s.Tk);
            pack.resize(gemm_nt_pack_floats(std::max(s.hd, std::min(kAttentionKeyBlock, s.Tk))));
        }
        std::size_t vt_head = s.Hkv;  // the KV head vt holds (none yet)
        isa::with_isa(level, [&](auto tag) {
            for (std::size_t h = h0; h < h1; ++h) {
                const std::size_t j = h / rep;
                const float* Kj = K + j * ld_head;
                if (own && vt_head != j) {  // 16 keys at a time: each row of vt gets a cache line
                    const float* Vj = V + j * ld_head;
                    for (std::size_t k0 = 0; k0 < s.Tk; k0 += 16)
                        for (std::size_t d = 0; d < s.hd; ++d)
                            for (std::size_t k = k0; k < std::min(k0 + 16, s.Tk); ++k)
                                vt[d * s.Tk + k] = Vj[k * s.hd + d];
                    vt_head = j;
                }
                for (std::size_t t0 = 0; t0 < s.Tq; t0 += kAttentionQueryBlock) {
                    const std::size_t nt = std::min(kAttentionQueryBlock, s.Tq - t0);
                    const std::size_t nk = offset + t0 + nt;  // keys the block's last query sees
                    float* sc = scores.data();                // the block's nt rows, nk columns, stride Tk
                    // sc[nt, nk] = scale * Q_h [nt, hd] . K_j[0..nk]^T
                    gemm_nt(level, nt, nk, s.hd, scale, q + t0 * ld_q + h * s.hd, ld_q, Kj, s.hd, sc, s.Tk, false,
                            pack.data());
                    for (std::size_t t = 0; t < nt; ++t) softmax_row(tag, sc + t * s.Tk, offset + t0 + t + 1, nk);
                    // out_h [nt, hd] = P [nt, nk] . V_j[0..nk]: on our GEMM over blocks of keys
                    // of the transposed V, on sgemm with V as it is (the transposition made the
                    // sgemm levels 1-7 % slower)
                    float* oh = out + t0 * ld_o + h * s.hd;
                    if (own)
                        for (std::size_t k0 = 0; k0 < nk; k0 += kAttentionKeyBlock)
                            gemm_nt(level, nt, s.hd, std::min(kAttentionKeyBlock, nk - k0), 1.0f, sc + k0, s.Tk,
                                    vt.data() + k0, s.Tk, oh, ld_o, k0 > 0, pack.data());
                    else
                        blas::gemm_serial(false, false, nt, s.hd, nk, 1.0f, sc, s.Tk, V + j * ld_head, s.hd, 0.0f,
                                          oh, ld_o);
                    if (probs)
                        for (std::size_t t = 0; t < nt; ++t) {
                            float* dst = probs + (h * s.Tq + t0 + t) * s.Tk;
                            std::copy(sc + t * s.Tk, sc + t * s.Tk + nk, dst);
                            std::fill(dst + nk, dst + s.Tk, 0.0f);
                        }
                }
            }
        });
    });
}

}  // namespace hylens::kernels
