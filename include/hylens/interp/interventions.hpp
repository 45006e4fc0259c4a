#pragma once
// Interventions as data: a site, a set of layers, a set of positions
// and an action. A list of them is handed to run() (interp/run.hpp), which applies each one at
// the moment its site is computed, so everything downstream is recomputed. Nothing here holds
// global state; an empty list is the plain forward.
//
//   run(model, host_ids, {patch(site::mixer_out(13, Positions::last()), donor_captures)});
//   run(model, ids, {zero(Site::mixer_out, {0, 1, 2})});                // remove block G0
//   run(model, ids, {head_zero(15, {5})});                               // remove head L15H5

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <map>      // std::map
#include <string>   // std::string
#include <utility>  // std::move
#include <variant>  // std::variant
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../core/indices.hpp"
#include "../layers/hooks.hpp"
#include "named_tensors.hpp"
#include "sites.hpp"

namespace hylens {

/// Overwrite the selected rows with donor rows. rows[i] belongs to layers[i] and holds
/// [B, |P|, D] or [1, |P|, D] (broadcast over the batch) values. On mixer_out the mixer's own
/// state is not changed; on layer_write, resid_post[p] := resid_pre[p] + rows[p].
struct Set {
    std::vector<std::vector<float>> rows;
    /// The shape of the array the rows came from, when they came from one (Python): empty, or
    /// [n*D] / [B*n*D] flat, [n, D] or [B or 1, n, D]. A shape holding the right count in another
    /// layout (an [D, n] transpose) is refused.
    std::vector<std::size_t> shape{};
};

/// Set the selected rows to zero.
struct Zero {};

/// Set the selected rows to a constant vector per layer: mu[i] ([D]) for layers[i], or
/// mu[0] for every layer when only one is given.
struct Mean {
    std::vector<std::vector<float>> mu;
};

/// Replace the row at position p by a per-token-type vector looked up by the input id at p
/// (falling back to `fallback`, the global mean). tables[i] / fallback[i] belong to
/// layers[i] (or [0] for all). The run reports the coverage: the share of replaced rows that
/// found their id in the table.
struct Surrogate {
    std::vector<std::map<std::int64_t, std::vector<float>>> tables;
    std::vector<std::vector<float>> fallback;
};

/// What a ChannelMask writes into the masked channels.
enum class MaskFill { zero, mean, token_mean };

/// Replace only the listed channels of the selected rows (zero, a mean, or a token-type mean
/// given as a Surrogate table); the other channels keep their computed values.
struct ChannelMask {
    std::vector<std::size_t> channels;
    MaskFill fill = MaskFill::zero;
    Mean mean{};            ///< used with MaskFill::mean
    Surrogate table{};      ///< used with MaskFill::token_mean
};

/// Zero whole heads of a head-structured site: head_out (o_proj input, head width head_dim)
/// or lin_head_out (DeltaNet value head dv / Mamba-2 head P). The same as zeroing the
/// projection's weight columns, without touching the weights.
struct HeadZero {
    std::vector<std::size_t> heads;
};

/// Overwrite q, k or v (before q/k norm and RoPE) at the selected rows from donor rows, for
/// the listed heads only (empty = all heads). rows[i] as in Set. On gated models (Qwen3.5) q
/// is the query half only, so the output-gate half is never touched.
struct ProjPatch {
    std::vector<std::vector<float>> rows;
    std::vector<std::size_t> heads;
    std::vector<std::size_t> shape{};  ///< as Set::shape
};

/// The decoder layer outputs its input (at the selected positions; all by default).
struct SkipLayer {};

/// Every layer after the listed one is skipped: the residual leaving it goes to the final
/// norm and the head.
struct Truncate {};

/// Zero every convolution tap of the listed recurrent layers except the last (the current
/// token's): the conv no longer mixes neighbouring tokens ("conv 1 tap", exp9/11/12).
struct ConvTaps {
    bool keep_last_only = true;
};

/// Feed the run in chunks of `every` tokens through one cache and zero the SSM state of the
/// listed recurrent layers after each chunk; conv windows and K/V are kept (exp8/14).
/// every = 1 is "no recurrence".
struct StateResetEvery {
    std::size_t every = 1;
};

using Action = std::variant<Set, Zero, Mean, Surrogate, ChannelMask, HeadZero, ProjPatch, SkipLayer, Truncate,
                            ConvTaps, StateResetEvery>;

/// One intervention: an action applied at `site` of each of `layers` (`no_layer` for embed /
/// final_norm), at `positions` of the run. `write` selects the derived site layer_write
/// (then site is Site::resid_post): Set, Zero, Mean, Surrogate and ChannelMask then set the
/// write, resid_post := resid_pre + value (the channels they leave keep their values).
struct Intervention {
    Site site = Site::mixer_out;
    std::vector<LayerIndex> layers;
    Positions positions = Positions::all();
    Action action = Zero{};
    bool write = false;

