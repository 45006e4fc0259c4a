#pragma once
// Block replacement and stitching. A receiver's
// contiguous block of decoder layers [lo, hi] is replaced by
//     h_out = h_in + g(h_in),   g(h) = M_out( B_donor(M_in(h)) - M_in(h) )
// over the whole sequence, where B_donor is a donor model's unchanged decoder layers and
// M_in / M_out are affine maps between the hidden sizes (ridge fits, interp/ridge.hpp).
//
// A stitched model is an ordinary CausalLM over a new HybridStack type: the receiver's kinds
// plus one kind StitchBlock<Adapter, DonorStack>, which carries the donor's kinds (DonorStack
// = HybridStack<donor kinds...>) and the adapter type. So Granite receiving Qwen's DeltaNet
// block is HybridStack<Mamba2Layer<>, AttentionLayer<>, StitchBlock<LinearAdapter,
// HybridStack<DeltaNetLayer<>, AttentionLayer<>>>>, and running it is the ordinary forward
// (prefill, decode, hooks, interventions, generation). Each stitched block takes ONE layer
// slot: receiver layers after a block shift down by hi - lo (StitchPlan::map_layer).
// The block's cache is the donor block's own StackCache, so a fresh cache is exactly the
// "zero recurrent and conv state" of a fresh start, and decoding continues it. It declares the donor
// layers' channels, and cache surgery (drop, keep_only, state_swap, patch_state) edits them.

#include <algorithm>    // std::copy, std::fill
#include <concepts>     // std::convertible_to
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <span>         // std::span
#include <string>       // std::string
#include <tuple>        // std::tuple
#include <type_traits>  // std::is_same_v
#include <utility>      // std::move
#include <vector>       // std::vector

#include "../cache/layered_cache.hpp"
#include "../core/blas.hpp"
#include "../core/error.hpp"
#include "../layers/decoder.hpp"
#include "../layers/hooks.hpp"
#include "../stack/causal_lm.hpp"
#include "../stack/hybrid_stack.hpp"
#include "../stack/tokens.hpp"
#include "ridge.hpp"
#include "run.hpp"
#include "sites.hpp"

namespace hylens {

/// y = (x - x_mean) W + t_mean for rows x [M, in]: a ridge fit in float32, or the identity.
struct AffineMap {
    std::size_t in = 0, out = 0;
    std::vector<float> W;       ///< [in, out]
    std::vector<float> x_mean;  ///< [in]
    std::vector<float> t_mean;  ///< [out]

    static AffineMap identity(std::size_t n) {
        AffineMap m{n, n, std::vector<float>(n * n, 0.0f), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
        for (std::size_t i = 0; i < n; ++i) m.W[i * n + i] = 1.0f;
        return m;
    }
    static AffineMap from_ridge(const Ridge& r) {
        AffineMap m{r.in_dim(), r.out_dim(), {}, {}, {}};
        m.W.assign(r.W().begin(), r.W().end());
        m.x_mean.assign(r.x_mean().begin(), r.x_mean().end());
        m.t_mean.assign(r.t_mean().begin(), r.t_mean().end());
        return m;
    }
    /// y [M, out] from x [M, in].
    void apply(const float* x, std::size_t M, float* y) const {
        std::vector<float> xc(M * in);
        for (std::size_t r = 0; r < M; ++r)
            for (std::size_t c = 0; c < in; ++c) xc[r * in + c] = x[r * in + c] - x_mean[c];
        for (std::size_t r = 0; r < M; ++r) std::copy(t_mean.begin(), t_mean.end(), y + r * out);
        blas::gemm(false, false, M, out, in, 1.0f, xc.data(), in, W.data(), out, 1.0f, y, out);
    }
};

/// No adapter: the donor layers run on the receiver's residual as it is. Only a self-stitch
/// (donor and receiver of one stack type, equal hidden sizes) may use it; see stitch().
struct NoAdapter {
    static constexpr bool maps_hidden = false;
};

/// M_in (receiver hidden -> donor hidden) and M_out (donor hidden -> receiver hidden).
struct LinearAdapter {
    static constexpr bool maps_hidden = true;
    AffineMap in;
    AffineMap out;
};

/// What an adapter must provide: whether it maps between hidden sizes (and then `in`/`out`).
template <class A>
concept StitchAdapter = requires {
    { A::maps_hidden } -> std::convertible_to<bool>;
} && (!A::maps_hidden || requires(const A& a) {
    { a.in } -> std::convertible_to<AffineMap>;
    { a.out } -> std::convertible_to<AffineMap>;
});

template <class S>
struct StitchBlockCache {
    S inner;
    struct channels {  // the donor block's channels: surgery reaches its layers (cache/parts.hpp)
        template <class C>
        static constexpr bool has = stack_has_channel<S, C>;
    };
    friend bool operator==(const StitchBlockCache&, const StitchBlockCache&) = default;
};

struct StitchBlockConfig {
    std::size_t hidden = 0;        ///< receiver hidden size
    std::size_t donor_hidden = 0;  ///< donor hidden size
    bool zero_mixers = false;      ///< the donor layers' mixer outputs are zeroed (only their MLPs run)
};

/// A donor block as a layer kind of the receiver's stack: out = g(x) on the raw residual x.
template <StitchAdapter Adapter, class DonorStack>
class StitchBlock {
public:
    using adapter_type = Adapter;
    using donor_stack_type = DonorStack;
    using cache_type = StitchBlockCache<typename DonorStack::cache_type>;
    using config_type = StitchBlockConfig;
    static constexpr const char* kind_name = "stitch";

