#pragma once
// run(): one forward of a CausalLM with interventions applied and sites captured.
// The interventions are data; run() composes them into one Hook
// for the forward, so each is applied at the moment its site is computed and everything
// downstream is recomputed. With no intervention and no capture it is the plain forward
// (the hook pointer is null). At a site, interventions act in list order, then captures
// record what flows on.

#include <algorithm>  // std::copy, std::fill, std::find, std::min
#include <array>      // std::array
#include <cmath>      // std::isfinite, std::nan
#include <optional>   // std::optional
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <span>       // std::span
#include <string>     // std::string
#include <variant>    // std::get_if, std::holds_alternative
#include <vector>     // std::vector

#include "../cache/parts.hpp"
#include "../core/error.hpp"
#include "../core/tensor.hpp"
#include "../layers/hooks.hpp"
#include "../stack/causal_lm.hpp"
#include "../stack/tokens.hpp"
#include "interventions.hpp"
#include "named_tensors.hpp"
#include "sites.hpp"

namespace hylens {

struct RunOptions {
    std::vector<SiteRef> capture{};             ///< tensors to return, named SiteRef::name()
    std::span<const std::int64_t> positions{};  ///< T positions; empty = the cache's next position onwards
    bool last_only = false;                     ///< logits of the final position only ([B, 1, V])
    bool skip_logits = false;                   ///< no logits (empty tensor)
    // With either, a capture or intervention at final_norm (computed in the head) is refused.
    /// Run layers [0, layers) only (ForwardOptions::layers: with skip_logits, the cache marked torn).
    std::size_t layers = static_cast<std::size_t>(-1);
};

struct RunResult {
    Tensor3 logits;              ///< [B, T, V] (or [B, 1, V] with last_only)
    NamedTensors captures;       ///< [B, |P|, D] per captured site; attn_probs [B, Hq, |P|, Tk]
    std::vector<double> coverage;  ///< per intervention: Surrogate / token-mean coverage, NaN for others
};

namespace detail {

inline constexpr std::size_t kNumSites = static_cast<std::size_t>(Site::final_norm) + 1;

/// A decoder-layer mixer with every conv tap but the last zeroed (ConvTaps); other kinds are
/// returned unchanged.
template <class M>
M last_conv_tap_only(const M& m) {
    if constexpr (requires { m.first(); m.second(); }) {
        return M(last_conv_tap_only(m.first()), last_conv_tap_only(m.second()), m.config().mult_a,
                 m.config().mult_b);
    } else if constexpr (requires { m.weights().conv; m.config().conv_width; }) {
        auto w = m.weights();
        const std::size_t K = m.config().conv_width;
        for (std::size_t i = 0; i < w.conv.size(); ++i)
            if (i % K != K - 1) w.conv[i] = 0.0f;  // conv is [C, K]; tap K-1 multiplies the current token
        return M(m.config(), std::move(w));
    } else {
        return m;
    }
}

/// The hook of one run: routes each fired site to the interventions and captures that name
/// it. Rows are addressed by run index (chunk offset + row), so chunked runs address the
/// same positions as one call.
class RunHook {
public:
    RunHook(const std::vector<Intervention>& iv, const std::vector<SiteRef>& caps, const TokenBatch& ids,
            std::size_t num_layers, std::vector<std::size_t> head_widths)
        : iv_(iv), caps_(caps), ids_(ids), L_(num_layers), T_(ids.T()), B_(ids.batch),
          head_w_(std::move(head_widths)), table_((num_layers + 1) * kNumSites), saved_pre_(num_layers),
          cap_buf_(caps.size()), cap_D_(caps.size(), 0), cap_H_(caps.size(), 0), hits_(iv.size(), 0),
          total_(iv.size(), 0) {
        for (std::size_t i = 0; i < iv_.size(); ++i) {
            const Intervention& v = iv_[i];
            iv_slots_.push_back(slots(v.positions));
            iv_rows_.push_back(v.positions.resolve(T_).size());
            for (std::size_t j = 0; j < v.layers.size(); ++j) {
                const LayerIndex l = v.layers[j];
                if (std::holds_alternative<ConvTaps>(v.action) || std::holds_alternative<StateResetEvery>(v.action))
                    continue;  // applied by run() to the model or the chunking, not at a site
                if (std::holds_alternative<Truncate>(v.action)) {
                    cut_ = std::min(cut_, l);  // no_layer (none yet) is the largest index
                    continue;
                }
                if (std::holds_alternative<SkipLayer>(v.action)) {
                    need_pre(l);
                    entry(Site::resid_post, l).push_back({Entry::intervene, i, j});
                    continue;
                }
                if (v.write) need_pre(l);
                entry(v.site, l).push_back({Entry::intervene, i, j});
            }
        }
        if (cut_ != no_layer) {
            entry(Site::resid_post, cut_).push_back({Entry::save_cut, 0, 0});
            for (LayerIndex l = cut_ + 1; l < L_; ++l) entry(Site::resid_post, l).push_back({Entry::restore_cut, 0, 0});
        }
        for (std::size_t c = 0; c < caps_.size(); ++c) {
            cap_slots_.push_back(slots(caps_[c].positions));
            cap_rows_.push_back(caps_[c].positions.resolve(T_).size());
            if (caps_[c].write) need_pre(caps_[c].layer);
            entry(caps_[c].site, caps_[c].layer).push_back({Entry::capture, c, 0});
        }
        // Saving resid_pre runs after any intervention at resid_pre, so it is what the layer saw.
        for (std::size_t l = 0; l < L_; ++l)
            if (pre_needed_.size() > l && pre_needed_[l])
                entry(Site::resid_pre, l).push_back({Entry::save_pre, l, 0});
    }

