#pragma once
// The avx512bf16 level's own kernels (core/simd.hpp): products of bf16-rounded activations with
// bf16 weights on VDPBF16PS, for the opt-in arithmetic of core/precision.hpp. VDPBF16PS adds
// to each float32 lane the two products of a pair of adjacent bf16 elements (exact in float32),
// treating bf16 denormals as zero. Everything else at this level runs the avx512 code.
//   round     float32 -> bf16 (VCVTNEPS2BF16: to nearest even, denormals to zero)
//   dot/dot4  the decode step's dot products (kernels/matvec.hpp), bf16 x against bf16 rows
//   gemm_rows the prefill product, C = alpha A W^T over a range of W's rows: W packed 32 rows at
//             a time into pairs, an 8 x 32 register tile of float32 sums per step
// Same rule as isa/avx512.hpp: only the masked or zero-masked forms of intrinsics whose plain
// forms fill with _mm*_undefined_*() (GCC bug 105593 under -Werror).

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint32_t
#include <cstring>    // std::memcpy

#include "../../core/bf16.hpp"
#include "../../core/simd.hpp"
#include "avx512.hpp"
#include "row_prefetch.hpp"

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx512bf16 {

// (GCC's bf16 vector types convert to and from the integer vectors of their size by a cast.)
HYLENS_TARGET_AVX512BF16 inline __m512bh as_bh(__m512i v) noexcept { return (__m512bh)v; }
HYLENS_TARGET_AVX512BF16 inline __m256i as_si(__m256bh v) noexcept { return (__m256i)v; }
HYLENS_TARGET_AVX512BF16 inline __m512i load32(const bf16* p) noexcept { return _mm512_loadu_si512(p); }
HYLENS_TARGET_AVX512BF16 inline __m512i load32_masked(const bf16* p, __mmask32 k) noexcept {
    return _mm512_maskz_loadu_epi16(k, p);
}
inline __mmask32 tail_mask32(std::size_t r) noexcept {
    return r >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((std::uint32_t{1} << r) - 1u);
}

/// dst[i] = bf16(src[i]) for n values.
HYLENS_TARGET_AVX512BF16 inline void round(const float* src, bf16* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), as_si(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i))));
    if (i < n) {
        const __mmask16 k = avx512::tail_mask(n - i);
        _mm256_mask_storeu_epi16(dst + i, k, as_si(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(k, src + i))));
    }
}

HYLENS_TARGET_AVX512BF16 inline __m512 dp(__m512 acc, __m512i a, __m512i b) noexcept {
    return _mm512_dpbf16_ps(acc, as_bh(a), as_bh(b));
}

/// sum_i x[i] * w[i], both bf16.
HYLENS_TARGET_AVX512BF16 inline float dot(const bf16* x, const bf16* w, std::size_t n) noexcept {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = dp(a0, load32(x + i), load32(w + i));
        a1 = dp(a1, load32(x + i + 32), load32(w + i + 32));
    }
    for (; i + 32 <= n; i += 32) a0 = dp(a0, load32(x + i), load32(w + i));
    if (i < n) {
        const __mmask32 k = tail_mask32(n - i);
        a1 = dp(a1, load32_masked(x + i, k), load32_masked(w + i, k));
    }
    return avx512::hsum(a0, a1);
}

// The four rows' sums from element i (a multiple of 64) on, the way dot4 runs them after its
// aligned-read loop: acc[j][0] takes the first 32 values of each 64 and the last 32 before the
// tail, acc[j][1] the second 32 and the masked tail.
HYLENS_TARGET_AVX512BF16 inline void dot4_from(const bf16* x, const bf16* w, std::size_t n, std::size_t rs,
                                               std::size_t i, __m512 (&acc)[4][2]) noexcept {
    for (; i + 64 <= n; i += 64) {
        const __m512i x0 = load32(x + i), x1 = load32(x + i + 32);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) {
            prefetch_row_ahead(w + j * rs + i);  // 64 values: two lines (row_prefetch.hpp)
            prefetch_row_ahead(w + j * rs + i + 32);
            acc[j][0] = dp(acc[j][0], x0, load32(w + j * rs + i));
            acc[j][1] = dp(acc[j][1], x1, load32(w + j * rs + i + 32));
        }
    }
    for (; i + 32 <= n; i += 32) {
        const __m512i x0 = load32(x + i);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) acc[j][0] = dp(acc[j][0], x0, load32(w + j * rs + i));
    }
    if (i < n) {
        const __mmask32 k = tail_mask32(n - i);
        const __m512i x0 = load32_masked(x + i, k);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) acc[j][1] = dp(acc[j][1], x0, load32_masked(w + j * rs + i, k));
    }
}

