#pragma once
// y = x W^T (+ bias): the projection of every layer. W is a Weight [out, in] (nn.Linear
// layout) held as float32 or bfloat16.
//  * few rows (M <= kMatvecMaxRows: decode): kernels/matvec.hpp, a dot-product kernel at the
//    run-time instruction-set level that reads W once (bf16 widened in registers), rows of W
//    split over the thread pool. Decode is bandwidth-bound: this reads every weight byte once.
//  * many rows (prefill) at simd levels avx2 and up: our own GEMM (kernels/gemm_nt.hpp: the
//    AVX-512 one at avx512 / avx512bf16, panels of 32 rows of W; the AVX2 one at avx2, panels of
//    16) over panels split over the pool in guided parts (detail::guided_parts: a quarter of
//    the panels a thread first, shrinking towards the end, so that a thread whose core the host
//    takes for a while is taken over, not waited for); a bf16 W is widened as each panel is
//    packed. OpenBLAS 0.3.21 runs its AVX2 kernels on CPUs it does not know (Zen 4 / 5), at
//    half the FMA width; the AVX-512 kernel measured 1.8x its sgemm at 1 thread on a Zen 5 core,
//    the AVX2 one 1.01-1.03x on a Zen 3 (docs/performance.md). The bits do not depend on the
//    thread count.
//  * few rows, float32 W, at levels avx2 and up (a short prompt: M <= 128, W at least 2 M rows,
//    the last panel of A mostly filled; detail::packed_a_gemm): A packed into panels of 16 rows
//    (avx2) or 32 (avx512) once, W's rows read in place, in groups of 6 or 12 split over the
//    pool (isa/avx2_gemm_packed_a.hpp, isa/avx512_gemm_packed_a.hpp): the W-packed GEMM reads
//    and packs all of W, about as long as 11 rows of A take to multiply at avx2, which dominated
//    the product of a few rows (in the models: prefills of 16 to 128 tokens 1.03-1.43x at avx2,
//    32 to 128 tokens 1.08-1.47x at avx512). The same bits as the W-packed GEMM.
//  * float32, many rows, at level baseline: sgemm over fixed column blocks of output columns
//    (blas::gemm, gemm_columns), split over the pool.
//  * bfloat16, many rows, at level baseline: blocks of W rows are widened into a per-thread scratch of at most
//    kBf16BlockRows x in floats and multiplied with sgemm; the widening costs in/2 bytes per
//    row against 2*M*in FLOPs, negligible once M >= 16. Each sgemm call repacks the M x in
//    activations, so small blocks repack them often (64-row blocks: 5-6 % slower than one call
//    on one thread, docs/performance.md), against which up to 16 blocks keep a many-core pool
//    busy: bf16_row_blocks makes blocks of at most 512 rows, of (nearly) equal size, at least
//    min(16, out / 64) of them, their number a multiple of 4 (with fixed 512-row blocks a
//    [3584 x 1024] weight made 7 blocks, 4 + 3 on 2 threads, and a [512 x 1024] one a single
//    block, the second thread idle). The blocks do not depend on the pool's size: OpenBLAS
//    rounds a column by how many its call covers, so blocks cut by the thread count made the
//    result depend on it.
//  * bfloat16 with precision::round_activations() (opt-in, core/precision.hpp): x rounded to
//    bf16 first. At simd level avx512bf16 the products run on VDPBF16PS: matvec with bf16 x, or
//    isa::avx512bf16::gemm_rows over panels of 32 rows of W split over the pool; at the other
//    levels the rounded values take the float32 paths above.

#include <algorithm>         // std::min, std::max
#include <cstddef>           // std::size_t
#include <cstdint>           // std::uint32_t
#include <initializer_list>  // std::initializer_list
#include <vector>            // std::vector

#include "../core/blas.hpp"
#include "../core/error.hpp"
#include "../core/precision.hpp"
#include "../core/thread_pool.hpp"
#include "../core/weight.hpp"
#include "gemm_nt.hpp"
#include "matvec.hpp"