    /// Row offset of the chunk about to run, and its length.
    void set_chunk(std::size_t offset, std::size_t len) noexcept {
        offset_ = offset;
        chunk_ = len;
    }

    bool wants(Site s, LayerIndex layer) const {
        const std::size_t k = key(s, layer);
        return k < table_.size() && !table_[k].empty();
    }

    void fire(Site s, LayerIndex layer, const ActivationView& v) {
        for (const Entry& e : table_[key(s, layer)]) {
            switch (e.kind) {
                case Entry::intervene: apply(e.index, e.slot, layer, v); break;
                case Entry::capture: record(e.index, s, layer, v); break;
                case Entry::save_pre: save(saved_pre_[e.index], v); break;
                case Entry::save_cut: save(saved_cut_, v); break;
                case Entry::restore_cut: restore_all(saved_cut_, v); break;
            }
        }
    }

    /// Moves the captures into `out`: [B, Hq, |P|, Tk] for attn_probs, [B, |P|, D] for the others.
    /// run() has checked that each site exists and runs (final_norm needs the head); a site
    /// that still never fired is a defect of the forward, reported rather than returned empty.
    void collect(NamedTensors& out) {
        for (std::size_t c = 0; c < caps_.size(); ++c) {
            check<Error>(cap_D_[c] != 0, "[run] capture ", caps_[c].name(),
                         ": the layer has this site but its forward never fired it");
            out.put(caps_[c].name(), std::move(cap_buf_[c]));
        }
    }

    std::vector<double> coverage() const {
        std::vector<double> c(iv_.size(), std::nan(""));
        for (std::size_t i = 0; i < iv_.size(); ++i)
            if (total_[i] > 0) c[i] = static_cast<double>(hits_[i]) / static_cast<double>(total_[i]);
        return c;
    }

private:
    struct Entry {
        enum Kind { intervene, capture, save_pre, save_cut, restore_cut } kind;
        std::size_t index, slot;
    };

    /// Row of the table: 0 for the layer-less sites, l + 1 for layer l.
    std::size_t key(Site s, LayerIndex layer) const noexcept {
        return (layer == no_layer ? 0 : layer + 1) * kNumSites + static_cast<std::size_t>(s);
    }
    std::vector<Entry>& entry(Site s, LayerIndex layer) {
        check<ShapeError>(layer == no_layer || layer < L_, "[run] layer ", layer_name(layer), " out of ", L_);
        return table_[key(s, layer)];
    }
    void need_pre(LayerIndex l) {
        check<ShapeError>(l < L_, "[run] layer ", layer_name(l), " out of ", L_);
        pre_needed_.resize(L_, false);
        pre_needed_[l] = true;
    }
    /// slot[r] = index of run row r in the position list, or -1.
    std::vector<long> slots(const Positions& p) const {
        std::vector<long> s(T_, -1);
        const auto rows = p.resolve(T_);
        for (std::size_t i = 0; i < rows.size(); ++i) s[rows[i]] = static_cast<long>(i);
        return s;
    }