    StitchBlock() = default;
    StitchBlock(DonorStack block, Adapter adapter, StitchBlockConfig cfg)
        : block_(std::move(block)), a_(std::move(adapter)), c_(cfg) {
        if constexpr (Adapter::maps_hidden) {
            check<ShapeError>(a_.in.in == c_.hidden && a_.in.out == c_.donor_hidden && a_.out.in == c_.donor_hidden &&
                                  a_.out.out == c_.hidden,
                              "[StitchBlock] adapter maps ", a_.in.in, " -> ", a_.in.out, " and ", a_.out.in, " -> ",
                              a_.out.out, ", expected ", c_.hidden, " -> ", c_.donor_hidden, " and back");
        } else {
            check<ShapeError>(c_.hidden == c_.donor_hidden, "[StitchBlock] without an adapter the donor hidden size (",
                              c_.donor_hidden, ") must equal the receiver's (", c_.hidden, ")");
        }
    }

    const StitchBlockConfig& config() const noexcept { return c_; }
    const DonorStack& block() const noexcept { return block_; }
    const Adapter& adapter() const noexcept { return a_; }
    cache_type new_cache(std::size_t batch) const { return {block_.new_cache(batch)}; }

    /// out [B*T, hidden] = g(x) for the raw residual x [B*T, hidden].
    void forward(const float* x, std::size_t B, std::size_t T, float* out, cache_type& cache,
                 const ForwardContext& ctx) const {
        const std::size_t M = B * T, Hr = c_.hidden, Hd = c_.donor_hidden;
        std::vector<float> u(M * Hd);  // M_in(x) [M, Hd]
        if constexpr (Adapter::maps_hidden)
            a_.in.apply(x, M, u.data());
        else
            std::copy(x, x + M * Hd, u.data());
        std::vector<float> y = u;  // the donor block runs on it in place
        Hook zero;
        zero.wants = [](Site s, LayerIndex) { return s == Site::mixer_out; };
        zero.fn = [](Site, LayerIndex, const ActivationView& v, const std::int64_t*) {
            for (std::size_t b = 0; b < v.B; ++b)
                for (std::size_t t = 0; t < v.T; ++t) std::fill(v.row(b, t), v.row(b, t) + v.D, 0.0f);
        };
        // The donor's own layer numbers mean nothing to the receiver's hooks: none are passed in.
        block_.forward(y.data(), B, T, cache.inner, ctx.positions, c_.zero_mixers ? &zero : nullptr);
        for (std::size_t i = 0; i < M * Hd; ++i) y[i] -= u[i];  // donor write B(u) - u
        if constexpr (Adapter::maps_hidden)
            a_.out.apply(y.data(), M, out);
        else
            std::copy(y.begin(), y.end(), out);
        (void)Hr;
    }

private:
    DonorStack block_;
    Adapter a_;
    StitchBlockConfig c_;
};

/// The decoder layer of a stitched block: h <- h + g(h). It fires resid_pre, mixer_out (= the
/// block write g) and resid_post, so captures and interventions see it like any layer.
template <class Adapter, class DonorStack>
class DecoderLayer<StitchBlock<Adapter, DonorStack>> {
public:
    using kind_type = StitchBlock<Adapter, DonorStack>;
    using cache_type = typename kind_type::cache_type;