/// out[j] = sum_i x[i] * w[j * rs + i] for the four rows j < 4, x and w bf16. Rows that do not
/// start on a cache line (the rule of isa/avx512.hpp's dot4) are read in aligned 64-byte
/// vectors, each vector of 32 values built from the two around it (VPERMT2W): the same vectors
/// as unaligned loads, so the same bits.
HYLENS_TARGET_AVX512BF16 inline void dot4(const bf16* x, const bf16* w, std::size_t n, std::size_t rs,
                                          float* out) noexcept {
    __m512 acc[4][2];
    for (auto& a : acc) a[0] = a[1] = _mm512_setzero_ps();
    std::size_t i = 0;
    if (const std::size_t s = avx512::misalignment(w, rs, n, 96); s != 0) {
        // Word p of the vector at w + i is word s + p of the pair (aligned vector at w + i - s, the next).
        // (Dword j holds words 2j and 2j + 1.)
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i iota = _mm512_add_epi32(_mm512_add_epi32(even, _mm512_maskz_slli_epi32(0xFFFF, even, 16)),
                                              _mm512_set1_epi32(1 << 16));
        const __m512i idx = _mm512_add_epi16(iota, _mm512_set1_epi16(static_cast<short>(s)));
        const bf16* r[4] = {w - s, w + rs - s, w + 2 * rs - s, w + 3 * rs - s};
        __m512i lo[4];
        for (std::size_t j = 0; j < 4; ++j) lo[j] = _mm512_maskz_loadu_epi16(~__mmask32{0} << s, r[j]);
        for (; i + 96 <= n + s; i += 64) {  // the aligned vectors read end at w + i + 96 - s <= w + n
            const __m512i x0 = load32(x + i), x1 = load32(x + i + 32);
#pragma GCC unroll 4
            for (std::size_t j = 0; j < 4; ++j) {
                prefetch_row_ahead(r[j] + i + 32);
                prefetch_row_ahead(r[j] + i + 64);
                const __m512i mid = _mm512_load_si512(r[j] + i + 32), hi = _mm512_load_si512(r[j] + i + 64);
                acc[j][0] = dp(acc[j][0], x0, _mm512_permutex2var_epi16(lo[j], idx, mid));
                acc[j][1] = dp(acc[j][1], x1, _mm512_permutex2var_epi16(mid, idx, hi));
                lo[j] = hi;
            }
        }
    }
    dot4_from(x, w, n, rs, i, acc);
    avx512::hsum4(acc, out);
}

// ---- prefill: C = alpha A W^T ----------------------------------------------------------------

/// Columns of C (rows of W) per packed panel and rows of A per register tile.
inline constexpr std::size_t kPanel = 32, kTileRows = 8;

/// Words of the packing scratch gemm_rows needs for an inner dimension K.
inline constexpr std::size_t pack_words(std::size_t K) noexcept { return kPanel * ((K + 1) / 2); }

// Pairs [p0, p1) of the panel, one word at a time (the tails; rows past nc zero).
inline void pack_pairs_scalar(const bf16* W, std::size_t K, std::size_t n, std::size_t nc, std::size_t p0,
                              std::size_t p1, std::uint32_t* pack) noexcept {
    const std::size_t full = K / 2;
    for (std::size_t c = 0; c < kPanel; ++c) {
        const bf16* row = W + (n + c) * K;
        for (std::size_t p = p0; p < p1; ++p) {
            std::uint32_t v = 0;
            if (c < nc && p < full)
                std::memcpy(&v, row + 2 * p, sizeof v);
            else if (c < nc)
                v = row[K - 1].bits;  // the last pair of an odd K: its second element zero
            pack[p * kPanel + c] = v;
        }
    }
}