    static void save(std::vector<float>& dst, const ActivationView& v) {
        dst.resize(v.B * v.T * v.D);
        for (std::size_t b = 0; b < v.B; ++b)
            for (std::size_t t = 0; t < v.T; ++t) std::copy(v.row(b, t), v.row(b, t) + v.D, dst.data() + (b * v.T + t) * v.D);
    }
    static void restore_all(const std::vector<float>& src, const ActivationView& v) {
        for (std::size_t b = 0; b < v.B; ++b)
            for (std::size_t t = 0; t < v.T; ++t) {
                const float* s = src.data() + (b * v.T + t) * v.D;
                std::copy(s, s + v.D, v.row(b, t));
            }
    }

    // validate_interventions checked, before the forward, every count, length, channel and
    // head read below against the site's width at each layer: the row loops only copy.

    /// Values for layer j of a one-for-all or one-per-layer list.
    template <class Vec>
    static const Vec& per_layer(const std::vector<Vec>& v, std::size_t j) noexcept {
        return v.size() == 1 ? v[0] : v[j];
    }
    /// Donor values for (batch b, slot) from [B or 1, n, D] rows.
    const float* donor_row(const std::vector<float>& rows, std::size_t i, std::size_t b, std::size_t slot,
                           std::size_t D) const noexcept {
        const std::size_t n = iv_rows_[i];
        const std::size_t bb = rows.size() == n * D ? 0 : b;
        return rows.data() + (bb * n + slot) * D;
    }
    /// A Surrogate's row for the token at (b, r): its table's, or the fallback; counts hits.
    const std::vector<float>& token_row(std::size_t i, const Surrogate& sg, std::size_t j, std::size_t b,
                                        std::size_t r) {
        const auto& table = per_layer(sg.tables, j);
        ++total_[i];
        auto it = table.find(ids_.at(b, r));
        if (it != table.end()) {
            ++hits_[i];
            return it->second;
        }
        return per_layer(sg.fallback, j);
    }

    void apply(std::size_t i, std::size_t j, LayerIndex layer, const ActivationView& v) {
        const Intervention& iv = iv_[i];
        const std::size_t D = v.D;
        const std::vector<long>& slot = iv_slots_[i];
        const std::size_t lw = layer != no_layer ? layer : 0;
        const std::size_t w = head_w_[i * (L_ + 1) + lw];
        for (std::size_t b = 0; b < v.B; ++b)
            for (std::size_t t = 0; t < v.T; ++t) {
                const std::size_t r = offset_ + t;
                if (r >= T_ || slot[r] < 0) continue;
                const std::size_t sl = static_cast<std::size_t>(slot[r]);
                float* row = v.row(b, t);
                // On layer_write the action sets the write: resid_post := resid_pre + value
                // (channels it leaves alone keep their computed values exactly).
                const float* pre = iv.write ? saved_pre_[lw].data() + (b * v.T + t) * D : nullptr;
                const auto put = [row, pre](std::size_t c, float x) { row[c] = pre ? pre[c] + x : x; };
                if (const Set* a = std::get_if<Set>(&iv.action)) {
                    const float* d = donor_row(a->rows[j], i, b, sl, D);
                    for (std::size_t c = 0; c < D; ++c) put(c, d[c]);
                } else if (std::holds_alternative<Zero>(iv.action)) {
                    for (std::size_t c = 0; c < D; ++c) put(c, 0.0f);
                } else if (const Mean* a = std::get_if<Mean>(&iv.action)) {
                    const auto& mu = per_layer(a->mu, j);
                    for (std::size_t c = 0; c < D; ++c) put(c, mu[c]);
                } else if (const Surrogate* a = std::get_if<Surrogate>(&iv.action)) {
                    const auto& src = token_row(i, *a, j, b, r);
                    for (std::size_t c = 0; c < D; ++c) put(c, src[c]);
                } else if (const ChannelMask* a = std::get_if<ChannelMask>(&iv.action)) {
                    const std::vector<float>* fill = nullptr;
                    if (a->fill == MaskFill::mean) fill = &per_layer(a->mean.mu, j);
                    if (a->fill == MaskFill::token_mean) fill = &token_row(i, a->table, j, b, r);
                    for (std::size_t c : a->channels) put(c, fill ? (*fill)[c] : 0.0f);
                } else if (const HeadZero* a = std::get_if<HeadZero>(&iv.action)) {
                    for (std::size_t h : a->heads) std::fill(row + h * w, row + (h + 1) * w, 0.0f);
                } else if (const ProjPatch* a = std::get_if<ProjPatch>(&iv.action)) {
                    const float* d = donor_row(a->rows[j], i, b, sl, D);
                    if (a->heads.empty()) std::copy(d, d + D, row);
                    for (std::size_t h : a->heads) std::copy(d + h * w, d + (h + 1) * w, row + h * w);
                } else if (std::holds_alternative<SkipLayer>(iv.action)) {
                    const float* pre = saved_pre_[lw].data() + (b * v.T + t) * D;
                    std::copy(pre, pre + D, row);
                }
            }
    }

