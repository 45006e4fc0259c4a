#pragma once
// Mixture-of-experts routing (families.md §3.7 and §4.7).
//   softmax_topk : p = softmax(logits) over all experts, top-k of p, optionally renormalised
//                  to sum 1 (Qwen3.5-MoE always, Qwen3-Next when norm_topk_prob).
//   topk_softmax : top-k of the logits, softmax over the k selected (Granite).
// Ties are broken towards the lower expert index, like torch.topk on CPU.

#include <algorithm>  // std::partial_sort, std::copy
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

/// route() without allocating: score and order are scratch of E values each; experts and
/// weights receive the k chosen experts (highest score first) and their mixing weights.
inline void route_into(const float* logits, std::size_t E, std::size_t k, Routing routing, float* score, int* order,
                       int* experts, float* weights) {
    check<ShapeError>(k >= 1 && k <= E, "[moe route] top-k ", k, " with ", E, " experts");
    std::copy(logits, logits + E, score);
    if (routing != Routing::topk_softmax) {
        float m = score[0];
        for (std::size_t e = 0; e < E; ++e) m = score[e] > m ? score[e] : m;
        float s = 0.0f;
        for (std::size_t e = 0; e < E; ++e) {
            score[e] = std::exp(score[e] - m);
            s += score[e];
        }
        for (std::size_t e = 0; e < E; ++e) score[e] /= s;
    }
    std::iota(order, order + E, 0);
    std::partial_sort(order, order + k, order + E, [&](int a, int b) {
        return score[a] > score[b] || (score[a] == score[b] && a < b);
    });
    std::copy(order, order + k, experts);
    if (routing == Routing::topk_softmax) {
        const float m = score[experts[0]];
        float s = 0.0f;
        for (std::size_t i = 0; i < k; ++i) {
            weights[i] = std::exp(score[experts[i]] - m);
            s += weights[i];
        }
        for (std::size_t i = 0; i < k; ++i) weights[i] /= s;
    } else {
        float s = 0.0f;
        for (std::size_t i = 0; i < k; ++i) {
            weights[i] = score[experts[i]];
            s += weights[i];
        }
        if (routing == Routing::softmax_topk_renorm)
            for (std::size_t i = 0; i < k; ++i) weights[i] /= s;
    }
}

inline ExpertChoice route(const float* logits, std::size_t E, std::size_t k, Routing routing) {
    check<ShapeError>(k >= 1 && k <= E, "[moe route] top-k ", k, " with ", E, " experts");
    std::vector<float> score(E);
    std::vector<int> order(E);
    ExpertChoice c;
    c.experts.resize(k);
    c.weights.resize(k);
    route_into(logits, E, k, routing, score.data(), order.data(), c.experts.data(), c.weights.data());
    return c;
}

}  // namespace hylens::kernels
