#pragma once
// The two transplants of Paper A, built from run() and
// copy_recurrent():
//   * mixer transplant (exp22): run the donor, keep the mixer outputs of some layers at some
//     positions, run the host with those rows overwritten as each mixer produces them;
//   * state transplant (exp32-B): prefill donor and host over all but the final token, copy
//     the recurrent state (and conv window) of some layers from donor to host, then run the
//     host's final token.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../stack/tokens.hpp"
#include "interventions.hpp"
#include "named_tensors.hpp"  // MixerTransplant::donor
#include "run.hpp"
#include "sites.hpp"
#include "state_patch.hpp"

namespace hylens {

struct MixerTransplant {
    NamedTensors donor;  ///< the donor rows, named <site>.<layer> ([B, |P|, hidden] each)
    RunResult host;      ///< the patched host run (logits of every position)
};

/// The donor rows of `sites` copied into the host run as the host computes them (every site
/// patched at its own positions); `host_options` adds captures (the reader's attention) or
/// last_only to the host run; `donor_interventions` act on the donor run the rows are taken
/// from (exp32-C: a donor with upstream mixers zeroed). Donor and host must have the same shape.
template <class Model>
MixerTransplant transplant_sites(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                                 const std::vector<SiteRef>& sites, const RunOptions& host_options = {},
                                 const std::vector<Intervention>& donor_interventions = {}) {
    check<ShapeError>(donor.T() == host.T() && donor.batch == host.batch, "[transplant] donor (", donor.batch, " x ",
                      donor.T(), ") and host (", host.batch, " x ", host.T(), ") differ in shape");
    MixerTransplant out;
    out.donor = capture(model, donor, sites, donor_interventions);
    std::vector<Intervention> iv;
    for (const SiteRef& s : sites) iv.push_back(patch(s, out.donor));
    out.host = run(model, host, iv, host_options);
    return out;
}

/// exp22: the mixer outputs of `layers` (the site of `channel`: mixer_out, or attn_out /
/// ssm_out on parallel layers) at `positions`, copied from the donor run (with
/// `donor_interventions` applied) into the host run. Donor and host must have the same length.
template <class Model>
MixerTransplant transplant_mixer(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                                 const std::vector<LayerIndex>& layers, const Positions& positions,
                                 MixerChannel channel = MixerChannel::recurrent, const RunOptions& host_options = {},
                                 const std::vector<Intervention>& donor_interventions = {}) {
    check_distinct_layers(layers, "transplant_mixer");
    std::vector<SiteRef> sites;
    for (LayerIndex l : layers) sites.push_back({mixer_site(model.stack(), l, channel), l, positions, false});
    return transplant_sites(model, donor, host, sites, host_options, donor_interventions);
}

/// exp22 --unit layer: the layer writes resid_post - resid_pre of `layers` at `positions`,
/// copied from the donor run (host resid_post[p] := host resid_pre[p] + donor write[p]).
template <class Model>
MixerTransplant transplant_layer_write(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                                       const std::vector<LayerIndex>& layers, const Positions& positions,
                                       const RunOptions& host_options = {}) {
    check_distinct_layers(layers, "transplant_layer_write");
    std::vector<SiteRef> sites;
    for (LayerIndex l : layers) sites.push_back(site::layer_write(l, positions));
    return transplant_sites(model, donor, host, sites, host_options);
}

/// The final token of `host` (T tokens) run at position T - 1 on `cache` (which holds tokens
/// [0, T - 2], edited or not), with `options`' captures; logits [B, 1, V].
template <class Model>
RunResult run_last_token(const Model& model, typename Model::cache_type& cache, const TokenBatch& host, RunOptions options) {
    const std::size_t T = host.T();
    TokenBatch last;
    last.batch = host.batch;
    for (std::size_t b = 0; b < host.batch; ++b) last.ids.push_back(host.at(b, T - 1));
    const std::int64_t pos[1] = {static_cast<std::int64_t>(T - 1)};
    options.positions = std::span<const std::int64_t>(pos, 1);
    return run(model, cache, last, {}, options);
}

/// exp32-B: the host's final token run on a cache holding the host's prefill over every token
/// but the last, with the recurrent state of `layers` (and the conv window when include_conv)
/// copied from the donor's cache prefilled the same way. An empty layer list is the control
/// (the host's own split run). `options` adds captures at that one token (positions index the
/// one-token run, so Positions::last() is the final position; attention rows cover all T keys);
/// its logits are [B, 1, V].
template <class Model>
RunResult transplant_state_run(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                               const std::vector<LayerIndex>& layers, bool include_conv = true, RunOptions options = {}) {
    const std::size_t T = host.T();
    check<ShapeError>(donor.T() == T && donor.batch == host.batch && T >= 2, "[transplant_state] donor (",
                      donor.batch, " x ", donor.T(), ") and host (", host.batch, " x ", T,
                      ") must have the same shape and at least 2 tokens");
    auto hc = state_after(model, host, T - 2);
    const auto dc = state_after(model, donor, T - 2);
    copy_recurrent(hc, dc, layers, include_conv);
    return run_last_token(model, hc, host, std::move(options));
}

/// exp32-B: final-position logits [B, 1, V] of transplant_state_run.
template <class Model>
Tensor3 transplant_state(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                         const std::vector<LayerIndex>& layers, bool include_conv = true) {
    RunOptions o;
    o.last_only = true;
    return transplant_state_run(model, donor, host, layers, include_conv, o).logits;
}

/// Every layer holding a mixer of channel `ch` (for Falcon-H1: every layer, either channel).
template <class Stack>
std::vector<LayerIndex> mixer_layers(const Stack& stack, MixerChannel ch) {
    std::vector<LayerIndex> out;
    for (LayerIndex l = 0; l < stack.size(); ++l)
        if (find_mixer_site(stack, l, ch)) out.push_back(l);
    return out;
}
/// exp32-C's donor: interventions zeroing the mixer output of `channel` at every position of
/// each of `layers` ("upstream blocks removed"), for transplant_mixer's donor_interventions.
template <class Stack>
std::vector<Intervention> zero_mixers(const Stack& stack, const std::vector<LayerIndex>& layers,
                                      MixerChannel channel = MixerChannel::recurrent) {
    std::vector<Intervention> out;
    for (LayerIndex l : layers) out.push_back(zero(mixer_site(stack, l, channel), {l}));
    return out;
}
/// Every recurrent layer (DeltaNet / Mamba-2, or the Mamba half of a parallel layer).
template <class Stack>
std::vector<LayerIndex> recurrent_layers(const Stack& stack) {
    return mixer_layers(stack, MixerChannel::recurrent);
}
/// Every layer with softmax attention (or an attention half).
template <class Stack>
std::vector<LayerIndex> attention_layers(const Stack& stack) {
    return mixer_layers(stack, MixerChannel::attention);
}

}  // namespace hylens