    void record(std::size_t c, Site s, LayerIndex layer, const ActivationView& v) {
        const SiteRef& ref = caps_[c];
        const std::vector<long>& slot = cap_slots_[c];
        const std::size_t n = cap_rows_[c];
        NamedTensor& buf = cap_buf_[c];
        if (s == Site::attn_probs) {
            // Rows are (head, query); D = keys so far. Keys of the whole run: the keys before
            // this chunk plus every token of the run.
            const std::size_t Hq = v.T / chunk_, before = v.D - chunk_;
            if (cap_D_[c] == 0) {
                cap_H_[c] = Hq;
                cap_D_[c] = before - offset_ + T_;
                buf = NamedTensor::from_shape({B_, Hq, n, cap_D_[c]});
                buf.fill(0.0f);
            }
            const std::size_t Tk = cap_D_[c];
            for (std::size_t b = 0; b < v.B; ++b)
                for (std::size_t h = 0; h < Hq; ++h)
                    for (std::size_t t = 0; t < chunk_; ++t) {
                        const std::size_t r = offset_ + t;
                        if (r >= T_ || slot[r] < 0) continue;
                        const float* src = v.row(b, h * chunk_ + t);
                        std::copy(src, src + std::min(v.D, Tk),
                                  buf.data() + ((b * Hq + h) * n + static_cast<std::size_t>(slot[r])) * Tk);
                    }
            return;
        }
        if (cap_D_[c] == 0) {
            cap_D_[c] = v.D;
            buf = NamedTensor::from_shape({B_, n, v.D});
            buf.fill(0.0f);
        }
        const std::size_t lw = layer != no_layer ? layer : 0;
        for (std::size_t b = 0; b < v.B; ++b)
            for (std::size_t t = 0; t < v.T; ++t) {
                const std::size_t r = offset_ + t;
                if (r >= T_ || slot[r] < 0) continue;
                float* dst = buf.data() + (b * n + static_cast<std::size_t>(slot[r])) * v.D;
                const float* src = v.row(b, t);
                if (ref.write) {
                    const float* pre = saved_pre_[lw].data() + (b * v.T + t) * v.D;
                    for (std::size_t d = 0; d < v.D; ++d) dst[d] = src[d] - pre[d];
                } else {
                    std::copy(src, src + v.D, dst);
                }
            }
    }

