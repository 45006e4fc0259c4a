#pragma once
// The reference-file format of the tests (tests/golden/README.md), which `hylens dump` and
// `hylens patch --out` also write: dump_run collects every tensor of a golden file (logits,
// hidden.embed, hidden.layer.N, hidden.final_norm, cache.N.{conv,state,k,v}, decode.*), and
// patch_reference_tensors the `patch.*` / `state_patch.*` outputs of a surgery file. Test
// support, not library API: the library's own results are RunResult, captures and caches.

#include <hylens/cache/parts.hpp>
#include <hylens/interp/named_tensors.hpp>
#include <hylens/interp/transplant.hpp>
#include <hylens/layers/hooks.hpp>
#include <hylens/stack/causal_lm.hpp>
#include <hylens/stack/tokens.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hylens::test {


namespace reference_detail {

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

}  // namespace reference_detail

/// Runs `prompt` then each of `decode_ids` one token at a time on a fresh cache.
template <class Model>
NamedTensors dump_run(const Model& model, const std::vector<std::int64_t>& prompt,
                      const std::vector<std::int64_t>& decode_ids) {
    NamedTensors out;
    const std::size_t L = model.num_layers(), V = model.config().vocab;
    auto cache = model.new_cache(1);

    auto run = [&](const std::vector<std::int64_t>& ids, bool with_embed,
                   std::vector<reference_detail::RowSink>& layers, reference_detail::RowSink& embed, reference_detail::RowSink& norm) {
        Hook hook;
        hook.wants = [](Site s, LayerIndex) { return s == Site::resid_post || s == Site::embed || s == Site::final_norm; };
        hook.fn = [&](Site s, LayerIndex layer, const ActivationView& v, const std::int64_t*) {
            if (s == Site::resid_post) layers[static_cast<std::size_t>(layer)].add(v);
            if (s == Site::embed && with_embed) embed.add(v);
            if (s == Site::final_norm) norm.add(v);
        };
        ForwardOptions fo;
        fo.hook = &hook;
        return model.forward(TokenBatch(ids), cache, fo);
    };

    std::vector<reference_detail::RowSink> layers(L), dlayers(L);
    reference_detail::RowSink embed, norm, dembed, dnorm;
    auto logits = run(prompt, true, layers, embed, norm);
    const std::size_t T = prompt.size(), H = model.config().hidden;
    out.put("logits", {T, V}, logits.data());
    out.put("hidden.embed", {T, H}, std::move(embed.values));
    for (std::size_t i = 0; i < L; ++i) out.put("hidden.layer." + std::to_string(i), {T, H}, std::move(layers[i].values));
    out.put("hidden.final_norm", {T, H}, std::move(norm.values));
    reference_detail::dump_caches(cache, "cache.", out);

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
        reference_detail::dump_caches(cache, "decode.cache.", out);
    }
    return out;
}


/// The outputs of a surgery reference file for one model (batch 1): donor and host prompts of
/// equal length, the recurrent layers `layers` and the attention layer `attn_layer`.
///   patch.donor.mixer_out [|layers|, hidden], patch.attn.donor.mixer_out [hidden],
///   patch.host.logits_final / patch.attn.host.logits_final [V],
///   state_patch{,.ssm_only,.all,.control}.logits_final [V].
template <class Model>
NamedTensors patch_reference_tensors(const Model& model, const std::vector<std::int64_t>& donor_ids,
                                     const std::vector<std::int64_t>& host_ids, const std::vector<LayerIndex>& layers,
                                     LayerIndex attn_layer) {
    const TokenBatch donor(donor_ids), host(host_ids);
    const std::size_t H = model.config().hidden, V = model.config().vocab, T = host.T();
    NamedTensors out;
    const auto final_row = [&](const Tensor3& lg, std::size_t row) {
        return std::vector<float>(lg.data() + row * V, lg.data() + (row + 1) * V);
    };

    const MixerTransplant rec = transplant_mixer(model, donor, host, layers, Positions::last());
    std::vector<float> rows;
    for (LayerIndex l : layers) {
        const auto r = flat(rec.donor.at(SiteRef{mixer_site(model.stack(), l, MixerChannel::recurrent), l}.name()));
        rows.insert(rows.end(), r.begin(), r.end());
    }
    out.put("patch.donor.mixer_out", {layers.size(), H}, std::move(rows));
    out.put("patch.host.logits_final", {V}, final_row(rec.host.logits, T - 1));

    const MixerTransplant att =
        transplant_mixer(model, donor, host, {attn_layer}, Positions::last(), MixerChannel::attention);
    out.put("patch.attn.donor.mixer_out", {H},
            flat(att.donor.at(SiteRef{mixer_site(model.stack(), attn_layer, MixerChannel::attention), attn_layer}.name())));
    out.put("patch.attn.host.logits_final", {V}, final_row(att.host.logits, T - 1));

    out.put("state_patch.logits_final", {V}, final_row(transplant_state(model, donor, host, layers, true), 0));
    out.put("state_patch.ssm_only.logits_final", {V},
            final_row(transplant_state(model, donor, host, layers, false), 0));
    out.put("state_patch.all.logits_final", {V},
            final_row(transplant_state(model, donor, host, recurrent_layers(model.stack()), true), 0));
    out.put("state_patch.control.logits_final", {V}, final_row(transplant_state(model, donor, host, {}, true), 0));
    return out;
}

}  // namespace hylens::test
