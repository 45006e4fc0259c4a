// The public containers: KVCache / RecurrentCache views are xtensor views of the storage
// itself (pointer identity, writes seen by the owner, shapes and contents equal to the raw
// accessors), captures (NamedTensor) are owning row-major xtensor containers, results hold
// xtensor logits, and the index types keep to the rule of core/indices.hpp (checked at
// compile time).

#include <hylens/core/indices.hpp>
#include <hylens/core/tensor_view.hpp>
#include <hylens/cache/layer_set.hpp>
#include <hylens/interp/circuit.hpp>
#include <hylens/interp/run.hpp>
#include <hylens/interp/stitch.hpp>
#include <hylens/interp/transplant.hpp>
#include <hylens/stack/generate.hpp>

#include "../support/nan_max.hpp"
#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xview.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

using namespace hylens;
using namespace hylens::test;

namespace {

// ---- the index-type rule, at compile time ----
static_assert(std::is_same_v<decltype(TokenBatch::ids), std::vector<std::int64_t>>, "token ids are int64");
static_assert(std::is_same_v<decltype(GenerateResult::ids), std::vector<std::vector<std::int64_t>>>, "generated ids are int64");
static_assert(std::is_same_v<decltype(GenerateOptions::stop_ids), std::vector<std::int64_t>>, "stop ids are int64");
static_assert(std::is_same_v<decltype(RunOptions::positions), std::span<const std::int64_t>>, "positions are int64");
static_assert(std::is_same_v<decltype(SiteRef::layer), LayerIndex>, "a site's layer is a LayerIndex");
static_assert(std::is_same_v<decltype(Intervention::layers), std::vector<LayerIndex>>, "intervention layers are LayerIndex");
static_assert(std::is_same_v<decltype(&LayerSet::contains), bool (LayerSet::*)(LayerIndex) const noexcept>,
              "LayerSet takes LayerIndex");
static_assert(std::is_same_v<decltype(LayerSet().indices()), const std::vector<LayerIndex>&>, "LayerSet holds LayerIndex");
static_assert(std::is_same_v<decltype(std::declval<const Hook&>().wants), std::function<bool(Site, LayerIndex)>>,
              "hooks see LayerIndex");
static_assert(std::is_same_v<decltype(std::declval<const Hook&>().fn),
                             std::function<void(Site, LayerIndex, const ActivationView&, const std::int64_t*)>>,
              "hooks see LayerIndex");
static_assert(std::is_same_v<decltype(ForwardContext::layer), LayerIndex>, "layers know their LayerIndex");
static_assert(std::is_same_v<decltype(site::mixer_out(0)), SiteRef>);
static_assert(std::is_same_v<decltype(&site::mixer_out), SiteRef (*)(LayerIndex, Positions)>, "site descriptors take LayerIndex");
static_assert(std::is_same_v<decltype(&head_zero), Intervention (*)(LayerIndex, std::vector<std::size_t>, Site, Positions)>,
              "intervention factories take LayerIndex");
static_assert(std::is_same_v<decltype(recurrent_layers(std::declval<const QwenLikeStack&>())), std::vector<LayerIndex>>,
              "layer lists are LayerIndex");
static_assert(std::is_same_v<decltype(ReplaceBlock::donor_layers), std::vector<LayerIndex>>, "stitch plans hold LayerIndex");
static_assert(std::is_same_v<decltype(CircuitRoles::reader_layer), LayerIndex>, "circuit roles hold LayerIndex");
static_assert(std::is_same_v<decltype(std::declval<const CausalLM<QwenLikeStack>&>().num_layers()), LayerIndex>,
              "models count LayerIndex");

// ---- logits are xtensor containers ----
static_assert(std::is_same_v<decltype(RunResult::logits), Tensor3>);
static_assert(std::is_same_v<decltype(GenerateResult::prompt_logits), Tensor3>);
static_assert(std::is_same_v<decltype(GenerateResult::step_logits), std::vector<Tensor2>>);
static_assert(std::is_same_v<decltype(std::declval<const CausalLM<QwenLikeStack>&>().forward(
                                 TokenBatch{}, std::declval<CausalLM<QwenLikeStack>::cache_type&>())),
                             Tensor3>);

// ---- views: mutable ones write, const ones do not ----
static_assert(std::is_assignable_v<decltype(std::declval<KVView&>()(0, 0, 0)), float>);
static_assert(!std::is_assignable_v<decltype(std::declval<ConstKVView&>()(0, 0, 0)), float>);
static_assert(!std::is_assignable_v<decltype(std::declval<ConstArrayView&>()(0)), float>);
static_assert(std::is_same_v<decltype(std::declval<const KVCache&>().k_view(0)), ConstKVView>);
static_assert(std::is_same_v<decltype(std::declval<const RecurrentCache&>().state_view(0)), ConstArrayView>);
static_assert(std::is_same_v<NamedTensor, xt::xarray<float, xt::layout_type::row_major>>, "captures are xtensor containers");
static_assert(std::is_same_v<decltype(std::declval<const NamedTensors&>().at("")), const NamedTensor&>);
static_assert(std::is_same_v<decltype(rank_view<3>(std::declval<const NamedTensor&>())), ConstTensorView<3>>);

float value_at(std::size_t b, std::size_t j, std::size_t p, std::size_t d) {
    return static_cast<float>(1000 * b + 100 * j + 10 * p + d) + 0.5f;
}

/// A KV cache of 2 sequences, 3 heads, head_dim 4, 5 filled positions (capacity 16), K =
/// value_at and V = -value_at.
KVCache filled_kv() {
    KVCache c(2, 3, 4);
    c.reserve_more(5);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t p = 0; p < 5; ++p)
                for (std::size_t d = 0; d < 4; ++d) {
                    c.k(b, j)[p * 4 + d] = value_at(b, j, p, d);
                    c.v(b, j)[p * 4 + d] = -value_at(b, j, p, d);
                }
    c.commit(5);
    return c;
}

}  // namespace