    DecoderLayer() = default;
    explicit DecoderLayer(kind_type block) : block_(std::move(block)) {
        c_.hidden = block_.config().hidden;
    }

    const DecoderConfig& config() const noexcept { return c_; }
    const kind_type& mixer() const noexcept { return block_; }
    kind_type& mixer() noexcept { return block_; }
    cache_type new_cache(std::size_t batch) const { return block_.new_cache(batch); }

    void forward(float* h, std::size_t B, std::size_t T, cache_type& cache, const ForwardContext& ctx) const {
        const std::size_t H = c_.hidden, M = B * T;
        ctx.fire(Site::resid_pre, h, B, T, H, H);
        std::vector<float> g(M * H);
        block_.forward(h, B, T, g.data(), cache, ctx);
        ctx.fire(Site::mixer_out, g.data(), B, T, H, H);
        for (std::size_t i = 0; i < M * H; ++i) h[i] += g[i];
        ctx.fire(Site::resid_post, h, B, T, H, H);
    }

private:
    kind_type block_;
    DecoderConfig c_;
};

namespace detail {
template <class Stack, class Block>
struct append_kind;
template <class... Ks, class Block>
struct append_kind<HybridStack<Ks...>, Block> {
    using type = HybridStack<Ks..., Block>;
};
}  // namespace detail

/// The stack type of a receiver of type RecvStack carrying blocks of a DonorStack model.
template <class RecvStack, class DonorStack, class Adapter>
using StitchedStack = typename detail::append_kind<RecvStack, StitchBlock<Adapter, DonorStack>>::type;

/// One replaced block: receiver layers [lo, hi] (inclusive) become one block made of the
/// donor's layers `donor_layers`, applied in order (exp34's "seq" mode lists the
/// layers on both sides of a softmax layer it skips).
struct ReplaceBlock {
    LayerIndex lo = 0, hi = 0;
    std::vector<LayerIndex> donor_layers;
    bool zero_mixers = false;
};

/// Layer numbering of a stitched model: blocks take one slot each, so a receiver layer after a
/// block moves down by the block's hi - lo.
struct StitchPlan {
    std::vector<ReplaceBlock> blocks;  ///< in receiver order, non-overlapping

