#pragma once
// The recurrent kernels' inner loops (causal conv1d, the gated-delta-rule step, the SSD step) at
// every instruction-set level (core/simd.hpp): isa/recurrent_body.inl, written once over each
// level's float-vector operations (isa/{baseline,avx2,avx512}.hpp), is compiled here inside each
// level's namespace with that level's function attributes, and with_isa() calls a generic
// lambda with the tag of the level chosen at run time:
//   with_isa(simd::active(), [&](auto isa) { conv_block(isa, ...); });
// finds isa::<level>::conv_block by argument-dependent lookup.
//
// Why not xsimd (which these loops used before): xsimd 8.1 defines its AVX2 / AVX-512 batch
// types only under the matching compiler macros, so it cannot compile a wider variant inside a
// target-attributed function (docs/performance.md, "Instruction sets").

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t
#include <utility>  // std::forward

#include "../../core/simd.hpp"
#include "avx2.hpp"
#include "avx512.hpp"
#include "baseline.hpp"

namespace hylens::kernels::isa {

namespace baseline {
struct Tag {};
#define HYLENS_ISA_FN inline
#include "recurrent_body.inl"
#undef HYLENS_ISA_FN
}  // namespace baseline

#if HYLENS_SIMD_X86
namespace avx2 {
struct Tag {};
#define HYLENS_ISA_FN HYLENS_TARGET_AVX2 inline
#include "recurrent_body.inl"
#undef HYLENS_ISA_FN
}  // namespace avx2

namespace avx512 {
struct Tag {};
#define HYLENS_ISA_FN HYLENS_TARGET_AVX512 inline
#include "recurrent_body.inl"
#undef HYLENS_ISA_FN
}  // namespace avx512
#endif

/// f(tag) with the tag of `level` (isa::baseline::Tag, isa::avx2::Tag, isa::avx512::Tag; avx512bf16
/// runs the avx512 loops: the recurrences multiply no bf16 values).
template <class F>
decltype(auto) with_isa(simd::Level level, F&& f) {
    switch (simd::f32_level(level)) {
#if HYLENS_SIMD_X86
        case simd::Level::avx512: return std::forward<F>(f)(avx512::Tag{});
        case simd::Level::avx2: return std::forward<F>(f)(avx2::Tag{});
#endif
        default: return std::forward<F>(f)(baseline::Tag{});
    }
}

}  // namespace hylens::kernels::isa