TEST_CASE("KVCache::k_view / v_view are the cache's own filled positions, [kv_heads, length, head_dim]") {
    KVCache c = filled_kv();
    REQUIRE(c.capacity() > c.length());  // the views must skip the unfilled capacity
    const KVCache& cc = c;
    for (std::size_t b = 0; b < 2; ++b) {
        auto k = c.k_view(b);
        auto v = cc.v_view(b);
        CHECK(k.shape()[0] == 3);
        CHECK(k.shape()[1] == 5);
        CHECK(k.shape()[2] == 4);
        CHECK(v.size() == 3 * 5 * 4);
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t p = 0; p < 5; ++p)
                for (std::size_t d = 0; d < 4; ++d) {
                    CHECK(&k(j, p, d) == c.k(b, j) + p * 4 + d);  // the element itself, no copy
                    CHECK(&v(j, p, d) == cc.v(b, j) + p * 4 + d);
                    CHECK(v(j, p, d) == -value_at(b, j, p, d));
                }
    }
    // The batch view: [batch, kv_heads, length, head_dim], the same elements.
    auto kb = cc.k_view();
    CHECK(kb.shape()[0] == 2);
    CHECK(kb.shape()[3] == 4);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 3; ++j) CHECK(&kb(b, j, 4, 3) == cc.k(b, j) + 4 * 4 + 3);
    // Evaluating a view gives a contiguous copy with the same values.
    const Tensor4 copy = kb;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t p = 0; p < 5; ++p) CHECK(copy(b, j, p, 2) == value_at(b, j, p, 2));
    CHECK_THROWS_AS((void)c.k_view(2), ShapeError);
    CHECK_THROWS_AS((void)cc.v_view(7), ShapeError);
}

