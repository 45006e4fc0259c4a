#pragma once
// Plain twin of kernels/attention.hpp: one query, one key at a time, double accumulators.

#include <cmath>    // std::exp
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "../attention.hpp"

namespace hylens::reference {

inline void attention(const kernels::AttentionShape& s, const float* q, std::size_t ld_q, const float* K,
                      const float* V, std::size_t ld_head, float scale, float* out, std::size_t ld_o,
                      float* probs = nullptr) {
    kernels::check_attention_shape(s, ld_q, ld_o);
    const std::size_t rep = s.Hq / s.Hkv, offset = s.Tk - s.Tq;
    std::vector<double> p(s.Tk);
    for (std::size_t h = 0; h < s.Hq; ++h) {
        const std::size_t j = h / rep;
        for (std::size_t t = 0; t < s.Tq; ++t) {
            const std::size_t visible = offset + t + 1;
            double m = -1e300, sum = 0.0;
            for (std::size_t k = 0; k < visible; ++k) {
                double d = 0.0;
                for (std::size_t i = 0; i < s.hd; ++i)
                    d += static_cast<double>(q[t * ld_q + h * s.hd + i]) * K[j * ld_head + k * s.hd + i];
                p[k] = scale * d;
                m = p[k] > m ? p[k] : m;
            }
            for (std::size_t k = 0; k < visible; ++k) sum += (p[k] = std::exp(p[k] - m));
            for (std::size_t i = 0; i < s.hd; ++i) {
                double o = 0.0;
                for (std::size_t k = 0; k < visible; ++k) o += p[k] / sum * V[j * ld_head + k * s.hd + i];
                out[t * ld_o + h * s.hd + i] = static_cast<float>(o);
            }
            if (probs)
                for (std::size_t k = 0; k < s.Tk; ++k)
                    probs[(h * s.Tq + t) * s.Tk + k] = k < visible ? static_cast<float>(p[k] / sum) : 0.0f;
        }
    }
}

}  // namespace hylens::reference
