#pragma once
// Rotary position embedding, half-rotation ("rotate-half", NeoX) layout with partial rotation
// (families.md §0.4). Frequencies and angles are float32 exactly as Hugging Face computes
// them: f_j = 1 / theta^(float(2j)/float(R)), angle = float(p) * f_j (one float32 multiply);
// computing them in double shifts cos/sin by up to 1e-3 at large positions.

#include <algorithm>  // std::min
#include <cmath>    // std::pow, std::cos, std::sin
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <span>     // std::span
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "workspace.hpp"

namespace hylens::kernels {

struct Rope {
    std::size_t rot_dim = 0;  ///< R: leading dims of each head that rotate (even); 0 disables RoPE
    float theta = 10000.0f;

    /// Inverse frequencies f_j, j < R/2, in float32.
    std::vector<float> inv_freq() const {
        std::vector<float> f(rot_dim / 2);
        inv_freq_into(f.data());
        return f;
    }
    /// The same into f[0 .. R/2).
    void inv_freq_into(float* f) const noexcept {
        for (std::size_t j = 0; j < rot_dim / 2; ++j) {
            const float e = static_cast<float>(2 * j) / static_cast<float>(rot_dim);
            // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)) with base a Python float:
            // the power is evaluated in float32 on a float32 tensor.
            f[j] = 1.0f / std::pow(theta, e);
        }
    }

    /// Rotates in place `heads` head vectors of `head_dim` for each of T tokens:
    /// token t, head h at x + t*ldx + h*head_dim, at position pos[t].
    void apply(float* x, std::size_t ldx, std::size_t T, std::size_t heads, std::size_t head_dim,
               const std::int64_t* pos) const {
        if (rot_dim == 0) return;
        check<ShapeError>(rot_dim % 2 == 0 && rot_dim <= head_dim, "[rope] rotary dim ", rot_dim,
                          " must be even and <= head dim ", head_dim);
        const std::size_t half = rot_dim / 2;
        Workspace::Frame ws;  // a reused buffer: no allocation in a warm decode step
        const std::span<float> f = ws.uninitialized<float>(half);
        inv_freq_into(f.data());
        // Tokens split over the pool (a decode step's single token runs inline); each token's
        // angles in blocks of kBlock on the stack (the pool's workers take no workspace).
        for_each_row(T, heads * rot_dim, [&](std::size_t t) {
            constexpr std::size_t kBlock = 64;
            float c[kBlock], s[kBlock];
            const float p = static_cast<float>(pos[t]);
            for (std::size_t j0 = 0; j0 < half; j0 += kBlock) {
                const std::size_t nj = std::min(kBlock, half - j0);
                for (std::size_t j = 0; j < nj; ++j) {
                    const float a = p * f[j0 + j];
                    c[j] = std::cos(a);
                    s[j] = std::sin(a);
                }
                for (std::size_t h = 0; h < heads; ++h) {
                    float* v = x + t * ldx + h * head_dim + j0;
                    for (std::size_t j = 0; j < nj; ++j) {
                        const float a = v[j], b = v[j + half];
                        v[j] = a * c[j] - b * s[j];
                        v[j + half] = b * c[j] + a * s[j];
                    }
                }
            }
        });
    }
};

}  // namespace hylens::kernels