    const std::vector<Intervention>& iv_;
    const std::vector<SiteRef>& caps_;
    const TokenBatch& ids_;
    std::size_t L_, T_, B_;
    std::vector<std::size_t> head_w_;  // [intervention][layer]: head width at its site
    std::vector<std::vector<Entry>> table_;
    std::vector<bool> pre_needed_;
    std::vector<std::vector<float>> saved_pre_;
    std::vector<float> saved_cut_;
    LayerIndex cut_ = no_layer;  ///< the Truncate layer (no_layer: none)
    std::vector<std::vector<long>> iv_slots_, cap_slots_;
    std::vector<std::size_t> iv_rows_, cap_rows_;
    std::vector<NamedTensor> cap_buf_;
    std::vector<std::size_t> cap_D_, cap_H_;
    std::vector<std::size_t> hits_, total_;
    std::size_t offset_ = 0, chunk_ = 0;
};

/// "a, b, c": the sites layer l fires, for messages.
template <class Stack>
std::string site_list(const Stack& stack, LayerIndex l) {
    std::string out;
    for (Site s : layer_sites(stack, l)) out += (out.empty() ? "" : ", ") + std::string(site_name(s));
    return out;
}

/// Every value of `v` finite: a ShapeError naming the intervention, what and the index.
inline void check_finite_values(const std::vector<float>& v, const std::string& what, const std::string& which) {
    for (std::size_t i = 0; i < v.size(); ++i)
        check<ShapeError>(std::isfinite(v[i]), what, ": ", which, " value ", i, " is ", v[i],
                          " (interventions write finite values only)");
}

/// One vector per layer, or one for all: its count, each one's length (the site's width at
/// its layer) and its values.
inline void check_per_layer_vectors(const std::vector<std::vector<float>>& v, const std::vector<LayerIndex>& layers,
                                    const std::vector<std::size_t>& widths, const std::string& what,
                                    const std::string& which) {
    check<ShapeError>(v.size() == 1 || v.size() == widths.size(), what, ": ", v.size(), " ", which, " vectors for ",
                      widths.size(), " layers (one for all, or one per layer)");
    for (std::size_t j = 0; j < widths.size(); ++j) {
        const std::vector<float>& x = v.size() == 1 ? v[0] : v[j];
        check<ShapeError>(x.size() == widths[j], what, ": ", which, " of ", x.size(), " values for a site of ",
                          widths[j], " channels at layer ", layer_name(layers[j]));
        if (v.size() > 1 || j == 0) check_finite_values(x, what, which);
    }
}

/// A Surrogate's tables and fallbacks as check_per_layer_vectors checks vectors; every table
/// key a token id of the model's vocabulary (a key outside it never matched, so its row was
/// silently never used).
inline void check_surrogate(const Surrogate& sg, const std::vector<LayerIndex>& layers,
                            const std::vector<std::size_t>& widths, std::size_t vocab, const std::string& what) {
    check<ShapeError>(sg.tables.size() == 1 || sg.tables.size() == widths.size(), what, ": ", sg.tables.size(),
                      " tables for ", widths.size(), " layers (one for all, or one per layer)");
    for (std::size_t j = 0; j < widths.size(); ++j)
        for (const auto& [id, row] : sg.tables.size() == 1 ? sg.tables[0] : sg.tables[j]) {
            check<ShapeError>(id >= 0 && static_cast<std::size_t>(id) < vocab, what, ": table key ", id,
                              " is not a token id of the model's vocabulary of ", vocab);
            check<ShapeError>(row.size() == widths[j], what, ": the table row of token ", id, " has ", row.size(),
                              " values for a site of ", widths[j], " channels at layer ", layer_name(layers[j]));
            check_finite_values(row, what, "the table row of token " + std::to_string(id) + ":");
        }
    check_per_layer_vectors(sg.fallback, layers, widths, what, "fallback");
}

/// Donor rows [B or 1, n, D] per layer (Set, ProjPatch): one set per layer, each of n x D or
/// B x n x D finite values; `shape`, when given, the array's (flat, [n, D] or [B or 1, n, D]).
inline void check_donor_rows(const std::vector<std::vector<float>>& rows, const std::vector<std::size_t>& widths,
                             std::size_t n, std::size_t B, const std::string& what,
                             const std::vector<std::size_t>& shape = {}) {
    check<ShapeError>(rows.size() == widths.size(), what, ": ", rows.size(), " donor row sets for ", widths.size(),
                      " layers");
    for (std::size_t j = 0; j < widths.size(); ++j) {
        const std::size_t D = widths[j];
        const std::string want = "[" + (B == 1 ? std::string("1") : std::to_string(B) + " or 1") + ", " +
                                 std::to_string(n) + ", " + std::to_string(D) + "] (" + std::to_string(n) +
                                 " positions of a site of " + std::to_string(D) + " channels)";
        check<ShapeError>(rows[j].size() == n * D || rows[j].size() == B * n * D, what, ": ", rows[j].size(),
                          " donor values, expected ", want);
        if (shape.size() >= 2) {
            std::string got = "[";
            for (std::size_t i = 0; i < shape.size(); ++i) got += (i ? ", " : "") + std::to_string(shape[i]);
            got += "]";
            const bool rows_ok = shape.size() <= 3 && shape.back() == D && shape[shape.size() - 2] == n &&
                                 (shape.size() == 2 || shape[0] == 1 || shape[0] == B);
            check<ShapeError>(rows_ok, what, ": donor array of shape ", got, ", expected ", want);
        }
        check_finite_values(rows[j], what, "donor");
    }
}

/// Heads h of width w within D channels.
inline void check_heads(const std::vector<std::size_t>& heads, std::size_t w, std::size_t D, const std::string& what) {
    for (std::size_t h : heads)
        check<ShapeError>(h < D / w, what, ": head ", h, " out of ", D / w, " heads (of ", w, " channels)");
}

/// Checks before the forward, so a bad intervention stops the run before the cache changes:
/// layer ranges; that each layer fires the site (a site a layer kind does not have acted on
/// nothing); sites an action can act on; recurrent-only actions; the counts and lengths of
/// donor rows, means, tables and fills against the site's width, and their values finite;
/// heads and channels in range. T and B: the run's tokens and sequences.
template <class Stack>
void validate_interventions(const Stack& stack, const std::vector<Intervention>& iv, std::size_t T, std::size_t B,
                            std::size_t vocab) {
    const LayerIndex L = stack.size();
    for (const Intervention& v : iv) {
        const std::string what = "[run] " + v.describe();
        check<ShapeError>(!v.layers.empty(), what, ": no layers given");
        const bool global = v.site == Site::embed || v.site == Site::final_norm;
        for (LayerIndex l : v.layers) {
            check<ShapeError>(global || l != no_layer, what, ": ", site_name(v.site), " is a site of a decoder layer: give one of ",
                              "0-", L - 1, " (no layer, Python's -1, is for embed and final_norm)");
            check<ShapeError>(global ? l == no_layer : l < L, what, ": layer ", layer_name(l),
                              global ? " (embed and final_norm take no_layer)" : " is outside the model's ",
                              global ? std::string() : std::to_string(L) + " layers");
        }
        check<UnsupportedError>(v.site != Site::attn_probs && v.site != Site::gate_dt, what, ": ", site_name(v.site),
                                " is observed after its use, so changing it would change nothing; capture it instead");
        check<ShapeError>(!v.write || v.site == Site::resid_post, what, ": layer_write is a resid_post site");
        if (std::holds_alternative<HeadZero>(v.action))
            check<ShapeError>(v.site == Site::head_out || v.site == Site::lin_head_out, what,
                              ": HeadZero acts on head_out or lin_head_out");
        if (std::holds_alternative<ProjPatch>(v.action))
            check<ShapeError>(v.site == Site::q || v.site == Site::k || v.site == Site::v, what,
                              ": ProjPatch acts on q, k or v");
        if (std::holds_alternative<ConvTaps>(v.action) || std::holds_alternative<StateResetEvery>(v.action)) {
            for (LayerIndex l : v.layers)
                check<ShapeError>(find_mixer_site(stack, l, MixerChannel::recurrent).has_value(), what, ": layer ", l,
                                  " has no recurrent mixer");
            if (const StateResetEvery* s = std::get_if<StateResetEvery>(&v.action))
                check<ShapeError>(s->every >= 1, what, ": chunk length 0");
            continue;  // act on the model or the chunking, not at a site
        }
        if (std::holds_alternative<Truncate>(v.action) || std::holds_alternative<SkipLayer>(v.action)) continue;

        // The site's width at each layer; a layer that does not fire it is an error.
        std::vector<std::size_t> widths;
        for (LayerIndex l : v.layers) {
            const std::optional<std::size_t> w = site_width(stack, l, v.site);
            check<ShapeError>(w.has_value(), what, ": layer ", layer_name(l), " has no site ", site_name(v.site),
                              " (its sites: ", site_list(stack, l), ")");
            widths.push_back(*w);
        }
        const std::size_t n = v.positions.resolve(T).size();
        if (const Set* a = std::get_if<Set>(&v.action)) check_donor_rows(a->rows, widths, n, B, what, a->shape);
        if (const ProjPatch* a = std::get_if<ProjPatch>(&v.action)) {
            check_donor_rows(a->rows, widths, n, B, what, a->shape);
            for (std::size_t j = 0; j < v.layers.size(); ++j)
                check_heads(a->heads, head_width(stack, v.layers[j], v.site), widths[j], what);
        }
        if (const Mean* a = std::get_if<Mean>(&v.action)) check_per_layer_vectors(a->mu, v.layers, widths, what, "mean");
        if (const Surrogate* a = std::get_if<Surrogate>(&v.action)) check_surrogate(*a, v.layers, widths, vocab, what);
        if (const ChannelMask* a = std::get_if<ChannelMask>(&v.action)) {
            for (std::size_t j = 0; j < widths.size(); ++j)
                for (std::size_t c : a->channels)
                    check<ShapeError>(c < widths[j], what, ": channel ", c, " out of ", widths[j]);
            if (a->fill == MaskFill::mean) check_per_layer_vectors(a->mean.mu, v.layers, widths, what, "mean");
            if (a->fill == MaskFill::token_mean) check_surrogate(a->table, v.layers, widths, vocab, what);
        }
        if (const HeadZero* a = std::get_if<HeadZero>(&v.action))
            for (std::size_t j = 0; j < v.layers.size(); ++j)
                check_heads(a->heads, head_width(stack, v.layers[j], v.site), widths[j], what);
    }
}

/// Captures: each at a site its layer fires, each name once (a second capture of one site,
/// at other positions, overwrote the first).
template <class Stack>
void validate_captures(const Stack& stack, const std::vector<SiteRef>& caps) {
    std::vector<std::string> names;
    for (const SiteRef& c : caps) {
        check<ShapeError>(c.layer != no_layer || c.site == Site::embed || c.site == Site::final_norm, "[run] capture ", c.name(),
                          ": ", site_name(c.site), " is a site of a decoder layer: give one of 0-", stack.size() - 1,
                          " (no layer, Python's -1, is for embed and final_norm)");
        check<ShapeError>(c.layer == no_layer || c.layer < stack.size(), "[run] capture ", c.name(), ": layer ",
                          layer_name(c.layer), " is outside the model's ", stack.size(), " layers");
        check<ShapeError>(site_width(stack, c.layer, c.site).has_value(), "[run] capture ", c.name(), ": layer ",
                          layer_name(c.layer), " has no site ", site_name(c.site), " (its sites: ",
                          site_list(stack, c.layer), ")");
        check<ShapeError>(!c.write || c.site == Site::resid_post, "[run] capture ", c.name(), ": layer_write is a ",
                          "resid_post site (", site_name(c.site), " with write set)");
        check<ShapeError>(std::find(names.begin(), names.end(), c.name()) == names.end(), "[run] capture ", c.name(),
                          " is listed twice (one capture per site and layer; list its positions once)");
        names.push_back(c.name());
    }
}

}  // namespace detail

/// Runs ids on top of `cache` (updated in place) with the interventions applied and the
/// requested sites captured. Positions in interventions and captures index the run's tokens.
template <class Model>
RunResult run(const Model& model, typename Model::cache_type& cache, const TokenBatch& ids,
              const std::vector<Intervention>& interventions, const RunOptions& opt = {}) {
    RunResult res;
    const std::size_t T = ids.T(), B = ids.batch, L = model.num_layers();
    // Before any forward: a chunked run would have run its first chunks on part of the layers.
    check<ShapeError>(opt.layers >= L || opt.skip_logits, "[run] a run of layers [0, ", opt.layers, ") of ", L,
                      " computes no logits: set skip_logits");
    if (interventions.empty() && opt.capture.empty()) {  // the plain forward, no hook at all
        ForwardOptions fo;
        fo.positions = opt.positions;
        fo.last_only = opt.last_only;
        fo.skip_logits = opt.skip_logits;
        fo.layers = opt.layers;
        res.logits = model.forward(ids, cache, fo);
        return res;
    }
    check<ShapeError>(T >= 1 && ids.ids.size() == B * T, "[run] need B >= 1 sequences of T >= 1 tokens");
    check<ShapeError>(opt.positions.empty() || opt.positions.size() == T, "[run] ", opt.positions.size(),
                      " positions for ", T, " tokens");
    detail::validate_interventions(model.stack(), interventions, T, B, model.config().vocab);
    detail::validate_captures(model.stack(), opt.capture);
    // final_norm is computed in the head: skip_logits does not run it, and last_only runs it on
    // the final row alone (its positions would index rows the head never computed).
    const auto at_final_norm = [&](Site s) {
        check<ShapeError>(s != Site::final_norm || (!opt.skip_logits && !opt.last_only), "[run] final_norm is computed "
                          "in the head, which ", opt.skip_logits ? "skip_logits does not run" : "last_only runs on the final "
                          "row alone", ": capture or change it in a run without ", opt.skip_logits ? "skip_logits" : "last_only");
    };
    for (const SiteRef& c : opt.capture) at_final_norm(c.site);
    for (const Intervention& v : interventions) at_final_norm(v.site);

    // Head widths per (intervention, layer) for HeadZero / ProjPatch.
    std::vector<std::size_t> hw(interventions.size() * (L + 1), 0);
    std::size_t every = 0;
    bool conv_taps = false;
    for (std::size_t i = 0; i < interventions.size(); ++i) {
        const Intervention& v = interventions[i];
        if (std::holds_alternative<HeadZero>(v.action) || std::holds_alternative<ProjPatch>(v.action))
            for (LayerIndex l : v.layers) hw[i * (L + 1) + l] = head_width(model.stack(), l, v.site);
        if (const StateResetEvery* s = std::get_if<StateResetEvery>(&v.action)) {
            check<UnsupportedError>(every == 0 || every == s->every, "[run] StateResetEvery with different chunk "
                                    "lengths (", every, " and ", s->every, ") in one run");
            every = s->every;
        }
        conv_taps = conv_taps || std::holds_alternative<ConvTaps>(v.action);
    }

    // ConvTaps changes weights: run a copy of the model (matrices are shared, not copied).
    const Model* m = &model;
    Model modified;
    if (conv_taps) {
        modified = model;
        for (const Intervention& v : interventions)
            if (std::holds_alternative<ConvTaps>(v.action))
                for (LayerIndex l : v.layers)
                    modified.stack().visit(l, [](auto& layer) {
                        layer.mixer() = detail::last_conv_tap_only(layer.mixer());
                    });
        m = &modified;
    }

    detail::RunHook rh(interventions, opt.capture, ids, L, std::move(hw));
    Hook hook;
    hook.wants = [&rh](Site s, LayerIndex layer) { return rh.wants(s, layer); };
    hook.fn = [&rh](Site s, LayerIndex layer, const ActivationView& v, const std::int64_t*) { rh.fire(s, layer, v); };

    const std::size_t chunk = every == 0 ? T : every;
    const std::size_t V = model.config().vocab;
    if (!opt.skip_logits) res.logits = Tensor3::from_shape({B, opt.last_only ? std::size_t{1} : T, V});
    for (std::size_t off = 0; off < T; off += chunk) {
        const std::size_t n = std::min(chunk, T - off);
        TokenBatch part;
        part.batch = B;
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = off; t < off + n; ++t) part.ids.push_back(ids.at(b, t));
        ForwardOptions fo;
        fo.hook = &hook;
        if (!opt.positions.empty()) fo.positions = opt.positions.subspan(off, n);
        const bool final_chunk = off + n == T;
        fo.last_only = opt.last_only;
        fo.skip_logits = opt.skip_logits || (opt.last_only && !final_chunk);
        fo.layers = opt.layers;
        rh.set_chunk(off, n);
        Tensor3 lg = m->forward(part, cache, fo);
        if (!fo.skip_logits) {
            const std::size_t rows = opt.last_only ? 1 : n, dst0 = opt.last_only ? 0 : off;
            for (std::size_t b = 0; b < B; ++b)
                std::copy(lg.data() + b * rows * V, lg.data() + (b + 1) * rows * V,
                          res.logits.data() + (b * res.logits.shape()[1] + dst0) * V);
        }
        if (every != 0 && !final_chunk)
            for (const Intervention& v : interventions)
                if (std::holds_alternative<StateResetEvery>(v.action))
                    for (LayerIndex l : v.layers)
                        cache.visit(l, [](auto& c) {
                            if (auto* r = recurrent_part(c)) r->zero_state();
                        });
    }
    rh.collect(res.captures);
    res.coverage = rh.coverage();
    return res;
}