TEST_CASE("writes through a mutable KV view land in the cache, inside the filled positions only") {
    KVCache c = filled_kv();
    const float beyond = -77.0f;  // a capacity slot after the filled positions
    c.k(0, 0)[5 * 4] = beyond;
    c.k(1, 2)[5 * 4 + 3] = beyond;

    c.k_view(1)(2, 3, 1) = 42.0f;
    CHECK(c.k(1, 2)[3 * 4 + 1] == 42.0f);

    // Plain assignment of a whole expression: element by element through the strides.
    auto k0 = c.k_view(0);
    Tensor3 ones = xt::ones<float>({3, 5, 4});
    k0 = ones * 2.0f;
    for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t i = 0; i < 5 * 4; ++i) CHECK(c.k(0, j)[i] == 2.0f);
    CHECK(c.k(0, 0)[5 * 4] == beyond);
    for (std::size_t j = 0; j < 3; ++j) CHECK(c.k(1, j)[0] == value_at(1, j, 0, 0));  // sequence 1 untouched

    // noalias into the batch view; one head zeroed through a slice of the view.
    auto vb = c.v_view();
    xt::noalias(vb) = xt::abs(vb);
    xt::view(c.k_view(), 1, 2, xt::all(), xt::all()) = 0.0f;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t p = 0; p < 5; ++p) CHECK(c.v(b, j)[p * 4 + 1] == value_at(b, j, p, 1));
    for (std::size_t i = 0; i < 5 * 4; ++i) CHECK(c.k(1, 2)[i] == 0.0f);
    CHECK(c.k(1, 2)[5 * 4 + 3] == beyond);
    CHECK(c.k(1, 1)[0] == value_at(1, 1, 0, 0));

    // Another shape is refused, the cache unchanged.
    Tensor3 wrong = xt::zeros<float>({3, 6, 4});
    CHECK_THROWS((c.k_view(1) = wrong));
    CHECK(c.k(1, 0)[0] == value_at(1, 0, 0, 0));
}

TEST_CASE("copying between views: xt::noalias(dst) = src writes the values, dst = src rebinds the view") {
    // K of sequence 0 of one cache into sequence 1 of another (strided views on both sides).
    KVCache src = filled_kv(), dst = filled_kv();
    dst.reserve_more(40);  // another capacity, so other strides
    xt::noalias(dst.k_view(1)) = std::as_const(src).k_view(0);
    for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t i = 0; i < 5 * 4; ++i) CHECK(dst.k(1, j)[i] == src.k(0, j)[i]);
    CHECK(dst.k(0, 1)[3] == value_at(0, 1, 0, 3));

    std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
    TensorView<2> va = make_view<2>(a.data(), {2, 2});
    const TensorView<2> vb = make_view<2>(b.data(), {2, 2});
    xt::noalias(va) = vb;
    CHECK(a == b);
    a = {1, 2, 3, 4};
    va = vb;  // adaptor to adaptor: xtensor rebinds, nothing is written (docs/containers.md)
    CHECK(a == std::vector<float>{1, 2, 3, 4});
    CHECK(va.data() == b.data());
}

TEST_CASE("an empty or unfilled KV cache gives empty views") {
    KVCache none;
    CHECK(none.k_view().size() == 0);
    KVCache c(2, 3, 4);
    CHECK(c.k_view(1).shape()[1] == 0);
    CHECK(c.v_view().size() == 0);
    c.reserve_more(3);
    CHECK(c.k_view(0).size() == 0);  // capacity, but nothing committed
    const Tensor3 empty = c.k_view(0);
    CHECK(empty.size() == 0);
}

TEST_CASE("KVCache growth keeps every filled position and zero-fills the new capacity, copies are deep") {
    KVCache c = filled_kv();
    const Tensor4 k_before = c.k_view(), v_before = c.v_view();  // owning copies [2, 3, 5, 4]
    const std::size_t cap0 = c.capacity();
    c.reserve_more(cap0 + 7);
    REQUIRE(c.capacity() >= 5 + cap0 + 7);
    CHECK(Tensor4(c.k_view()) == k_before);
    CHECK(Tensor4(c.v_view()) == v_before);
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t i = 5 * 4; i < c.capacity() * 4; ++i) {
                CHECK(c.k(b, j)[i] == 0.0f);
                CHECK(c.v(b, j)[i] == 0.0f);
            }
    KVCache copy = c;
    CHECK(copy == c);
    copy.k_view(1)(2, 4, 3) = -1.0f;
    CHECK(c.k_view(1)(2, 4, 3) == value_at(1, 2, 4, 3));
    CHECK(!(copy == c));
}

