#pragma once
// SwiGLU gating: out = silu(gate_mult * gate) * up (architectures.md §0.6, Falcon-H1's
// gate multiplier in §5.7).

#include <cstddef>  // std::size_t

#include "activations.hpp"

namespace hylens::kernels {

/// out[i] = silu(gate_mult * gate[i]) * up[i]; out may alias gate or up.
inline void swiglu(const float* gate, const float* up, std::size_t n, float* out, float gate_mult = 1.0f) noexcept {
    for (std::size_t i = 0; i < n; ++i) out[i] = silu(gate_mult * gate[i]) * up[i];
}

}  // namespace hylens::kernels
