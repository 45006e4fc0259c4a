#pragma once
// Mixture-of-experts routing (architectures.md §3.7 and §4.7).
//   softmax_topk : p = softmax(logits) over all experts, top-k of p, optionally renormalised
//                  to sum 1 (Qwen3.5-MoE always, Qwen3-Next when norm_topk_prob).
//   topk_softmax : top-k of the logits, softmax over the k selected (Granite).
// Ties are broken towards the lower expert index, like torch.topk on CPU.

#include <algorithm>  // std::partial_sort
#include <cmath>      // std::exp
#include <cstddef>    // std::size_t
#include <numeric>    // std::iota
#include <vector>     // std::vector

#include "../core/error.hpp"

namespace hylens::kernels {

enum class Routing { softmax_topk, softmax_topk_renorm, topk_softmax };

struct ExpertChoice {
    std::vector<int> experts;     ///< k expert indices, highest score first
    std::vector<float> weights;   ///< their mixing weights
};

inline ExpertChoice route(const float* logits, std::size_t E, std::size_t k, Routing routing) {
    check<ShapeError>(k >= 1 && k <= E, "[moe route] top-k ", k, " with ", E, " experts");
    std::vector<float> score(logits, logits + E);
    if (routing != Routing::topk_softmax) {
        float m = score[0];
        for (float v : score) m = v > m ? v : m;
        float s = 0.0f;
        for (float& v : score) {
            v = std::exp(v - m);
            s += v;
        }
        for (float& v : score) v /= s;
    }
    std::vector<int> idx(E);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), [&](int a, int b) {
        return score[a] > score[b] || (score[a] == score[b] && a < b);
    });
    ExpertChoice c;
    c.experts.assign(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
    c.weights.resize(k);
    if (routing == Routing::topk_softmax) {
        const float m = score[c.experts[0]];
        float s = 0.0f;
        for (std::size_t i = 0; i < k; ++i) {
            c.weights[i] = std::exp(score[c.experts[i]] - m);
            s += c.weights[i];
        }
        for (float& w : c.weights) w /= s;
    } else {
        float s = 0.0f;
        for (std::size_t i = 0; i < k; ++i) {
            c.weights[i] = score[c.experts[i]];
            s += c.weights[i];
        }
        if (routing == Routing::softmax_topk_renorm)
            for (float& w : c.weights) w /= s;
    }
    return c;
}

}  // namespace hylens::kernels