TEST_CASE("RecurrentCache::conv_view / state_view are the cache's own conv windows and states") {
    RecurrentCache r(2, 3, 4, {2, 3, 5});
    for (std::size_t b = 0; b < 2; ++b) {
        for (std::size_t i = 0; i < 3 * 4; ++i) r.conv(b)[i] = static_cast<float>(100 * b + i);
        for (std::size_t i = 0; i < 2 * 3 * 5; ++i) r.state(b)[i] = static_cast<float>(1000 * b + i) + 0.25f;
    }
    const RecurrentCache& cr = r;
    for (std::size_t b = 0; b < 2; ++b) {
        auto conv = cr.conv_view(b);
        CHECK(conv.shape()[0] == 3);
        CHECK(conv.shape()[1] == 4);
        CHECK(conv.data() == cr.conv(b));
        CHECK(conv(2, 3) == static_cast<float>(100 * b + 2 * 4 + 3));
        auto st = cr.state_view(b);
        REQUIRE(st.dimension() == 3);
        CHECK(st.shape()[0] == 2);
        CHECK(st.shape()[1] == 3);
        CHECK(st.shape()[2] == 5);
        CHECK(st.data() == cr.state(b));
        CHECK(&st(1, 2, 4) == cr.state(b) + 1 * 15 + 2 * 5 + 4);
    }
    auto all = r.state_view();
    REQUIRE(all.dimension() == 4);
    CHECK(all.shape()[0] == 2);
    CHECK(&all(1, 0, 0, 1) == r.state(1) + 1);
    CHECK(r.conv_view().shape()[0] == 2);
    CHECK(&r.conv_view()(1, 2, 0) == r.conv(1) + 8);

    // Writes go to the cache: scale one state, zero one conv window.
    auto s1 = r.state_view(1);
    s1 = s1 * 2.0f;
    xt::noalias(r.conv_view(0)) = xt::zeros<float>({3, 4});
    CHECK(r.state(1)[7] == 2.0f * (1000.0f + 7.0f + 0.25f));
    CHECK(r.state(0)[7] == 7.25f);
    for (std::size_t i = 0; i < 12; ++i) CHECK(r.conv(0)[i] == 0.0f);
    CHECK(r.conv(1)[0] == 100.0f);
    // Another shape is refused; the cache keeps its values.
    auto conv1 = r.conv_view(1);
    Tensor2 wrong = xt::zeros<float>({4, 4});
    CHECK_THROWS((conv1 = wrong));
    for (std::size_t i = 0; i < 12; ++i) CHECK(r.conv(1)[i] == static_cast<float>(100 + i));
    CHECK_THROWS_AS((void)r.state_view(2), ShapeError);
    CHECK_THROWS_AS((void)cr.conv_view(2), ShapeError);
}

TEST_CASE("RecurrentCache storage: zeros when fresh and after reset, copies are deep, == compares values") {
    RecurrentCache r(2, 3, 4, {2, 3, 5});
    CHECK(xt::all(xt::equal(r.conv_view(), 0.0f)));
    CHECK(xt::all(xt::equal(r.state_view(), 0.0f)));
    r.state_view(1)(1, 2, 4) = 3.5f;
    r.conv_view(0)(2, 3) = -2.0f;
    RecurrentCache copy = r;
    CHECK(copy == r);
    copy.state(1)[29] = 0.0f;  // the element (1, 2, 4) of sequence 1
    CHECK(!(copy == r));
    CHECK(r.state_view(1)(1, 2, 4) == 3.5f);
    r.reset();
    CHECK(r == RecurrentCache(2, 3, 4, {2, 3, 5}));
}

TEST_CASE("cache views of a model's cache: the same values as the raw accessors, writes equal raw writes") {
    const auto m = random_qwen({});
    const TokenBatch ids(std::vector<std::vector<std::int64_t>>{{3, 1, 4, 1, 5, 9}, {2, 7, 1, 8, 2, 8}});
    auto cache = m.prefill(ids);
    auto raw = cache;
    std::size_t seen_kv = 0, seen_rec = 0;
    for (std::size_t l = 0; l < m.num_layers(); ++l) {
        cache.visit(l, [&](auto& lc) {
            if (KVCache* kv = kv_part(lc)) {
                ++seen_kv;
                CHECK(kv->length() == 6);
                const Tensor4 k = kv->k_view();
                for (std::size_t b = 0; b < 2; ++b)
                    for (std::size_t j = 0; j < kv->kv_heads(); ++j)
                        for (std::size_t i = 0; i < 6 * kv->head_dim(); ++i)
                            CHECK(k(b, j, i / kv->head_dim(), i % kv->head_dim()) == kv->k(b, j)[i]);
                xt::view(kv->v_view(1), 0, xt::range(2, 4), xt::all()) = 0.0f;  // positions 2, 3 of head 0
            }
            if (RecurrentCache* rc = recurrent_part(lc)) {
                ++seen_rec;
                auto st = rc->state_view(0);
                st = st * 0.5f;
            }
        });
        raw.visit(l, [&](auto& lc) {
            if (KVCache* kv = kv_part(lc))
                for (std::size_t i = 2 * kv->head_dim(); i < 4 * kv->head_dim(); ++i) kv->v(1, 0)[i] = 0.0f;
            if (RecurrentCache* rc = recurrent_part(lc))
                for (std::size_t i = 0; i < rc->state_size(); ++i) rc->state(0)[i] *= 0.5f;
        });
    }
    CHECK(seen_kv == 1);
    CHECK(seen_rec == 3);
    CHECK(cache == raw);  // bitwise: the view writes did exactly what the raw writes did
    // And the edited caches continue identically.
    const TokenBatch next(std::vector<std::vector<std::int64_t>>{{5, 3}, {8, 1}});
    const Tensor3 a = m.forward(next, cache), b = m.forward(next, raw);
    CHECK(a.shape()[0] == 2);
    CHECK(max_abs_diff(a, b) == 0.0f);
}