/// W rows [n, n + nc) (nc <= 32) as bf16 pairs: pack[p * 32 + c] holds elements 2p and 2p + 1
/// of row n + c (the second zero when K is odd), rows past nc zero. A full panel goes 16 rows x
/// 16 pairs at a time through transpose16; the pairs left and a partial panel word by word.
HYLENS_TARGET_AVX512BF16 inline void pack_panel(const bf16* W, std::size_t K, std::size_t n, std::size_t nc,
                                                std::uint32_t* pack) noexcept {
    const std::size_t pairs = (K + 1) / 2, full = K / 2;
    std::size_t p0 = 0;
    if (nc == kPanel)
        for (; p0 + 16 <= full; p0 += 16)
            for (std::size_t c0 = 0; c0 < kPanel; c0 += 16) {
                __m512i r[16];
                for (std::size_t i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(W + (n + c0 + i) * K + 2 * p0);
                avx512::transpose16(r);
                for (std::size_t j = 0; j < 16; ++j) _mm512_storeu_si512(pack + (p0 + j) * kPanel + c0, r[j]);
            }
    pack_pairs_scalar(W, K, n, nc, p0, pairs, pack);
}

/// R rows of A (bf16 pairs, row stride lda elements, even) times the packed panel: C[r, c] =
/// alpha * sum_p pair_p(A_r) . pair_p(W_c) for c < nc (masked stores).
template <std::size_t R>
HYLENS_TARGET_AVX512BF16 inline void tile(const bf16* A, std::size_t lda, const std::uint32_t* pack,
                                          std::size_t pairs, float* C, std::size_t ldc, std::size_t nc,
                                          float alpha) noexcept {
    __m512 acc[R][2];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (std::size_t p = 0; p < pairs; ++p) {
        const __m512i w0 = _mm512_loadu_si512(pack + p * kPanel), w1 = _mm512_loadu_si512(pack + p * kPanel + 16);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) {
            std::uint32_t a;
            std::memcpy(&a, A + r * lda + 2 * p, sizeof a);
            const __m512i b = _mm512_set1_epi32(static_cast<int>(a));
            acc[r][0] = dp(acc[r][0], b, w0);
            acc[r][1] = dp(acc[r][1], b, w1);
        }
    }
    avx512::store_tile<R>(acc, C, ldc, nc, alpha);
}

/// C[m, n] = alpha * sum_k A[m, k] * W[n, k] for m < M and n in [n0, n1): A is bf16 with row
/// stride lda (even, rows padded with a zero when K is odd), W bf16 [*, K] row-major, pack a
/// scratch of pack_words(K) words. Each element is one register lane summed over all of K in
/// the same order whatever the range and the row tile, so a split of W's rows over threads
/// gives the same bits.
HYLENS_TARGET_AVX512BF16 inline void gemm_rows(const bf16* A, std::size_t lda, std::size_t M, const bf16* W,
                                               std::size_t K, std::size_t n0, std::size_t n1, float* C,
                                               std::size_t ldc, float alpha, std::uint32_t* pack) noexcept {
    const std::size_t pairs = (K + 1) / 2;
    for (std::size_t n = n0; n < n1; n += kPanel) {
        const std::size_t nc = std::min(kPanel, n1 - n);
        pack_panel(W, K, n, nc, pack);
        std::size_t m = 0;
        for (; m + kTileRows <= M; m += kTileRows) tile<kTileRows>(A + m * lda, lda, pack, pairs, C + m * ldc + n, ldc, nc, alpha);
        const bf16* a = A + m * lda;
        float* c = C + m * ldc + n;
        switch (M - m) {
            case 7: tile<7>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            case 6: tile<6>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            case 5: tile<5>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            case 4: tile<4>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            case 3: tile<3>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            case 2: tile<2>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            case 1: tile<1>(a, lda, pack, pairs, c, ldc, nc, alpha); break;
            default: break;
        }
    }
}

}  // namespace hylens::kernels::isa::avx512bf16
#endif