    std::string describe() const;
};

inline const char* action_name(const Action& a) {
    constexpr const char* names[] = {"Set",      "Zero",      "Mean",     "Surrogate", "ChannelMask",    "HeadZero",
                                     "ProjPatch", "SkipLayer", "Truncate", "ConvTaps",  "StateResetEvery"};
    return names[a.index()];
}

inline std::string Intervention::describe() const {
    std::string s = std::string(action_name(action)) + "(" + (write ? "layer_write" : std::string(site_name(site))) +
                    ", layers {";
    for (std::size_t i = 0; i < layers.size(); ++i) {  // two appends: g++ 12's -Wrestrict false positive
        if (i) s += ',';                                   // (GCC bug 105651) on s += (i ? "," : "") + ...
        s += layer_name(layers[i]);
    }
    return s + "}, positions " + positions.describe() + ")";
}

// ---- factories: the common interventions in one line each ---------------------------------

/// Set site.positions of site.layer to `rows` ([B or 1, |P|, D]).
inline Intervention patch(const SiteRef& s, std::vector<float> rows) {
    return {s.site, {s.layer}, s.positions, Set{{std::move(rows)}, {}}, s.write};
}
/// Set site.positions of site.layer to the same rows of another run's capture (which must
/// hold that site under the same name, captured at the same positions).
inline Intervention patch(const SiteRef& s, const NamedTensors& donor) {
    return patch(s, to_vector(donor.at(s.name())));
}
/// Set the same site at several layers from a capture of another run (each layer's rows are
/// looked up as `<site>.<layer>` and must have been captured at `positions`).
inline Intervention patch(Site s, const std::vector<LayerIndex>& layers, Positions positions, const NamedTensors& donor,
                          bool write = false) {
    Set set;
    for (LayerIndex l : layers) set.rows.push_back(to_vector(donor.at(SiteRef{s, l, positions, write}.name())));
    return {s, layers, std::move(positions), std::move(set), write};
}
/// Zero a site at several layers (mixer_out on a block's layers is the default removal of).
inline Intervention zero(Site s, std::vector<LayerIndex> layers, Positions positions = Positions::all()) {
    return {s, std::move(layers), std::move(positions), Zero{}, false};
}
/// Replace a site by a constant vector per layer.
inline Intervention mean_ablate(Site s, std::vector<LayerIndex> layers, std::vector<std::vector<float>> mu,
                                Positions positions = Positions::all()) {
    return {s, std::move(layers), std::move(positions), Mean{std::move(mu)}, false};
}
/// Zero heads of layer l: head_out on attention layers, lin_head_out on DeltaNet / Mamba-2.
inline Intervention head_zero(LayerIndex l, std::vector<std::size_t> heads, Site s = Site::head_out,
                              Positions positions = Positions::all()) {
    return {s, {l}, std::move(positions), HeadZero{std::move(heads)}, false};
}
/// Patch q, k or v of layer l from donor rows, for some heads (empty = all).
inline Intervention proj_patch(LayerIndex l, Site which, Positions positions, std::vector<float> rows,
                               std::vector<std::size_t> heads = {}) {
    check<ShapeError>(which == Site::q || which == Site::k || which == Site::v, "[proj_patch] site ",
                      site_name(which), " is not q, k or v");
    return {which, {l}, std::move(positions), ProjPatch{{std::move(rows)}, std::move(heads), {}}, false};
}
/// The listed layers output their input.
inline Intervention skip_layers(std::vector<LayerIndex> layers) {
    return {Site::resid_post, std::move(layers), Positions::all(), SkipLayer{}, false};
}
/// Layers after `cut` are skipped; the residual leaving layer `cut` goes to the head.
inline Intervention truncate_after(LayerIndex cut) { return {Site::resid_post, {cut}, Positions::all(), Truncate{}, false}; }
/// Keep only the last conv tap of the listed recurrent layers.
inline Intervention conv_taps(std::vector<LayerIndex> layers) {
    return {Site::mixer_in, std::move(layers), Positions::all(), ConvTaps{true}, false};
}
/// Zero the SSM state of the listed recurrent layers every `w` tokens.
inline Intervention state_reset_every(std::vector<LayerIndex> layers, std::size_t w) {
    return {Site::mixer_in, std::move(layers), Positions::all(), StateResetEvery{w}, false};
}

}  // namespace hylens
