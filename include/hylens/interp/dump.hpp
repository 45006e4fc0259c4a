#pragma once
// dump_run: prefill a prompt, then decode tokens one at a time, and collect every tensor of
// the golden format (tests/golden/README.md): logits, hidden.embed, hidden.layer.N,
// hidden.final_norm, cache.N.{conv,state,k,v}, decode.logits, decode.hidden.layer.N,
// decode.cache.N.*. Batch size 1; the batch axis is dropped as in the golden files.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <string>   // std::string, std::to_string
#include <vector>   // std::vector

#include "../cache/parts.hpp"
#include "../layers/hooks.hpp"
#include "../stack/causal_lm.hpp"
#include "../stack/tokens.hpp"
#include "named_tensors.hpp"

namespace hylens {

namespace detail {

/// Appends rows of an activation (B = 1) to a growing [T, D] buffer.
struct RowSink {
    std::vector<float> values;
    std::size_t D = 0;
    void add(const ActivationView& v) {
        D = v.D;
        for (std::size_t t = 0; t < v.T; ++t) values.insert(values.end(), v.row(0, t), v.row(0, t) + v.D);
    }
    std::size_t rows() const { return D ? values.size() / D : 0; }
};

template <class Cache>
void dump_caches(const Cache& cache, const std::string& prefix, NamedTensors& out) {
    for (std::size_t i = 0; i < cache.num_layers(); ++i) {
        cache.visit(i, [&](const auto& c) {
            const std::string p = prefix + std::to_string(i) + ".";
            if (const auto* r = recurrent_part(c)) {
                out.put(p + "conv", {r->conv_channels(), r->conv_width()}, r->conv(0));
                std::vector<std::size_t> shape = r->state_shape();
                out.put(p + "state", shape, r->state(0));
            }
            if (const auto* kv = kv_part(c)) {
                const std::size_t H = kv->kv_heads(), L = kv->length(), hd = kv->head_dim();
                std::vector<float> k(H * L * hd), v(H * L * hd);
                for (std::size_t j = 0; j < H; ++j)
                    for (std::size_t n = 0; n < L * hd; ++n) {
                        k[j * L * hd + n] = kv->k(0, j)[n];
                        v[j * L * hd + n] = kv->v(0, j)[n];
                    }
                out.put(p + "k", {H, L, hd}, std::move(k));
                out.put(p + "v", {H, L, hd}, std::move(v));
            }
        });
    }
}

}  // namespace detail

/// Runs `prompt` then each of `decode_ids` one token at a time on a fresh cache.
template <class Model>
NamedTensors dump_run(const Model& model, const std::vector<std::int64_t>& prompt,
                      const std::vector<std::int64_t>& decode_ids) {
    NamedTensors out;
    const std::size_t L = model.num_layers(), V = model.config().vocab;
    auto cache = model.new_cache(1);

    auto run = [&](const std::vector<std::int64_t>& ids, bool with_embed,
                   std::vector<detail::RowSink>& layers, detail::RowSink& embed, detail::RowSink& norm) {
        Hook hook;
        hook.wants = [](Site s, int) { return s == Site::resid_post || s == Site::embed || s == Site::final_norm; };
        hook.fn = [&](Site s, int layer, const ActivationView& v, const std::int64_t*) {
            if (s == Site::resid_post) layers[static_cast<std::size_t>(layer)].add(v);
            if (s == Site::embed && with_embed) embed.add(v);
            if (s == Site::final_norm) norm.add(v);
        };
        ForwardOptions fo;
        fo.hook = &hook;
        return model.forward(TokenBatch(ids), cache, fo);
    };

    std::vector<detail::RowSink> layers(L), dlayers(L);
    detail::RowSink embed, norm, dembed, dnorm;
    auto logits = run(prompt, true, layers, embed, norm);
    const std::size_t T = prompt.size(), H = model.config().hidden;
    out.put("logits", {T, V}, logits.data());
    out.put("hidden.embed", {T, H}, std::move(embed.values));
    for (std::size_t i = 0; i < L; ++i) out.put("hidden.layer." + std::to_string(i), {T, H}, std::move(layers[i].values));
    out.put("hidden.final_norm", {T, H}, std::move(norm.values));
    detail::dump_caches(cache, "cache.", out);

    if (!decode_ids.empty()) {
        std::vector<float> dlogits;
        for (std::int64_t id : decode_ids) {
            auto l = run({id}, false, dlayers, dembed, dnorm);
            dlogits.insert(dlogits.end(), l.data(), l.data() + V);
        }
        const std::size_t n = decode_ids.size();
        out.put("decode.logits", {n, V}, std::move(dlogits));
        for (std::size_t i = 0; i < L; ++i)
            out.put("decode.hidden.layer." + std::to_string(i), {n, H}, std::move(dlayers[i].values));
        out.put("decode.hidden.final_norm", {n, H}, std::move(dnorm.values));
        detail::dump_caches(cache, "decode.cache.", out);
    }
    return out;
}

}  // namespace hylens