/// As above on a fresh cache (a run with no history).
template <class Model>
RunResult run(const Model& model, const TokenBatch& ids, const std::vector<Intervention>& interventions = {},
              const RunOptions& opt = {}) {
    auto cache = model.new_cache(ids.batch);
    return run(model, cache, ids, interventions, opt);
}

/// One forward on a fresh cache; returns clones of the listed sites ([B, |P|, D] each, named
/// SiteRef::name()). The logits are not computed, and without interventions the layers after
/// the deepest site's are not run (they cannot change it: a capture of resid_post(2) in a model
/// of 24 layers runs 3), the same bits as a whole forward.
template <class Model>
NamedTensors capture(const Model& model, const TokenBatch& ids, const std::vector<SiteRef>& sites,
                     const std::vector<Intervention>& interventions = {}) {
    RunOptions o;
    o.capture = sites;
    bool head_site = false;  // final_norm fires inside the head, so the head must run
    for (const SiteRef& s : sites) head_site = head_site || s.site == Site::final_norm;
    for (const Intervention& v : interventions) head_site = head_site || v.site == Site::final_norm;
    o.skip_logits = !head_site;
    if (o.skip_logits && interventions.empty()) {
        std::size_t need = 0;  // the embed site fires before any layer
        for (const SiteRef& s : sites)
            if (s.layer != no_layer) need = std::max(need, static_cast<std::size_t>(s.layer) + 1);
        o.layers = need;
    }
    return run(model, ids, interventions, o).captures;
}

}  // namespace hylens
