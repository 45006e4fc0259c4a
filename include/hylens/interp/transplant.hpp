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

/// exp22: the mixer outputs of `layers` (the site of `channel`: mixer_out, or attn_out /
/// ssm_out on parallel layers) at `positions`, copied from the donor run into the host run.
/// Donor and host must have the same length.
template <class Model>
MixerTransplant transplant_mixer(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                                 const std::vector<int>& layers, const Positions& positions,
                                 MixerChannel channel = MixerChannel::recurrent) {
    check<ShapeError>(donor.T() == host.T() && donor.batch == host.batch, "[transplant_mixer] donor (", donor.batch,
                      " x ", donor.T(), ") and host (", host.batch, " x ", host.T(), ") differ in shape");
    std::vector<SiteRef> sites;
    std::vector<Intervention> iv;
    for (int l : layers) {
        const Site s = mixer_site(model.stack(), l, channel);
        sites.push_back({s, l, positions, false});
    }
    MixerTransplant out;
    out.donor = capture(model, donor, sites);
    for (const SiteRef& s : sites) iv.push_back(patch(s, out.donor));
    out.host = run(model, host, iv);
    return out;
}

/// exp32-B: final-position logits [B, 1, V] of the host after copying the recurrent state of
/// `layers` (and the conv window when include_conv) from the donor's cache, both prefilled
/// over every token but the last. An empty layer list is the control (the host's own run).
template <class Model>
Tensor3 transplant_state(const Model& model, const TokenBatch& donor, const TokenBatch& host,
                         const std::vector<int>& layers, bool include_conv = true) {
    const std::size_t T = host.T();
    check<ShapeError>(donor.T() == T && donor.batch == host.batch && T >= 2, "[transplant_state] donor (",
                      donor.batch, " x ", donor.T(), ") and host (", host.batch, " x ", T,
                      ") must have the same shape and at least 2 tokens");
    auto hc = state_after(model, host, T - 2);
    const auto dc = state_after(model, donor, T - 2);
    copy_recurrent(hc, dc, layers, include_conv);
    TokenBatch last;
    last.batch = host.batch;
    for (std::size_t b = 0; b < host.batch; ++b) last.ids.push_back(host.at(b, T - 1));
    const std::int64_t pos[1] = {static_cast<std::int64_t>(T - 1)};
    return model.forward(last, hc, {std::span<const std::int64_t>(pos, 1), nullptr, true, false});
}

/// Every layer holding a mixer of channel `ch` (for Falcon-H1: every layer, either channel).
template <class Stack>
std::vector<int> mixer_layers(const Stack& stack, MixerChannel ch) {
    std::vector<int> out;
    for (std::size_t l = 0; l < stack.size(); ++l)
        if (find_mixer_site(stack, static_cast<int>(l), ch)) out.push_back(static_cast<int>(l));
    return out;
}
/// Every recurrent layer (DeltaNet / Mamba-2, or the Mamba half of a parallel layer).
template <class Stack>
std::vector<int> recurrent_layers(const Stack& stack) {
    return mixer_layers(stack, MixerChannel::recurrent);
}
/// Every layer with softmax attention (or an attention half).
template <class Stack>
std::vector<int> attention_layers(const Stack& stack) {
    return mixer_layers(stack, MixerChannel::attention);
}

}  // namespace hylens