    /// The stitched model's index of receiver layer l (no_layer when l lies inside a block but
    /// is not its first layer; the block's own slot is its lo).
    LayerIndex map_layer(LayerIndex l) const {
        LayerIndex shift = 0;
        for (const ReplaceBlock& b : blocks) {
            if (l > b.lo && l <= b.hi) return no_layer;
            if (l > b.hi) shift += b.hi - b.lo;
        }
        return l - shift;
    }
};

/// Builds the stitched model: the receiver with each block of `plan` replaced by a StitchBlock
/// of the donor's layers and its adapter (adapters[i] for plan.blocks[i]). Stitching a model of
/// another stack type needs an adapter type that maps hidden sizes (LinearAdapter).
template <class Adapter, class RecvModel, class DonorModel>
CausalLM<StitchedStack<typename RecvModel::stack_type, typename DonorModel::stack_type, Adapter>> stitch(
    const RecvModel& recv, const StitchPlan& plan, const DonorModel& donor, const std::vector<Adapter>& adapters) {
    using RecvStack = typename RecvModel::stack_type;
    using DonorStack = typename DonorModel::stack_type;
    static_assert(StitchAdapter<Adapter>, "hylens: the adapter of a stitched block must be NoAdapter or LinearAdapter "
                                          "(a type with maps_hidden, and in / out AffineMaps when it maps)");
    static_assert(Adapter::maps_hidden || std::is_same_v<RecvStack, DonorStack>,
                  "hylens: stitching a block of a model of another stack type needs an adapter between the hidden "
                  "sizes (LinearAdapter, fitted by fit_stitch); NoAdapter fits only a self-stitch, where the hidden "
                  "sizes are equal");
    using Block = StitchBlock<Adapter, DonorStack>;
    check<ShapeError>(adapters.size() == plan.blocks.size(), "[stitch] ", adapters.size(), " adapters for ",
                      plan.blocks.size(), " blocks");
    const LayerIndex L = recv.num_layers(), Ld = donor.num_layers();
    for (std::size_t i = 0; i < plan.blocks.size(); ++i) {
        const ReplaceBlock& b = plan.blocks[i];
        check<ShapeError>(b.lo <= b.hi, "[stitch] block [", b.lo, ", ", b.hi, "] is reversed (first layer after the last)");
        check<ShapeError>(b.hi < L, "[stitch] block [", b.lo, ", ", b.hi, "] is not inside the receiver's ", L, " layers");
        check<ShapeError>(i == 0 || plan.blocks[i - 1].hi < b.lo, "[stitch] blocks must be in order and disjoint");
        check<ShapeError>(!b.donor_layers.empty(), "[stitch] block [", b.lo, ", ", b.hi, "] has no donor layers");
        for (LayerIndex d : b.donor_layers)
            check<ShapeError>(d < Ld, "[stitch] donor layer ", layer_name(d), " out of ", Ld);
    }
    StitchedStack<RecvStack, DonorStack, Adapter> st;
    std::size_t next = 0;
    for (LayerIndex l = 0; l < L; ++l) {
        if (next < plan.blocks.size() && l == plan.blocks[next].lo) {
            const ReplaceBlock& b = plan.blocks[next];
            DonorStack blk;
            for (LayerIndex d : b.donor_layers)
                donor.stack().visit(d, [&](const auto& layer) { blk.push_back(layer); });
            StitchBlockConfig c{recv.config().hidden, donor.config().hidden, b.zero_mixers};
            st.push_back(DecoderLayer<Block>(Block(std::move(blk), adapters[next], c)));
            l = b.hi;
            ++next;
            continue;
        }
        recv.stack().visit(l, [&](const auto& layer) { st.push_back(layer); });
    }
    return CausalLM<StitchedStack<RecvStack, DonorStack, Adapter>>(
        recv.config(), recv.embedding(), std::move(st), recv.final_norm(),
        recv.tied_embeddings() ? Weight() : recv.lm_head());
}

/// run_block (C.7): the donor's decoder layers `layers`, in order, on X [B, T, H_donor] with a
/// fresh cache (zero recurrent and conv state) at positions 0..T-1; returns the output rows.
/// zero_mixers zeroes every mixer output (only the MLPs run).
template <class Model>
std::vector<float> run_block(const Model& donor, const std::vector<LayerIndex>& layers, std::span<const float> X,
                             std::size_t B, std::size_t T, bool zero_mixers = false) {
    const std::size_t H = donor.config().hidden;
    check<ShapeError>(X.size() == B * T * H, "[run_block] X has ", X.size(), " values, expected [", B, ", ", T, ", ",
                      H, "]");
    typename Model::stack_type blk;
    for (LayerIndex d : layers) {
        check<ShapeError>(d < donor.num_layers(), "[run_block] layer ", layer_name(d), " out of ", donor.num_layers());
        donor.stack().visit(d, [&](const auto& layer) { blk.push_back(layer); });
    }
    const StitchBlock<NoAdapter, typename Model::stack_type> block(std::move(blk), NoAdapter{},
                                                                   {H, H, zero_mixers});
    auto cache = block.new_cache(B);
    std::vector<std::int64_t> pos(T);
    for (std::size_t t = 0; t < T; ++t) pos[t] = static_cast<std::int64_t>(t);
    std::vector<float> write(X.size());
    block.forward(X.data(), B, T, write.data(), cache, ForwardContext{no_layer, pos.data(), nullptr});
    for (std::size_t i = 0; i < X.size(); ++i) write[i] += X[i];
    return write;
}

/// One fit item: the receiver's tokens, the donor's tokens of the same text, and the aligned
/// token positions (receiver position, donor position) used to fit M_in. Empty
/// donor ids mean the same tokens, every position aligned.
struct StitchItem {
    std::vector<std::int64_t> recv_ids;
    std::vector<std::int64_t> donor_ids{};
    std::vector<std::pair<std::size_t, std::size_t>> aligned{};
};

struct StitchFit {
    LinearAdapter adapter;
    double r2_in = 0.0, r2_out = 0.0;  ///< held-out R^2 of M_in and M_out
    Ridge m_in, m_out;
};

/// fit_stitch (C.7) for one block: M_in on aligned positions (receiver h_in(lo) -> donor
/// residual entering its block), then the donor block on M_in(h_in), then M_out at every
/// position (donor write -> receiver write h_out(hi) - h_in(lo)). `recv` may already be a
/// stitched model (multi-slot fits use the model with the earlier slots replaced); lo / hi
/// are layer numbers of `recv`. With zero_mixers the donor block runs with its mixer outputs
/// zeroed (only its MLPs), as the stitched block of a ReplaceBlock with zero_mixers will at test,
/// and M_out is fitted on that block's write.
template <class RecvModel, class DonorModel>
StitchFit fit_stitch(const RecvModel& recv, LayerIndex lo, LayerIndex hi, const DonorModel& donor, const std::vector<LayerIndex>& donor_layers,
                     const std::vector<StitchItem>& items, Ridge::Options ridge = {}, bool zero_mixers = false) {
    check<ShapeError>(!items.empty() && !donor_layers.empty(), "[fit_stitch] no fit items or no donor layers");
    // A reversed block fitted h_out(hi) - h_in(lo) across the wrong layers without a word.
    check<ShapeError>(lo <= hi, "[fit_stitch] block [", lo, ", ", hi, "] is reversed (first layer after the last)");
    check<ShapeError>(hi < recv.num_layers(), "[fit_stitch] block [", lo, ", ", hi, "] is not inside the receiver's ",
                      recv.num_layers(), " layers");
    for (LayerIndex d : donor_layers)
        check<ShapeError>(d < donor.num_layers(), "[fit_stitch] donor layer ", layer_name(d), " out of ", donor.num_layers());
    const std::size_t Hr = recv.config().hidden, Hd = donor.config().hidden;
    std::vector<float> xin, tin, xout, tout;
    std::vector<std::vector<float>> h_in(items.size()), w_recv(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        const StitchItem& it = items[i];
        const NamedTensors rc = capture(recv, TokenBatch(it.recv_ids), {site::resid_pre(lo), site::resid_post(hi)});
        h_in[i] = to_vector(rc.at(site::resid_pre(lo).name()));
        const auto h_out = flat(rc.at(site::resid_post(hi).name()));
        w_recv[i].resize(h_out.size());
        for (std::size_t k = 0; k < h_out.size(); ++k) w_recv[i][k] = h_out[k] - h_in[i][k];
        const std::vector<std::int64_t>& dids = it.donor_ids.empty() ? it.recv_ids : it.donor_ids;
        const NamedTensors dc = capture(donor, TokenBatch(dids), {site::resid_pre(donor_layers.front())});
        const auto d_in = flat(dc.at(site::resid_pre(donor_layers.front()).name()));
        std::vector<std::pair<std::size_t, std::size_t>> al = it.aligned;
        if (al.empty() && it.donor_ids.empty())
            for (std::size_t t = 0; t < it.recv_ids.size(); ++t) al.push_back({t, t});
        for (const auto& [rp, dp] : al) {
            check<ShapeError>(rp < it.recv_ids.size() && dp < dids.size(), "[fit_stitch] item ", i,
                              ": aligned pair (", rp, ", ", dp, ") out of range");
            xin.insert(xin.end(), h_in[i].begin() + static_cast<std::ptrdiff_t>(rp * Hr),
                       h_in[i].begin() + static_cast<std::ptrdiff_t>((rp + 1) * Hr));
            tin.insert(tin.end(), d_in.begin() + static_cast<std::ptrdiff_t>(dp * Hd),
                       d_in.begin() + static_cast<std::ptrdiff_t>((dp + 1) * Hd));
        }
    }
    StitchFit fit;
    fit.m_in = Ridge::fit(xin, tin, xin.size() / Hr, ridge);
    fit.adapter.in = AffineMap::from_ridge(fit.m_in);
    for (std::size_t i = 0; i < items.size(); ++i) {
        const std::size_t T = items[i].recv_ids.size();
        std::vector<float> x(T * Hd);
        fit.adapter.in.apply(h_in[i].data(), T, x.data());
        const std::vector<float> y = run_block(donor, donor_layers, x, 1, T, zero_mixers);
        for (std::size_t k = 0; k < y.size(); ++k) xout.push_back(y[k] - x[k]);
        tout.insert(tout.end(), w_recv[i].begin(), w_recv[i].end());
    }
    fit.m_out = Ridge::fit(xout, tout, xout.size() / Hd, ridge);
    fit.adapter.out = AffineMap::from_ridge(fit.m_out);
    fit.r2_in = fit.m_in.r2();
    fit.r2_out = fit.m_out.r2();
    return fit;
}

/// Multi-slot stitching in order (exp34): slot k's maps are fitted with slots < k
/// already replaced (a block with zero_mixers is fitted with its donor mixers zeroed). Returns
/// the stitched model and each slot's fit.
template <class RecvModel, class DonorModel>
auto fit_stitch_slots(const RecvModel& recv, const StitchPlan& plan, const DonorModel& donor,
                      const std::vector<StitchItem>& items, Ridge::Options ridge = {}) {
    std::vector<LinearAdapter> adapters;
    std::vector<StitchFit> fits;
    StitchPlan done;
    auto current = stitch<LinearAdapter>(recv, done, donor, adapters);
    for (const ReplaceBlock& b : plan.blocks) {
        const LayerIndex lo = done.map_layer(b.lo), hi = done.map_layer(b.hi);
        check<ShapeError>(lo != no_layer && hi != no_layer, "[fit_stitch_slots] block [", b.lo, ", ", b.hi,
                          "] overlaps an earlier block");
        fits.push_back(fit_stitch(current, lo, hi, donor, b.donor_layers, items, ridge, b.zero_mixers));
        adapters.push_back(fits.back().adapter);
        done.blocks.push_back(b);
        current = stitch<LinearAdapter>(recv, done, donor, adapters);
    }
    return std::make_pair(std::move(current), std::move(fits));
}

/// fit_query_map: a ridge map from donor features at T-1 [n, dx] to the
/// receiver's Address-layer mixer outputs at T-1 [n, |layers| * H], query_map variant.
inline Ridge fit_query_map(const std::vector<float>& donor_features, const std::vector<float>& receiver_targets,
                           std::size_t n) {
    return Ridge::fit(donor_features, receiver_targets, n, {RidgeVariant::query_map, 0});
}

/// SetFinal: the interventions that write f(donor feature) ([|layers| * H], layer-major) into
/// each receiver layer's mixer output at the final position.
inline std::vector<Intervention> set_final(const std::vector<LayerIndex>& layers, const std::vector<float>& mapped,
                                           std::size_t hidden, Site s = Site::mixer_out) {
    check<ShapeError>(mapped.size() == layers.size() * hidden, "[set_final] ", mapped.size(), " values for ",
                      layers.size(), " layers of ", hidden);
    std::vector<Intervention> out;
    for (std::size_t i = 0; i < layers.size(); ++i)
        out.push_back(patch(SiteRef{s, layers[i], Positions::last(), false},
                            std::vector<float>(mapped.begin() + static_cast<std::ptrdiff_t>(i * hidden),
                                               mapped.begin() + static_cast<std::ptrdiff_t>((i + 1) * hidden))));
    return out;
}

}  // namespace hylens
