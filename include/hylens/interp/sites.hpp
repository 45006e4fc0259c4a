#pragma once
// Site descriptors: which activation, at which decoder layer, at which
// positions of a run. A SiteRef names one tensor of one forward; Positions says which rows.
//
//   site::mixer_out(13)                          every position of layer 13's mixer output
//   site::mixer_out(13, Positions::last())       its final row only
//   site::layer_write(4)                         resid_post(4) - resid_pre(4)

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <optional>     // std::optional
#include <string>       // std::string, std::to_string
#include <type_traits>  // std::remove_cvref_t
#include <utility>      // std::move
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "../core/indices.hpp"
#include "../layers/hooks.hpp"

namespace hylens {

/// A set of positions of one run, as indices into the run's tokens: 0 is the first token the
/// run feeds, -1 its last (negative indices count from the end). Positions are resolved
/// against the run's length T when the run starts; an index outside [-T, T) is a ShapeError.
class Positions {
public:
    /// Every position [0, T).
    static Positions all() { return Positions(true, {}); }
    /// The final position {T-1}.
    static Positions last() { return Positions(false, {-1}); }
    /// The listed positions (negative = from the end), in the given order.
    static Positions at(std::vector<std::int64_t> idx) { return Positions(false, std::move(idx)); }
    /// The half-open range [a, b) (negative ends count from T).
    static Positions range(std::int64_t a, std::int64_t b) {
        Positions p(false, {});
        p.range_ = true;
        p.idx_ = {a, b};
        return p;
    }

    bool is_all() const noexcept { return all_; }

    /// The row indices in [0, T), in order; throws ShapeError when an index is out of range or
    /// two name one row.
    std::vector<std::size_t> resolve(std::size_t T) const {
        std::vector<std::size_t> out;
        const auto fix = [T](std::int64_t i, bool end) {
            const std::int64_t t = static_cast<std::int64_t>(T);
            const std::int64_t r = i < 0 ? i + t : i;
            check<ShapeError>(r >= 0 && (end ? r <= t : r < t), "[Positions] index ", i, " is outside a run of ", T,
                              " tokens");
            return static_cast<std::size_t>(r);
        };
        if (all_) {
            for (std::size_t t = 0; t < T; ++t) out.push_back(t);
        } else if (range_) {
            const std::size_t a = fix(idx_[0], true), b = fix(idx_[1], true);
            check<ShapeError>(a <= b, "[Positions] empty range [", idx_[0], ", ", idx_[1], ") in a run of ", T);
            for (std::size_t t = a; t < b; ++t) out.push_back(t);
        } else {
            std::vector<bool> seen(T, false);
            for (std::int64_t i : idx_) {
                const std::size_t r = fix(i, false);
                // A row listed twice had one slot: a capture kept one copy and a patch one donor row.
                check<ShapeError>(!seen[r], "[Positions] ", describe(), " names row ", r, " of a run of ", T,
                                  " tokens twice");
                seen[r] = true;
                out.push_back(r);
            }
        }
        return out;
    }

    std::string describe() const {
        if (all_) return "all";
        std::string s = range_ ? "[" : "{";
        for (std::size_t i = 0; i < idx_.size(); ++i) {  // not s += (i ? "," : "") + ...: g++ 12's -Wrestrict
            if (i) s += ',';                                 // false positive at -O3 (GCC bug 105651)
            s += std::to_string(idx_[i]);
        }
        return s + (range_ ? ")" : "}");
    }

private:
    Positions(bool all, std::vector<std::int64_t> idx) : all_(all), idx_(std::move(idx)) {}
    bool all_ = false;
    bool range_ = false;
    std::vector<std::int64_t> idx_;
};

/// One tensor of one forward: a hook site at a layer (`no_layer` for embed and final_norm), over a
/// set of positions. `write` marks the derived site layer_write = resid_post - resid_pre
/// (then `site` is Site::resid_post).
struct SiteRef {
    Site site = Site::resid_post;
    LayerIndex layer = no_layer;
    Positions positions = Positions::all();
    bool write = false;