TEST_CASE("max_abs_diff: a NaN anywhere is NaN, other sizes are infinite") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // The NaN was kept only when no larger finite difference followed it.
    CHECK(std::isnan(max_abs_diff(std::vector<float>{nan, 0.0f}, std::vector<float>{0.0f, 5.0f})));
    CHECK(std::isnan(max_abs_diff(std::vector<float>{1.0f, 2.0f}, std::vector<float>{1.0f, nan})));
    CHECK(max_abs_diff(std::vector<float>{1.0f, 2.0f}, std::vector<float>{1.5f, 4.0f}) == 2.0f);
    CHECK(std::isinf(max_abs_diff(std::vector<float>{1.0f}, std::vector<float>{1.0f, 2.0f})));
    CHECK(std::isnan(hylens::test::nan_max(hylens::test::nan_max(0.0, nan), 3.0)));
}

TEST_CASE("NamedTensor is an owning row-major xtensor container, captures of run() are NamedTensors") {
    const auto m = random_granite({});
    const TokenBatch ids({3, 1, 4, 1, 5});
    RunOptions o;
    o.capture = {site::resid_post(1), site::attn_probs(1, Positions::last())};
    RunResult r = run(m, ids, {}, o);
    const NamedTensor& resid = r.captures.at("resid_post.1");
    REQUIRE(resid.dimension() == 3);
    CHECK(shape_of(resid) == std::vector<std::size_t>{1, 5, 32});
    // Row-major: element (0, t, d) is the flat value t * 32 + d, and flat() is the storage itself.
    CHECK(resid(0, 4, 31) == resid.data()[4 * 32 + 31]);
    CHECK(flat(resid).data() == resid.data());
    CHECK(flat(resid).size() == resid.size());
    CHECK(resid.layout() == xt::layout_type::row_major);  // (xtensor gives size-1 axes stride 0)
    CHECK(resid.strides()[1] == 32);
    CHECK(resid.strides()[2] == 1);
    // rank_view<N> fixes the rank without a copy; another rank is a ShapeError.
    auto v3 = rank_view<3>(resid);
    CHECK(v3.data() == resid.data());
    CHECK(xt::view(v3, 0, 2, xt::all())(7) == resid.data()[2 * 32 + 7]);
    CHECK_THROWS_AS((void)rank_view<2>(resid), ShapeError);
    const NamedTensor& probs = r.captures.at("attn_probs.1");
    CHECK(shape_of(probs) == std::vector<std::size_t>{1, 4, 1, 5});  // [B, Hq, |P|, Tk]

    // Iterating visits the values in row-major order.
    std::size_t i = 0;
    for (float x : resid) CHECK(x == resid.data()[i++]);
    CHECK(i == resid.size());

    // Views of a NamedTensor write the tensor.
    NamedTensor t = NamedTensor::from_shape({2, 3});
    for (std::size_t k = 0; k < 6; ++k) t.data()[k] = static_cast<float>(k);
    rank_view<2>(t)(1, 2) = 50.0f;
    xt::view(t, 0, xt::all()) = 9.0f;
    CHECK(to_vector(t) == std::vector<float>{9, 9, 9, 3, 4, 50});
}

