#pragma once
// A random-weight bf16 model at the shape of Qwen3.5-0.8B's text stack (hidden 1024, SwiGLU
// 3584, GDN 16 x 128 heads, attention 8 / 2 heads x 256 on every fourth layer), with a 4096-token
// vocabulary: the model the surgery and study benchmarks time.

#include <cstddef>  // std::size_t

#include <hylens/layers/attention.hpp>
#include <hylens/layers/decoder.hpp>
#include <hylens/layers/deltanet.hpp>
#include <hylens/stack/causal_lm.hpp>

#include "../tests/support/random_model.hpp"

namespace hylens::bench {

using Qwen35Stack = HybridStack<DeltaNetLayer<>, AttentionLayer<>>;
using Qwen35Model = CausalLM<Qwen35Stack>;

inline constexpr std::size_t kQwen35Hidden = 1024, kQwen35Ffn = 3584, kQwen35Vocab = 4096;

inline Qwen35Model qwen35_08b_shaped(std::size_t layers, unsigned seed = 1) {
    test::RandomWeights r({kQwen35Hidden, kQwen35Vocab, true, seed});
    const DecoderConfig dc{kQwen35Hidden, 1e-6f, true, 1.0f};
    const auto norm = [&] { return r.values(kQwen35Hidden, 0.1f); };
    const auto ffn = [&] {
        FeedForward f;
        f.hidden = kQwen35Hidden;
        f.has_dense = true;
        f.dense = r.swiglu(kQwen35Hidden, kQwen35Ffn);
        return f;
    };
    Qwen35Stack st;
    for (std::size_t i = 0; i < layers; ++i) {
        if (i % 4 == 3)  // full_attention_interval = 4: layers 3, 7, ... are attention
            st.push_back(DecoderLayer<AttentionLayer<>>(dc, norm(), r.attention(true, 8, 2, 256, 64), norm(), ffn()));
        else
            st.push_back(DecoderLayer<DeltaNetLayer<>>(dc, norm(), r.deltanet(16, 16, 128, 128), norm(), ffn()));
    }
    return r.model(std::move(st));
}

}  // namespace hylens::bench