    /// "mixer_out.13", "layer_write.4", "embed": the name used in capture files.
    std::string name() const {
        std::string n = write ? "layer_write" : std::string(site_name(site));
        return layer != no_layer ? n + "." + std::to_string(layer) : n;
    }
};

/// Site descriptors, one per activation site.
namespace site {
// Token embedding after the family's embedding multiplier (Granite / Falcon-H1 scale it).
inline SiteRef embed(Positions p = Positions::all()) { return {Site::embed, no_layer, std::move(p), false}; }
inline SiteRef resid_pre(LayerIndex l, Positions p = Positions::all()) { return {Site::resid_pre, l, std::move(p), false}; }
inline SiteRef resid_post(LayerIndex l, Positions p = Positions::all()) { return {Site::resid_post, l, std::move(p), false}; }
inline SiteRef mixer_in(LayerIndex l, Positions p = Positions::all()) { return {Site::mixer_in, l, std::move(p), false}; }
/// Token-mixer output before any residual multiplier (parallel layers: the scaled sum).
inline SiteRef mixer_out(LayerIndex l, Positions p = Positions::all()) { return {Site::mixer_out, l, std::move(p), false}; }
/// Parallel layers: the attention half before attention_out_multiplier.
inline SiteRef attn_out(LayerIndex l, Positions p = Positions::all()) { return {Site::attn_out, l, std::move(p), false}; }
/// Parallel layers: the Mamba half before ssm_out_multiplier.
inline SiteRef ssm_out(LayerIndex l, Positions p = Positions::all()) { return {Site::ssm_out, l, std::move(p), false}; }
inline SiteRef mlp_out(LayerIndex l, Positions p = Positions::all()) { return {Site::mlp_out, l, std::move(p), false}; }
/// resid_post(l) - resid_pre(l): the whole layer's write (mixer plus MLP).
inline SiteRef layer_write(LayerIndex l, Positions p = Positions::all()) { return {Site::resid_post, l, std::move(p), true}; }
/// Projections before q/k norm and RoPE, [.., heads*head_dim]; q without the gate half.
inline SiteRef q(LayerIndex l, Positions p = Positions::all()) { return {Site::q, l, std::move(p), false}; }
inline SiteRef k(LayerIndex l, Positions p = Positions::all()) { return {Site::k, l, std::move(p), false}; }
inline SiteRef v(LayerIndex l, Positions p = Positions::all()) { return {Site::v, l, std::move(p), false}; }
/// Softmax probabilities; captured as [B, Hq, |P|, Tk] (P = query positions).
inline SiteRef attn_probs(LayerIndex l, Positions p = Positions::all()) { return {Site::attn_probs, l, std::move(p), false}; }
/// o_proj input (after Qwen's output gate); head h is columns [h*hd, (h+1)*hd).
inline SiteRef head_out(LayerIndex l, Positions p = Positions::all()) { return {Site::head_out, l, std::move(p), false}; }
/// out_proj input of a DeltaNet / Mamba-2 mixer (after its gated norm); head h is columns
/// [h*dv, (h+1)*dv) (DeltaNet value heads) or [h*P, (h+1)*P) (Mamba-2 heads).
inline SiteRef lin_head_out(LayerIndex l, Positions p = Positions::all()) {
    return {Site::lin_head_out, l, std::move(p), false};
}
/// DeltaNet log decay g_t and write strength beta_t per value head; Mamba-2 clamped dt.
inline SiteRef gate_g(LayerIndex l, Positions p = Positions::all()) { return {Site::gate_g, l, std::move(p), false}; }
inline SiteRef gate_beta(LayerIndex l, Positions p = Positions::all()) { return {Site::gate_beta, l, std::move(p), false}; }
inline SiteRef gate_dt(LayerIndex l, Positions p = Positions::all()) { return {Site::gate_dt, l, std::move(p), false}; }
inline SiteRef final_norm(Positions p = Positions::all()) { return {Site::final_norm, no_layer, std::move(p), false}; }
}  // namespace site

/// What a decoder layer's token mixer is, for choosing sites generically.
enum class MixerChannel {
    recurrent,  ///< the DeltaNet / Mamba-2 mixer (or half of a parallel layer)
    attention,  ///< the softmax-attention mixer (or half)
};

namespace detail {
/// Calls f(mixer) for each token mixer of a decoder layer (both halves of a parallel layer).
template <class Kind, class F>
void for_each_mixer(const Kind& k, F&& f) {
    if constexpr (requires { k.first(); k.second(); }) {
        f(k.first());
        f(k.second());
    } else {
        f(k);
    }
}
}  // namespace detail

/// The site holding layer l's mixer output for one channel: mixer_out on single-mixer layers,
/// ssm_out / attn_out on parallel layers (Falcon-H1); nullopt when layer l has no mixer of
/// that channel. `Stack` is a HybridStack.
template <class Stack>
std::optional<Site> find_mixer_site(const Stack& stack, LayerIndex l, MixerChannel ch) {
    check<ShapeError>(l < stack.size(), "[mixer_site] layer ", layer_name(l), " out of ", stack.size());
    std::optional<Site> out;
    stack.visit(l, [&](const auto& layer) {
        using K = typename std::remove_cvref_t<decltype(layer)>::kind_type;
        const Site want = ch == MixerChannel::attention ? Site::attn_out : Site::ssm_out;
        if constexpr (requires { typename K::first_kind; typename K::second_kind; }) {
            // Parallel layer: each half fires its own out_site before its multiplier.
            if (K::first_kind::out_site == want || K::second_kind::out_site == want) out = want;
        } else if constexpr (requires { K::out_site; }) {
            if (K::out_site == want) out = Site::mixer_out;
        }
    });
    return out;
}

/// As find_mixer_site, but a ShapeError names the layer when it has no such mixer.
template <class Stack>
Site mixer_site(const Stack& stack, LayerIndex l, MixerChannel ch) {
    const std::optional<Site> s = find_mixer_site(stack, l, ch);
    check<ShapeError>(s.has_value(), "[mixer_site] layer ", l, " has no ",
                      ch == MixerChannel::attention ? "attention" : "recurrent", " mixer");
    return *s;
}

/// Query heads of layer l's softmax-attention mixer (0 when it has none).
template <class Stack>
std::size_t attention_heads(const Stack& stack, LayerIndex l) {
    check<ShapeError>(l < stack.size(), "[attention_heads] layer ", layer_name(l), " out of ", stack.size());
    std::size_t h = 0;
    stack.visit(l, [&](const auto& layer) {
        detail::for_each_mixer(layer.mixer(), [&](const auto& m) {
            if constexpr (requires { m.config().Hq; m.config().Hkv; }) h = m.config().Hq;
        });
    });
    return h;
}

/// The width D of site s at layer l (`no_layer` for embed and final_norm) when the forward fires
/// it there, its rows then being [B, T, D]; nullopt when it never fires there, so an
/// intervention or a capture at it would never act. Every decoder layer fires resid_pre,
/// mixer_in, mixer_out, mlp_out and resid_post; an attention mixer q, k, v (before q/k norm and
/// RoPE; q without the gate half), attn_probs (width 0 here: its rows are heads x tokens, its
/// width the keys so far) and head_out; a DeltaNet mixer gate_g, gate_beta (one value per value
/// head) and lin_head_out; a Mamba-2 mixer gate_dt (one per head) and lin_head_out; each half of
/// a parallel layer its attn_out or ssm_out; a stitched block resid_pre, mixer_out and
/// resid_post only. tests/interp/test_run.cpp holds this to what the layers fire, on every
/// reference model (and tests/studies_stitch on a stitched one).
template <class Stack>
std::optional<std::size_t> site_width(const Stack& stack, LayerIndex l, Site s) {
    check<ShapeError>(stack.size() > 0, "[site_width] an empty stack");
    check<ShapeError>(l == no_layer || l < stack.size(), "[site_width] layer ", layer_name(l), " out of ", stack.size());
    std::optional<std::size_t> w;
    stack.visit(l == no_layer ? LayerIndex{0} : l, [&](const auto& layer) {
        using K = typename std::remove_cvref_t<decltype(layer)>::kind_type;
        detail::for_each_mixer(layer.mixer(), [&](const auto& m) {
            const auto& c = m.config();
            if (l == no_layer) {
                if (s == Site::embed || s == Site::final_norm) w = c.hidden;
                return;
            }
            // A stitched block (interp/stitch.hpp) fires resid_pre, mixer_out (its write) and
            // resid_post only: its donor layers' sites are not the receiver's.
            if constexpr (requires { typename K::donor_stack_type; }) {
                if (s == Site::resid_pre || s == Site::mixer_out || s == Site::resid_post) w = c.hidden;
                return;
            }
            switch (s) {
                case Site::resid_pre:
                case Site::mixer_in:
                case Site::mixer_out:
                case Site::mlp_out:
                case Site::resid_post: w = c.hidden; return;
                default: break;
            }
            if constexpr (requires { typename K::first_kind; typename K::second_kind; }) {
                using M = std::remove_cvref_t<decltype(m)>;
                if (s == M::out_site) w = c.hidden;
            }
            if constexpr (requires { c.head_dim; c.Hkv; }) {
                if (s == Site::q || s == Site::head_out) w = c.Hq * c.head_dim;
                if (s == Site::k || s == Site::v) w = c.Hkv * c.head_dim;
                if (s == Site::attn_probs) w = 0;
            } else if constexpr (requires { c.dv; c.Hv; }) {
                if (s == Site::gate_g || s == Site::gate_beta) w = c.Hv;
                if (s == Site::lin_head_out) w = c.Vd();
            } else if constexpr (requires { c.P; c.N; }) {
                if (s == Site::gate_dt) w = c.H;
                if (s == Site::lin_head_out) w = c.d_inner();
            }
        });
    });
    return w;
}

/// The sites layer l fires (`no_layer`: embed and final_norm), for messages and listings.
template <class Stack>
std::vector<Site> layer_sites(const Stack& stack, LayerIndex l) {
    std::vector<Site> out;
    for (std::size_t i = 0; i <= static_cast<std::size_t>(Site::final_norm); ++i)
        if (site_width(stack, l, static_cast<Site>(i))) out.push_back(static_cast<Site>(i));
    return out;
}

/// Width of one head at a head-structured site of layer l: q, k, v and head_out use the
/// attention head_dim; lin_head_out uses DeltaNet's dv or Mamba-2's head dim P. Throws
/// ShapeError when layer l has no mixer with that site.
template <class Stack>
std::size_t head_width(const Stack& stack, LayerIndex l, Site s) {
    check<ShapeError>(l < stack.size(), "[head_width] layer ", layer_name(l), " out of ", stack.size());
    std::size_t w = 0;
    stack.visit(l, [&](const auto& layer) {
        detail::for_each_mixer(layer.mixer(), [&](const auto& m) {
            const auto& c = m.config();
            if constexpr (requires { c.head_dim; c.Hkv; }) {
                if (s == Site::q || s == Site::k || s == Site::v || s == Site::head_out) w = c.head_dim;
            } else if constexpr (requires { c.dv; c.Hv; }) {
                if (s == Site::lin_head_out) w = c.dv;
            } else if constexpr (requires { c.P; c.N; }) {
                if (s == Site::lin_head_out) w = c.P;
            }
        });
    });
    check<ShapeError>(w > 0, "[head_width] layer ", l, " has no head-structured site ", site_name(s));
    return w;
}

}  // namespace hylens