TEST_CASE("NamedTensors::put stores an xtensor expression, a container or row-major values with their shape") {
    KVCache c = filled_kv();
    NamedTensors n;
    n.put("k.0", c.k_view(0));  // a strided view: evaluated into a contiguous row-major container
    const NamedTensor& k = n.at("k.0");
    CHECK(shape_of(k) == std::vector<std::size_t>{3, 5, 4});
    REQUIRE(k.size() == 60);
    for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t i = 0; i < 20; ++i) CHECK(k.data()[j * 20 + i] == c.k(0, j)[i]);
    Tensor2 x = {{1.0f, 2.0f}, {3.0f, 4.0f}};
    n.put("x", x * 2.0f);
    CHECK(to_vector(n.at("x")) == std::vector<float>{2, 4, 6, 8});
    CHECK(shape_of(n.at("x")) == std::vector<std::size_t>{2, 2});
    // A container is moved in: its buffer becomes the stored one.
    NamedTensor y = NamedTensor::from_shape({3});
    y.fill(1.5f);
    const float* buffer = y.data();
    n.put("y", std::move(y));
    CHECK(n.at("y").data() == buffer);
    // Row-major values with a shape; a size that does not match the shape is a ShapeError.
    n.put("z", {2, 2}, std::vector<float>{1, 2, 3, 4});
    CHECK(n.at("z")(1, 0) == 3.0f);
    CHECK_THROWS_AS(n.put("bad", {2, 4}, std::vector<float>{0, 1, 2}), ShapeError);
    CHECK(!n.contains("bad"));
    CHECK_THROWS_AS((void)n.at("missing"), ShapeError);
}

TEST_CASE("one layer type: no_layer names the layer-less sites, negative input layers are errors") {
    CHECK(site::embed().layer == no_layer);
    CHECK(site::final_norm().layer == no_layer);
    CHECK(site::embed().name() == "embed");
    CHECK(site::mixer_out(3).name() == "mixer_out.3");
    CHECK(layer_index(3) == LayerIndex{3});
    CHECK(layer_index(std::int64_t{7}) == LayerIndex{7});
    CHECK(layer_index(LayerIndex{9}) == LayerIndex{9});
    CHECK_THROWS_AS((void)layer_index(-1), ShapeError);
    CHECK_THROWS_AS((void)layer_index(std::int64_t{-5}), ShapeError);
    CHECK(site_layer_index(-1) == no_layer);
    CHECK(site_layer_index(2) == LayerIndex{2});
    CHECK_THROWS_AS((void)site_layer_index(-2), ShapeError);
    CHECK(layer_name(no_layer) == "none");
    CHECK(zero(Site::embed, {no_layer}).describe() == "Zero(embed, layers {none}, positions all)");

    // The hook sees LayerIndex: decoder layers 0..L-1 and no_layer for embed / final_norm.
    const auto m = random_granite({});
    std::vector<LayerIndex> seen_resid;
    std::vector<Site> layerless;
    Hook h;
    h.fn = [&](Site s, LayerIndex l, const ActivationView&, const std::int64_t*) {
        if (s == Site::resid_post) seen_resid.push_back(l);
        if (l == no_layer) layerless.push_back(s);
    };
    auto cache = m.new_cache(1);
    ForwardOptions fo;
    fo.hook = &h;
    (void)m.forward(TokenBatch({3, 1, 4}), cache, fo);
    std::vector<LayerIndex> all(m.num_layers());
    for (LayerIndex l = 0; l < all.size(); ++l) all[l] = l;
    CHECK(seen_resid == all);
    CHECK(layerless == std::vector<Site>{Site::embed, Site::final_norm});

    // A layer outside the model, or no_layer on a layer site, is a ShapeError naming it.
    CHECK_THROWS_AS(run(m, TokenBatch({3, 1, 4}), {zero(Site::mixer_out, {m.num_layers()})}), ShapeError);
    CHECK_THROWS_AS(run(m, TokenBatch({3, 1, 4}), {zero(Site::mixer_out, {no_layer})}), ShapeError);
    CHECK_THROWS_AS(run(m, TokenBatch({3, 1, 4}), {zero(Site::embed, {0})}), ShapeError);
    CHECK_THROWS_AS(capture(m, TokenBatch({3, 1, 4}), {site::resid_post(m.num_layers())}), ShapeError);
    CHECK(run(m, TokenBatch({3, 1, 4}), {zero(Site::embed, {no_layer})}).logits.size() > 0);
}