namespace hylens::kernels {

/// Up to this many input rows, linear() uses matvec (one pass over W) instead of sgemm.
/// Why 4: the four-row block of W stays in L1 while the M inputs pass over it, so W is read
/// from memory once; past a few rows sgemm's register blocking wins (docs/performance.md).
inline constexpr std::size_t kMatvecMaxRows = 4;

/// Most rows of W one bf16 sgemm block widens at a time (the scratch is this many rows).
inline constexpr std::size_t kBf16BlockRows = 512;

/// How the bf16 sgemm path cuts the `out` rows of W into blocks, whatever the pool's size: count
/// blocks, the smallest multiple of kBf16BlockShares that keeps every block within
/// kBf16BlockRows rows and makes up to 16 blocks of at least 64 rows (fewer only when that
/// would leave fewer than 16 rows a block); block b is
/// the rows [begin(b), begin(b + 1)), its start a multiple of 16 (whole sgemm panels), so the
/// blocks differ by less than 32 rows and a pool of 1, 2 or 4 threads gets equal counts.
struct RowBlocks {
    static constexpr std::size_t kAlign = 16;
    std::size_t out, count;
    std::size_t begin(std::size_t b) const noexcept { return b >= count ? out : b * out / count / kAlign * kAlign; }
};
inline constexpr std::size_t kBf16BlockShares = 4;
inline RowBlocks bf16_row_blocks(std::size_t out) noexcept {
    constexpr std::size_t kA = RowBlocks::kAlign, per = kBf16BlockRows - kA;  // + kA: the aligned starts
    constexpr std::size_t shares = kBf16BlockShares;
    std::size_t count = (out + per - 1) / per;
    count = std::max(count, std::min<std::size_t>(16, out / 64));  // up to 16 blocks of >= 64 rows: many cores busy
    count = (count + shares - 1) / shares * shares;
    count = std::min(count, std::max<std::size_t>(out / kA, 1));  // >= 16 rows a block: none empty
    return {out, count};
}

namespace detail {
inline void check_linear_shape(const Weight& W, std::size_t ldx, std::size_t ldy) {
    // Not check(): its arguments are evaluated before the test, and this runs on every projection
    // of a decode step (shape_string builds a string each time: 0.1 % of a Falcon-H1 decode).
    if (W.rank() != 2) fail<ShapeError>("[linear] weight ", W.name(), " must be 2-D, got ", shape_string(W.shape()));
    check<ShapeError>(ldx >= W.cols() && ldy >= W.rows(), "[linear] ", W.name(), ": row strides ", ldx, "/", ldy,
                      " too small for [", W.rows(), ", ", W.cols(), "]");
}
inline MatvecUnits units_of(const Weight& W, std::size_t M) {
    return MatvecUnits(M, W.cols() * (W.is_bf16() ? sizeof(bf16) : sizeof(float)));
}

#if HYLENS_SIMD_X86
// y = alpha x W^T for a float32 W with A packed (PackedA: isa::avx2::PackedA or
// isa::avx512::PackedA): A's panels packed once (in parallel), then W's row groups split over
// the pool in guided parts, each thread reading the caller's packed A (its pointer: `packed` is
// thread_local).
template <class PackedA>
void packed_a_products(const float* x, std::size_t ldx, std::size_t M, const Weight& W, float* y, std::size_t ldy,
                       float alpha) {
    const std::size_t out = W.rows(), in = W.cols(), G = PackedA::kWRows;
    thread_local std::vector<float> packed;
    if (packed.size() < PackedA::floats(M, in)) packed.resize(PackedA::floats(M, in));
    float* const pa = packed.data();
    parallel_for(PackedA::panels(M), [&](std::size_t p0, std::size_t p1) { PackedA::pack(x, ldx, M, in, p0, p1, pa); });
    parallel_for_guided((out + G - 1) / G, 1, [&](std::size_t g0, std::size_t g1) {
        PackedA::rows(pa, M, in, W.f32(), in, g0 * G, std::min(out, g1 * G), y, ldy, alpha);
    });
}
#endif

// y = alpha x W^T without the bias, x as given (linear() without rounding).
inline void products(const float* x, std::size_t ldx, std::size_t M, const Weight& W, float* y, std::size_t ldy,
                     float alpha) {
    const std::size_t out = W.rows(), in = W.cols();
    if (M <= kMatvecMaxRows) {
        if (W.is_bf16())
            matvec(x, ldx, M, W.bf16_data(), out, in, y, ldy, alpha);
        else
            matvec(x, ldx, M, W.f32(), out, in, y, ldy, alpha);
    } else if (const simd::Level level = simd::active(); packed_a_gemm(level, M, out, W.is_bf16())) {
#if HYLENS_SIMD_X86
        if (simd::at_least(level, simd::Level::avx512))
            packed_a_products<isa::avx512::PackedA>(x, ldx, M, W, y, ldy, alpha);
        else
            packed_a_products<isa::avx2::PackedA>(x, ldx, M, W, y, ldy, alpha);
#endif
    } else if (own_gemm(level)) {
        const std::size_t panel = own_gemm_panel(level);
        parallel_for_guided((out + panel - 1) / panel, 1, [&](std::size_t p0, std::size_t p1) {
            thread_local std::vector<float> pack;
            if (pack.size() < gemm_nt_pack_floats(in)) pack.resize(gemm_nt_pack_floats(in));
            const std::size_t n0 = p0 * panel, n1 = std::min(out, p1 * panel);
            if (W.is_bf16())
                own_gemm_rows(level, x, ldx, M, W.bf16_data(), in, in, n0, n1, y, ldy, alpha, pack.data());
            else
                own_gemm_rows(level, x, ldx, M, W.f32(), in, in, n0, n1, y, ldy, alpha, pack.data());
        });
    } else if (!W.is_bf16()) {
        blas::gemm(false, true, M, out, in, alpha, x, ldx, W.f32(), in, 0.0f, y, ldy);
    } else {
        const RowBlocks blocks = bf16_row_blocks(out);
        parallel_for(blocks.count, [&](std::size_t b0, std::size_t b1) {
            thread_local std::vector<float> scratch;
            scratch.resize(kBf16BlockRows * in);
            for (std::size_t b = b0; b < b1; ++b) {
                const std::size_t r0 = blocks.begin(b);
                const std::size_t nr = blocks.begin(b + 1) - r0;
                widen_bf16(W.bf16_data() + r0 * in, scratch.data(), nr * in);
                blas::gemm_serial(false, true, M, nr, in, alpha, x, ldx, scratch.data(), in, 0.0f, y + r0, ldy);
            }
        });
    }
}

// The M rows of x (the first `in` values of each) rounded to bf16 as precision::round_activation
// does, in the calling thread's scratch (grown, never shrunk: no allocation once warm). At level
// avx512bf16 as bf16 (xb: rows of ld = in rounded up to even, the pad a zero: whole pairs for
// VDPBF16PS); at the others as the rounded values in float32 (xf, ld = in) for the float32
// kernels, which then multiply exactly as VDPBF16PS does (a product of two bf16 values is exact
// in float32).
struct RoundedInput {
    const float* xf = nullptr;
    const bf16* xb = nullptr;
    std::size_t ld = 0;
};
inline RoundedInput round_input(const float* x, std::size_t ldx, std::size_t M, std::size_t in, simd::Level level) {
#if HYLENS_SIMD_X86
    if (level == simd::Level::avx512bf16) {
        thread_local std::vector<bf16> xb;
        const std::size_t ld = in + (in & 1);
        if (xb.size() < M * ld) xb.resize(M * ld);
        for (std::size_t m = 0; m < M; ++m) {
            isa::avx512bf16::round(x + m * ldx, xb.data() + m * ld, in);
            if (ld > in) xb[m * ld + in] = bf16{};
        }
        return {nullptr, xb.data(), ld};
    }
#endif
    (void)level;
    thread_local std::vector<float> xf;
    if (xf.size() < M * in) xf.resize(M * in);
    for (std::size_t m = 0; m < M; ++m)
        for (std::size_t i = 0; i < in; ++i) xf[m * in + i] = to_f32(precision::round_activation(x[m * ldx + i]));
    return {xf.data(), nullptr, in};
}

// y = alpha round(x) W^T for a bf16 W, without the bias (linear() with precision::round_activations()).
inline void products_rounded(const float* x, std::size_t ldx, std::size_t M, const Weight& W, float* y,
                             std::size_t ldy, float alpha) {
    const std::size_t in = W.cols();
    const RoundedInput r = round_input(x, ldx, M, in, simd::active());
    if (r.xf) return products(r.xf, r.ld, M, W, y, ldy, alpha);
#if HYLENS_SIMD_X86
    const std::size_t out = W.rows();
    if (M <= kMatvecMaxRows) return matvec(r.xb, r.ld, M, W.bf16_data(), out, in, y, ldy, alpha);
    namespace bf = isa::avx512bf16;
    parallel_for((out + bf::kPanel - 1) / bf::kPanel, [&](std::size_t p0, std::size_t p1) {
        thread_local std::vector<std::uint32_t> pack;
        if (pack.size() < bf::pack_words(in)) pack.resize(bf::pack_words(in));
        bf::gemm_rows(r.xb, r.ld, M, W.bf16_data(), in, p0 * bf::kPanel, std::min(out, p1 * bf::kPanel), y, ldy,
                      alpha, pack.data());
    });
#endif
}
}  // namespace detail

/// y[m, o] = alpha * sum_i x[m, i] * W[o, i] (+ bias[o]) for m < M. Row strides ldx, ldy.
/// y must not alias x. For a bf16 W with precision::round_activations(), x[m, i] rounded to bf16.
inline void linear(const float* x, std::size_t ldx, std::size_t M, const Weight& W, const float* bias, float* y,
                   std::size_t ldy, float alpha = 1.0f) {
    const std::size_t out = W.rows();
    detail::check_linear_shape(W, ldx, ldy);
    if (M == 0) return;
    if (W.is_bf16() && precision::round_activations())
        detail::products_rounded(x, ldx, M, W, y, ldy, alpha);
    else
        detail::products(x, ldx, M, W, y, ldy, alpha);
    if (bias) {
        for (std::size_t m = 0; m < M; ++m)
            for (std::size_t o = 0; o < out; ++o) y[m * ldy + o] += bias[o];
    }
}

/// One projection of a group that reads the same input (linear_group): y = x W^T (+ bias),
/// row stride ldy.
struct Projection {
    const Weight& W;
    const float* bias;
    float* y;
    std::size_t ldy;
};

/// y_j[m, o] = alpha * sum_i x[m, i] * W_j[o, i] (+ bias_j[o]) for every projection j of a group
/// reading the same x (attention's q, k, v; the gate and up of an MLP). Bitwise the result of
/// one linear() per projection; with M <= kMatvecMaxRows (decode) the rows of all of them are
/// split over the pool in one parallel region instead of one region per projection.
inline void linear_group(const float* x, std::size_t ldx, std::size_t M, std::initializer_list<Projection> group,
                         float alpha = 1.0f) {
    if (M > kMatvecMaxRows) {
        for (const Projection& p : group) linear(x, ldx, M, p.W, p.bias, p.y, p.ldy, alpha);
        return;
    }
    // Each projection's rows in whole units of matvec passes (detail::MatvecUnits), the units of
    // all of them split over the pool in one region.
    std::size_t total = 0, grain = 1;
    for (const Projection& p : group) {
        detail::check_linear_shape(p.W, ldx, p.ldy);
        const detail::MatvecUnits u = detail::units_of(p.W, M);
        total += u.count(p.W.rows());
        grain = std::max(grain, u.grain);
    }
    if (M == 0) return;
    const simd::Level level = simd::active();
    // With precision::round_activations(), x rounded once for every bf16 member of the group.
    detail::RoundedInput rx;
    if (precision::round_activations()) {
        std::size_t in = 0;
        for (const Projection& p : group)
            if (p.W.is_bf16()) in = std::max(in, p.W.cols());
        if (in > 0) rx = detail::round_input(x, ldx, M, in, level);
    }
    detail::parallel_for_guided(
        total,
        grain,
        [&](std::size_t u0, std::size_t u1) {
            std::size_t first = 0;  // first unit of projection p
            for (const Projection& p : group) {
                const std::size_t rows = p.W.rows(), in = p.W.cols();
                const detail::MatvecUnits u = detail::units_of(p.W, M);
                const std::size_t n = u.count(rows);
                const std::size_t b = std::max(u0, first) - first, e = std::min(u1, first + n);
                if (first + b < e) {
                    const std::size_t r0 = u.row(b, rows), r1 = u.row(e - first, rows);
                    if (!p.W.is_bf16())
                        detail::matvec_rows(level, x, ldx, M, p.W.f32(), in, r0, r1, p.y, p.ldy, alpha);
                    else if (!rx.xb)
                        detail::matvec_rows(level, rx.xf ? rx.xf : x, rx.xf ? rx.ld : ldx, M, p.W.bf16_data(), in, r0,
                                            r1, p.y, p.ldy, alpha);
#if HYLENS_SIMD_X86
                    else  // bf16 activations: only at level avx512bf16
                        detail::matvec_rows(level, rx.xb, rx.ld, M, p.W.bf16_data(), in, r0, r1, p.y, p.ldy, alpha);
#endif
                }
                first += n;
            }
        });
    for (const Projection& p : group)
        if (p.bias)
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t o = 0; o < p.W.rows(); ++o) p.y[m * p.ldy + o] += p.bias[o];
}

/// One output row o of W times x (used for the unembedding of a single token and for
/// routers): returns sum_i x[i] * W[o, i].
inline float linear_row(const float* x, const Weight& W, std::size_t o) {
    const std::size_t in = W.cols();
    return W.is_bf16() ? dot(x, W.bf16_data() + o * in, in) : dot(x, W.f32() + o * in, in);
}

}  // namespace hylens::kernels
