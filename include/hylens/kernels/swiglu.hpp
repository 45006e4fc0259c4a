#pragma once
// SwiGLU gating: out = silu(gate_mult * gate) * up (families.md §0.6, Falcon-H1's
// gate multiplier in §5.7), on the vector exp of the instruction-set level chosen at run time
// (isa/recurrent_body.inl's silu_mul: the same bits at every level).

#include <cstddef>  // std::size_t

#include "../core/simd.hpp"
#include "isa/recurrent.hpp"

namespace hylens::kernels {

/// out[i] = silu(gate_mult * gate[i]) * up[i]; out may alias gate or up.
inline void swiglu(const float* gate, const float* up, std::size_t n, float* out, float gate_mult = 1.0f) {
    isa::with_isa(simd::active(), [&](auto tag) { silu_mul(tag, gate, gate_mult, up, out, n); });
}

}  // namespace hylens::kernels
