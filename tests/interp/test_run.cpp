// run() and capture(): sites, each intervention's exact effect, and the acceptance tests T2
// (patching a run with itself is a bitwise no-op) and T9 (ProjPatch q on a gated model leaves
// the gate half alone), on random Qwen-, Granite- and Falcon-like stacks.

#include <hylens/interp/run.hpp>
#include <hylens/interp/state_patch.hpp>
#include <hylens/models/load.hpp>

#include "../support/random_model.hpp"
#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

using namespace hylens;

namespace {

const TokenBatch kPrompt({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7});
const TokenBatch kOther({2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0});

float max_diff(const Tensor3& a, const Tensor3& b) {
    REQUIRE(a.size() == b.size());
    return max_abs_diff(a, b);
}
float max_diff(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = hylens::test::nan_max(m, std::fabs(a[i] - b[i]));
    return m;
}

/// Every site a layer of this model fires, at every layer (attn_probs / gate_dt excluded: they
/// are observed after their use).
template <class Model>
std::vector<SiteRef> patchable_sites(const Model& m) {
    std::vector<SiteRef> s{site::embed(), site::final_norm()};
    const Site per_layer[] = {Site::resid_pre, Site::mixer_in, Site::mixer_out, Site::attn_out, Site::ssm_out,
                              Site::mlp_out, Site::resid_post, Site::q, Site::k, Site::v, Site::head_out,
                              Site::lin_head_out, Site::gate_g, Site::gate_beta};
    for (std::size_t l = 0; l < m.num_layers(); ++l)
        for (Site st : per_layer) {
            // Keep the sites this layer actually fires (a probe run tells).
            RunOptions o;
            o.capture = {SiteRef{st, l}};
            try {
                (void)run(m, TokenBatch({1, 2}), {}, o);
                s.push_back(o.capture[0]);
            } catch (const ShapeError&) {
            }
        }
    for (LayerIndex l = 0; l < m.num_layers(); ++l) s.push_back(site::layer_write(l));
    return s;
}

template <class Model>
void check_self_patch_is_exact(const Model& m) {
    const auto sites = patchable_sites(m);
    REQUIRE(sites.size() > 3 * m.num_layers());
    auto c0 = m.new_cache(1);
    const Tensor3 plain = m.forward(kPrompt, c0);
    RunOptions o;
    o.capture = sites;
    const RunResult donor = run(m, kPrompt, {}, o);
    CHECK(max_diff(donor.logits, plain) == 0.0f);  // capturing changes nothing
    for (const SiteRef& s : sites) {
        INFO("site " << s.name());
        const RunResult r = run(m, kPrompt, {patch(s, donor.captures)});
        // layer_write is derived: resid_pre + (resid_post - resid_pre) rounds in float32, so
        // its self-patch is exact only to rounding; every other site is bitwise.
        if (s.write)
            CHECK(max_diff(r.logits, plain) <= 1e-5f);
        else
            CHECK(max_diff(r.logits, plain) == 0.0f);
    }
    // All at once, at the final position only (positions select rows of the capture).
    std::vector<Intervention> all;
    RunOptions last;
    for (const SiteRef& s : sites)
        if (!s.write) last.capture.push_back({s.site, s.layer, Positions::last(), false});
    const RunResult d2 = run(m, kPrompt, {}, last);
    for (const SiteRef& s : last.capture) all.push_back(patch(s, d2.captures));
    auto c1 = m.new_cache(1);
    const RunResult r = run(m, c1, kPrompt, all);
    CHECK(max_diff(r.logits, plain) == 0.0f);
    CHECK(c1 == c0);  // and the caches are bitwise the same
}

}  // namespace

TEST_SUITE("interp/run") {

TEST_CASE("T2: patching every site with its own value is a bitwise no-op (layer_write: to rounding)") {
    SUBCASE("qwen-like") { check_self_patch_is_exact(test::random_qwen({})); }
    SUBCASE("granite-like") { check_self_patch_is_exact(test::random_granite({})); }
    SUBCASE("falcon-like") { check_self_patch_is_exact(test::random_falcon({})); }
}

TEST_CASE("run: no interventions is the plain forward, captures have [B, |P|, D] rows") {
    const auto m = test::random_granite({});
    auto c = m.new_cache(1);
    const Tensor3 plain = m.forward(kPrompt, c);
    CHECK(max_diff(run(m, kPrompt).logits, plain) == 0.0f);
    const std::size_t T = kPrompt.T(), H = m.config().hidden;
    const NamedTensors all = capture(m, kPrompt, {site::mixer_out(2), site::resid_post(1), site::attn_probs(1)});
    const NamedTensors last =
        capture(m, kPrompt, {site::mixer_out(2, Positions::last()), site::resid_post(1, Positions::at({0, -2}))});
    CHECK(shape_of(all.at("mixer_out.2")) == std::vector<std::size_t>{1, T, H});
    CHECK(shape_of(last.at("mixer_out.2")) == std::vector<std::size_t>{1, 1, H});
    const auto& a = flat(all.at("mixer_out.2"));
    CHECK(max_diff(flat(last.at("mixer_out.2")), std::vector<float>(a.end() - H, a.end())) == 0.0f);
    const auto& r = flat(all.at("resid_post.1"));
    std::vector<float> want(r.begin(), r.begin() + H);
    want.insert(want.end(), r.end() - 2 * H, r.end() - H);
    CHECK(max_diff(flat(last.at("resid_post.1")), want) == 0.0f);
    // attention probabilities: [B, Hq, T, T], causal rows summing to 1
    const NamedTensor& p = all.at("attn_probs.1");
    REQUIRE(shape_of(p) == std::vector<std::size_t>{1, 4, T, T});
    for (std::size_t h = 0; h < 4; ++h)
        for (std::size_t t = 0; t < T; ++t) {
            double s = 0;
            for (std::size_t k = 0; k < T; ++k) {
                const float v = p(0, h, t, k);
                if (k > t) CHECK(v == 0.0f);
                s += v;
            }
            CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
        }
    // embed and final_norm take layer -1; a site a layer lacks is an error that names it
    CHECK_THROWS_AS(capture(m, kPrompt, {site::ssm_out(0)}), ShapeError);
    CHECK(capture(m, kPrompt, {site::final_norm(Positions::last())}).at("final_norm").shape()[1] == 1);
}

TEST_CASE("capture runs the layers up to its deepest site only, the same bits as a whole run") {
    const auto check_model = [](const auto& m) {
        const std::size_t L = m.num_layers();
        for (std::size_t l = 0; l < L; ++l) {
            CAPTURE(l);
            const std::vector<SiteRef> sites{site::embed(), site::resid_pre(l), site::layer_write(l), site::resid_post(l)};
            RunOptions whole;  // with the head: every layer runs
            whole.capture = sites;
            const RunResult all = run(m, kPrompt, {}, whole);
            const NamedTensors got = capture(m, kPrompt, sites);
            for (const SiteRef& s : sites) {
                CAPTURE(s.name());
                const auto a = flat(all.captures.at(s.name())), g = flat(got.at(s.name()));
                REQUIRE(a.size() == g.size());
                CHECK(std::equal(a.begin(), a.end(), g.begin()));
            }
            // The layers after l did not run: a hook sees none of their sites.
            std::size_t deepest = 0;
            Hook seen;
            seen.wants = [](Site, LayerIndex) { return true; };
            seen.fn = [&](Site, LayerIndex layer, const ActivationView&, const std::int64_t*) {
                if (layer != no_layer) deepest = std::max(deepest, static_cast<std::size_t>(layer));
            };
            auto cache = m.new_cache(1);
            ForwardOptions fo;
            fo.hook = &seen;
            fo.skip_logits = true;
            fo.layers = l + 1;
            (void)m.forward(kPrompt, cache, fo);
            CHECK(deepest == l);
            // Its cache is torn where l is not the last layer (its later layers lack the tokens).
            CHECK(cache.torn().empty() == (l + 1 == L));
        }
        // A part of the layers computes no logits: refused before any forward, the cache untouched.
        {
            auto fresh = m.new_cache(1);
            RunOptions part;
            part.layers = 1;
            part.capture = {site::resid_post(0)};
            CHECK_THROWS_WITH_AS(run(m, fresh, kPrompt, {}, part), doctest::Contains("computes no logits: set skip_logits"),
                                 ShapeError);
            CHECK(fresh.tokens_seen() == 0);
            CHECK(fresh.torn().empty());
        }
        auto cache = m.new_cache(1);
        ForwardOptions fo;
        fo.layers = 1;
        CHECK_THROWS_WITH_AS(m.forward(kPrompt, cache, fo), doctest::Contains("computes no logits: set skip_logits"),
                             ShapeError);
    };
    check_model(test::random_granite({}));
    check_model(test::random_falcon({}));
    check_model(test::random_qwen({}));
}

TEST_CASE("run: a mixer-output patch from another run equals rebuilding the residual by hand") {
    const auto m = test::random_qwen({});
    const NamedTensors donor = capture(m, kOther, {site::mixer_out(1, Positions::last())});
    const RunResult r = run(m, kPrompt, {patch(site::mixer_out(1, Positions::last()), donor)},
                            {{site::resid_pre(1), site::mixer_out(1), site::resid_post(1)}});
    const std::size_t T = kPrompt.T(), H = m.config().hidden;
    // rows before the last are the host's own; the last row holds the donor's
    const NamedTensors host = capture(m, kPrompt, {site::mixer_out(1)});
    const auto& got = flat(r.captures.at("mixer_out.1"));
    CHECK(max_diff(std::vector<float>(got.begin(), got.end() - H),
                   std::vector<float>(flat(host.at("mixer_out.1")).begin(), flat(host.at("mixer_out.1")).end() - H)) == 0.0f);
    CHECK(max_diff(std::vector<float>(got.end() - H, got.end()), flat(donor.at("mixer_out.1"))) == 0.0f);
    // everything downstream moved, the earlier positions' logits did not
    auto c = m.new_cache(1);
    const Tensor3 plain = m.forward(kPrompt, c);
    const std::size_t V = m.config().vocab;
    float early = 0, final = 0;
    for (std::size_t i = 0; i < (T - 1) * V; ++i) early = std::max(early, std::fabs(plain.data()[i] - r.logits.data()[i]));
    for (std::size_t i = (T - 1) * V; i < T * V; ++i) final = std::max(final, std::fabs(plain.data()[i] - r.logits.data()[i]));
    CHECK(early == 0.0f);
    CHECK(final > 1e-3f);
}

TEST_CASE("T9: ProjPatch of q on a gated model changes the query, never the gate half") {
    const auto m = test::random_qwen({});  // layer 2 is gated attention
    REQUIRE(m.stack().kind_of(2) == 1);
    const std::size_t Qd = 4 * 8;
    // One token: softmax over one key is 1 whatever q is, so head_out = v * sigmoid(gate) can
    // only move if the gate were touched.
    const TokenBatch one({7});
    const NamedTensors base = capture(m, one, {site::q(2), site::head_out(2)});
    REQUIRE(flat(base.at("q.2")).size() == Qd);  // the query half only
    std::vector<float> donor(Qd);
    for (std::size_t i = 0; i < Qd; ++i) donor[i] = 3.0f * std::sin(0.7f * static_cast<float>(i) + 1.0f);
    const RunResult r = run(m, one, {proj_patch(2, Site::q, Positions::all(), donor)},
                            {{site::q(2), site::head_out(2)}});
    CHECK(max_diff(flat(r.captures.at("q.2")), donor) == 0.0f);                         // the patch took
    CHECK(max_diff(flat(r.captures.at("head_out.2")), flat(base.at("head_out.2"))) == 0.0f);  // gate untouched
    // With a history the same patch does change the attention output (it is not inert).
    const RunResult r2 = run(m, kPrompt, {proj_patch(2, Site::q, Positions::last(), donor)}, {{site::head_out(2)}});
    const NamedTensors b2 = capture(m, kPrompt, {site::head_out(2)});
    CHECK(max_diff(flat(r2.captures.at("head_out.2")), flat(b2.at("head_out.2"))) > 1e-4f);
    // Per-head patch: only head 1's columns of q change.
    const RunResult r3 = run(m, one, {proj_patch(2, Site::q, Positions::all(), donor, {1})}, {{site::q(2)}});
    const auto& q3 = flat(r3.captures.at("q.2"));
    for (std::size_t i = 0; i < Qd; ++i)
        CHECK(q3[i] == (i / 8 == 1 ? donor[i] : flat(base.at("q.2"))[i]));
}

TEST_CASE("run: HeadZero equals zeroing the projection's input columns in the weights") {
    test::RandomWeights r({});
    test::QwenLikeStack a, b;
    auto attn = r.attention(true);
    auto gdn = r.deltanet();
    // The same layers with columns of head 1 of o_proj / value head 2 of out_proj zeroed.
    auto zero_cols = [](const Weight& w, std::size_t c0, std::size_t n) {
        std::vector<float> v = w.to_vector();
        for (std::size_t row = 0; row < w.rows(); ++row)
            for (std::size_t c = c0; c < c0 + n; ++c) v[row * w.cols() + c] = 0.0f;
        return Weight::from_floats(std::move(v), w.shape());
    };
    AttentionWeights aw = attn.weights();
    aw.o_proj = zero_cols(aw.o_proj, 8, 8);
    DeltaNetWeights dw = gdn.weights();
    dw.out_proj = zero_cols(dw.out_proj, 2 * 6, 6);
    // Same norms, FFNs, embedding and head; only the mixers differ.
    auto d0 = r.decoder(gdn, false, true);
    auto d1 = r.decoder(attn, false, true);
    auto e0 = d0;
    auto e1 = d1;
    e0.mixer() = DeltaNetLayer<>(gdn.config(), dw);
    e1.mixer() = AttentionLayer<>(attn.config(), aw);
    a.push_back(d0);
    a.push_back(d1);
    b.push_back(e0);
    b.push_back(e1);
    const auto ma = r.model(std::move(a));
    auto mb = ma;
    mb.stack() = std::move(b);
    const RunResult z = run(ma, kPrompt, {head_zero(1, {1}), head_zero(0, {2}, Site::lin_head_out)});
    auto cb = mb.new_cache(1);
    const Tensor3 want = mb.forward(kPrompt, cb);
    CHECK(max_diff(z.logits, want) <= 1e-5f);
    CHECK(max_diff(run(ma, kPrompt).logits, want) > 1e-3f);
}

TEST_CASE("run: SkipLayer, Truncate, Zero, Mean and layer_write do what §C.5 says") {
    const auto m = test::random_granite({});
    const std::size_t T = kPrompt.T(), H = m.config().hidden;
    const NamedTensors c = capture(m, kPrompt, {site::resid_pre(1), site::resid_post(1), site::resid_post(2),
                                               site::mixer_out(2), site::final_norm()});
    SUBCASE("SkipLayer: the layer outputs its input") {
        const RunResult r = run(m, kPrompt, {skip_layers({1})}, {{site::resid_post(1)}});
        CHECK(max_diff(flat(r.captures.at("resid_post.1")), flat(c.at("resid_pre.1"))) == 0.0f);
    }
    SUBCASE("Truncate: the residual after the cut goes to the final norm and the head") {
        const RunResult r = run(m, kPrompt, {truncate_after(1)});
        const Tensor3 want = m.head(flat(c.at("resid_post.1")).data(), 1, T);
        CHECK(max_diff(r.logits, want) == 0.0f);
    }
    SUBCASE("Zero and Mean overwrite only the chosen rows") {
        const std::vector<float> mu(H, 0.25f);
        const RunResult r = run(m, kPrompt, {zero(Site::mixer_out, {2}, Positions::at({0})),
                                             mean_ablate(Site::mixer_out, {2}, {mu}, Positions::at({-1}))},
                                {{site::mixer_out(2)}});
        const auto& got = flat(r.captures.at("mixer_out.2"));
        const auto& was = flat(c.at("mixer_out.2"));
        for (std::size_t d = 0; d < H; ++d) {
            CHECK(got[d] == 0.0f);
            CHECK(got[(T - 1) * H + d] == 0.25f);
            CHECK(got[H + d] == was[H + d]);
        }
    }
    SUBCASE("layer_write: resid_post := resid_pre(host) + donor write") {
        const NamedTensors d = capture(m, kOther, {site::layer_write(2, Positions::last())});
        const RunResult r = run(m, kPrompt, {patch(site::layer_write(2, Positions::last()), d)},
                                {{site::resid_pre(2), site::resid_post(2)}});
        const auto& pre = flat(r.captures.at("resid_pre.2"));
        const auto& post = flat(r.captures.at("resid_post.2"));
        const auto& w = flat(d.at("layer_write.2"));
        for (std::size_t k = 0; k < H; ++k) CHECK(post[(T - 1) * H + k] == pre[(T - 1) * H + k] + w[k]);
    }
    SUBCASE("Zero, Mean and ChannelMask on layer_write set the write, not the stream") {
        // They wrote the stream itself: resid_post became 0, mu, or lost the masked channels.
        const auto on_write = [](Action a, Positions p = Positions::all()) {
            return Intervention{Site::resid_post, {2}, std::move(p), std::move(a), true};
        };
        const auto& pre = flat(c.at("resid_post.1"));  // = resid_pre.2, which the actions at layer 2 leave alone
        const auto& post = flat(c.at("resid_post.2"));
        const RunResult z = run(m, kPrompt, {on_write(Zero{})}, {{site::resid_post(2)}});
        CHECK(max_diff(flat(z.captures.at("resid_post.2")), pre) == 0.0f);  // the layer's write removed
        CHECK(max_diff(z.logits, run(m, kPrompt, {skip_layers({2})}).logits) == 0.0f);
        const std::vector<float> mu(H, 0.25f);
        const RunResult mr = run(m, kPrompt, {on_write(Mean{{mu}}, Positions::last())}, {{site::resid_post(2)}});
        const auto& got = flat(mr.captures.at("resid_post.2"));
        for (std::size_t k = 0; k < H; ++k) {
            CHECK(got[(T - 1) * H + k] == pre[(T - 1) * H + k] + 0.25f);
            CHECK(got[k] == post[k]);  // other positions as computed
        }
        ChannelMask mask;
        mask.channels = {0, 3};
        const RunResult cm = run(m, kPrompt, {on_write(mask)}, {{site::resid_post(2)}});
        const auto& masked = flat(cm.captures.at("resid_post.2"));
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t k = 0; k < H; ++k)
                CHECK(masked[t * H + k] == (k == 0 || k == 3 ? pre[t * H + k] : post[t * H + k]));
    }
}

TEST_CASE("run: Surrogate reports its coverage, ChannelMask touches only its channels") {
    const auto m = test::random_qwen({});
    const std::size_t H = m.config().hidden, T = kPrompt.T();
    Surrogate s;
    s.tables.resize(1);
    s.tables[0][5] = std::vector<float>(H, 1.0f);  // token 5 occurs 3 times in kPrompt
    s.fallback = {std::vector<float>(H, -1.0f)};
    Intervention iv{Site::mixer_out, {0}, Positions::all(), s, false};
    const RunResult r = run(m, kPrompt, {iv}, {{site::mixer_out(0)}});
    REQUIRE(r.coverage.size() == 1);
    CHECK(r.coverage[0] == doctest::Approx(3.0 / static_cast<double>(T)));
    const auto& got = flat(r.captures.at("mixer_out.0"));
    for (std::size_t t = 0; t < T; ++t) CHECK(got[t * H] == (kPrompt.at(0, t) == 5 ? 1.0f : -1.0f));
    // A key that is not a token id of the vocabulary never matches: refused, naming it.
    for (const std::int64_t key : {std::int64_t{-1}, static_cast<std::int64_t>(m.config().vocab)}) {
        Surrogate bad = s;
        bad.tables[0][key] = std::vector<float>(H, 2.0f);
        CHECK_THROWS_WITH_AS(run(m, kPrompt, {Intervention{Site::mixer_out, {0}, Positions::all(), bad, false}}, {}),
                             doctest::Contains(("table key " + std::to_string(key) + " is not a token id of the model's vocabulary of " +
                                                std::to_string(m.config().vocab)).c_str()),
                             ShapeError);
    }

    ChannelMask cm;
    cm.channels = {0, 3};
    const NamedTensors base = capture(m, kPrompt, {site::mixer_out(0)});
    const RunResult r2 = run(m, kPrompt, {{Site::mixer_out, {0}, Positions::all(), cm, false}}, {{site::mixer_out(0)}});
    const auto& g2 = flat(r2.captures.at("mixer_out.0"));
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t d = 0; d < H; ++d)
            CHECK(g2[t * H + d] == (d == 0 || d == 3 ? 0.0f : flat(base.at("mixer_out.0"))[t * H + d]));
    CHECK(std::isnan(r2.coverage[0]));

    // The mean fill writes mu's masked channels; the token-mean fill each row's token's table
    // entry (the fallback elsewhere), on the masked channels only, and reports its coverage.
    std::vector<float> mu(H), entry(H), fallback(H);
    for (std::size_t d = 0; d < H; ++d) {
        mu[d] = 0.5f + static_cast<float>(d);
        entry[d] = 2.0f + static_cast<float>(d);
        fallback[d] = -3.0f - static_cast<float>(d);
    }
    ChannelMask mean_mask = cm;
    mean_mask.fill = MaskFill::mean;
    mean_mask.mean = Mean{{mu}};
    ChannelMask token_mask = cm;
    token_mask.fill = MaskFill::token_mean;
    token_mask.table.tables = {{{5, entry}}};
    token_mask.table.fallback = {fallback};
    const RunResult rm = run(m, kPrompt, {{Site::mixer_out, {0}, Positions::all(), mean_mask, false}}, {{site::mixer_out(0)}});
    const RunResult rt = run(m, kPrompt, {{Site::mixer_out, {0}, Positions::all(), token_mask, false}}, {{site::mixer_out(0)}});
    const auto& gm = flat(rm.captures.at("mixer_out.0"));
    const auto& gt = flat(rt.captures.at("mixer_out.0"));
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t d = 0; d < H; ++d) {
            const float computed = flat(base.at("mixer_out.0"))[t * H + d];
            const bool masked = d == 0 || d == 3;
            CHECK(gm[t * H + d] == (masked ? mu[d] : computed));
            CHECK(gt[t * H + d] == (masked ? (kPrompt.at(0, t) == 5 ? entry[d] : fallback[d]) : computed));
        }
    REQUIRE(rt.coverage.size() == 1);
    CHECK(rt.coverage[0] == doctest::Approx(3.0 / static_cast<double>(T)));
}

TEST_CASE("run: StateResetEvery runs in chunks and zeroes only the SSM state, ConvTaps leaves the model intact") {
    const auto m = test::random_qwen({});
    // every = T is one chunk: nothing to reset
    auto c0 = m.new_cache(1);
    const Tensor3 plain = m.forward(kPrompt, c0);
    CHECK(max_diff(run(m, kPrompt, {state_reset_every({0, 3}, kPrompt.T())}).logits, plain) == 0.0f);
    // every = 4 equals feeding chunks by hand and zeroing the states in between
    auto c = m.new_cache(1);
    std::vector<float> want;
    for (std::size_t off = 0; off < kPrompt.T(); off += 4) {
        std::vector<std::int64_t> part;
        for (std::size_t t = off; t < std::min(off + 4, kPrompt.T()); ++t) part.push_back(kPrompt.at(0, t));
        const Tensor3 lg = m.forward(TokenBatch(part), c);
        want.insert(want.end(), lg.begin(), lg.end());
        for (LayerIndex l : {0, 3}) c.visit(l, [](auto& x) {
            if (auto* r = recurrent_part(x)) r->zero_state();
        });
    }
    auto cr = m.new_cache(1);
    const RunResult r = run(m, cr, kPrompt, {state_reset_every({0, 3}, 4)}, {{site::mixer_out(0)}});
    CHECK(max_diff(std::vector<float>(r.logits.begin(), r.logits.end()), want) == 0.0f);
    CHECK(r.captures.at("mixer_out.0").shape()[1] == kPrompt.T());
    CHECK(max_diff(r.logits, plain) > 1e-4f);

    const RunResult ct = run(m, kPrompt, {conv_taps({0})});
    CHECK(max_diff(ct.logits, plain) > 1e-4f);
    auto c2 = m.new_cache(1);
    CHECK(max_diff(m.forward(kPrompt, c2), plain) == 0.0f);  // the model itself was not changed
    CHECK_THROWS_AS(run(m, kPrompt, {conv_taps({2})}), ShapeError);  // layer 2 is attention
}

TEST_CASE("run: bad interventions fail with messages that name them") {
    const auto m = test::random_falcon({});
    CHECK_THROWS_AS(run(m, kPrompt, {zero(Site::mixer_out, {7})}), ShapeError);
    CHECK_THROWS_AS(run(m, kPrompt, {zero(Site::attn_probs, {0})}), UnsupportedError);
    CHECK_THROWS_AS(run(m, kPrompt, {patch(site::mixer_out(0, Positions::last()), std::vector<float>(3))}), ShapeError);
    CHECK_THROWS_AS(run(m, kPrompt, {zero(Site::mixer_out, {0}, Positions::at({99}))}), ShapeError);
    CHECK_THROWS_AS(run(m, kPrompt, {head_zero(0, {9})}), ShapeError);
    try {
        (void)run(m, kPrompt, {zero(Site::mixer_out, {7})});
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("Zero(mixer_out, layers {7}") != std::string::npos);
    }
}

TEST_CASE("state patch: copy_recurrent moves state and (optionally) conv window, nothing else") {
    const auto m = test::random_falcon({});
    const auto a = m.prefill(kPrompt);
    const auto b = m.prefill(kOther);
    auto h = a;
    copy_recurrent(h, b, {1}, false);
    h.visit(1, [&](auto& hc) {
        b.visit(1, [&](const auto& bc) {
            a.visit(1, [&](const auto& ac) {
                const auto* hr = recurrent_part(hc);
                CHECK(std::vector<float>(hr->state(0), hr->state(0) + hr->state_size()) ==
                      std::vector<float>(recurrent_part(bc)->state(0), recurrent_part(bc)->state(0) + hr->state_size()));
                CHECK(std::vector<float>(hr->conv(0), hr->conv(0) + 4) ==
                      std::vector<float>(recurrent_part(ac)->conv(0), recurrent_part(ac)->conv(0) + 4));
                CHECK(*kv_part(hc) == *kv_part(ac));
            });
        });
    });
    auto h2 = a;
    copy_recurrent(h2, a, {0, 1, 2});
    CHECK(h2 == a);
}

TEST_CASE("site_width: the sites each layer fires and their widths, on every reference model") {
    namespace fs = std::filesystem;
    std::size_t models = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models")) {
        if (!fs::exists(entry.path() / "config.json")) continue;
        ++models;
        const AnyModel any = load(entry.path());
        any.visit([&](const auto& m) {
            // What a forward fires, with a hook that wants everything: (layer + 1, site) -> D.
            std::map<std::pair<std::size_t, Site>, std::size_t> fired;
            Hook h;
            h.fn = [&](Site s, LayerIndex l, const ActivationView& v, const std::int64_t*) {
                fired[{l == no_layer ? 0 : l + 1, s}] = s == Site::attn_probs ? 0 : v.D;
            };
            auto cache = m.new_cache(1);
            (void)m.forward(TokenBatch({1, 2, 3}), cache, {.hook = &h});
            std::size_t sites = 0;
            for (std::size_t row = 0; row <= m.num_layers(); ++row)
                for (std::size_t i = 0; i < hylens::detail::kNumSites; ++i) {
                    const Site s = static_cast<Site>(i);
                    const LayerIndex l = row == 0 ? no_layer : row - 1;
                    const auto it = fired.find({row, s});
                    const std::optional<std::size_t> w = site_width(m.stack(), l, s);
                    INFO(entry.path().filename().string(), " layer ", layer_name(l), " site ", site_name(s));
                    CHECK(w.has_value() == (it != fired.end()));
                    if (w && it != fired.end()) CHECK(*w == it->second);
                    sites += w.has_value();
                }
            CHECK(sites == fired.size());
        });
    }
    CHECK(models >= 10);
}

TEST_CASE("run: bad interventions and captures stop before the forward, the cache unchanged") {
    const auto m = test::random_qwen({});
    const std::size_t H = m.config().hidden, T = kPrompt.T();
    // A DeltaNet layer (no q) and an attention layer (no gate_g), found through site_width.
    LayerIndex lin = no_layer, att = no_layer;
    for (LayerIndex l = 0; l < m.num_layers(); ++l) (site_width(m.stack(), l, Site::q) ? att : lin) = l;
    REQUIRE(lin != no_layer);
    REQUIRE(att != no_layer);
    auto cache = m.new_cache(1);
    (void)m.forward(TokenBatch({1, 2, 3}), cache);
    const auto before = cache;
    const auto fails = [&](const std::vector<Intervention>& iv, const std::vector<SiteRef>& caps, const char* says) {
        RunOptions o;
        o.capture = caps;
        CHECK_THROWS_WITH_AS(run(m, cache, kPrompt, iv, o), doctest::Contains(says), ShapeError);
        CHECK(cache == before);  // checked before the forward: nothing ran
    };
    // A site the layer does not fire acted on nothing; now it names the layer's sites.
    fails({zero(Site::q, {lin})}, {}, "has no site q (its sites: resid_pre, mixer_in, mixer_out, mlp_out, resid_post");
    fails({zero(Site::attn_out, {att})}, {}, "has no site attn_out");
    fails({zero(Site::gate_g, {att})}, {}, "has no site gate_g");
    fails({}, {site::q(lin)}, "capture q.");  // a capture too (it failed after the forward)
    // No layer on a decoder-layer site (it read "layer none is outside the model's N layers").
    fails({zero(Site::mixer_out, {no_layer})}, {}, "mixer_out is a site of a decoder layer: give one of 0-");
    fails({}, {SiteRef{Site::mixer_out, no_layer, Positions::all()}}, "mixer_out is a site of a decoder layer");
    // Two captures of one site at different positions: the second overwrote the first.
    fails({}, {site::mixer_out(att, Positions::last()), site::mixer_out(att, Positions::at({0, 1}))}, "is listed twice");
    fails({}, {SiteRef{Site::attn_probs, att, Positions::all(), true}}, "layer_write is a resid_post site");
    // Counts and lengths against the site's width; values finite.
    fails({mean_ablate(Site::mixer_out, {0, 1, 2}, {std::vector<float>(H), std::vector<float>(H)})}, {},
          "2 mean vectors for 3 layers");
    fails({mean_ablate(Site::mixer_out, {0}, {std::vector<float>(H - 1)})}, {}, "mean of " );
    std::vector<float> bad_mu(H, 0.0f);
    bad_mu[3] = std::nanf("");
    fails({mean_ablate(Site::mixer_out, {0}, {bad_mu})}, {}, "mean value 3 is nan");
    fails({patch(site::mixer_out(att, Positions::last()), std::vector<float>(2 * H))}, {}, "donor values, expected [1, 1, ");
    {  // the right count in another layout: an array's shape is checked, not only its size
        Intervention t = patch(site::mixer_out(att, Positions::at({0, 1})), std::vector<float>(2 * H));
        std::get<Set>(t.action).shape = {1, H, 2};
        const std::string h = std::to_string(H);
        fails({t}, {}, ("donor array of shape [1, " + h + ", 2], expected [1, 2, " + h + "]").c_str());
        std::get<Set>(t.action).shape = {H, 2};
        fails({t}, {}, ("donor array of shape [" + h + ", 2]").c_str());
        std::get<Set>(t.action).shape = {3, 2, H};  // a batch of 3 in a run of 1 (and not the count)
        std::get<Set>(t.action).rows[0].resize(6 * H);
        fails({t}, {}, "donor values, expected [1, 2, ");
        std::get<Set>(t.action).shape = {1, 1, 2, H};
        std::get<Set>(t.action).rows[0].resize(2 * H);
        fails({t}, {}, "donor array of shape [1, 1, 2, ");
        {  // final_norm runs in the head: not under skip_logits, and under last_only on one row only
            RunOptions o;
            o.capture = {site::final_norm(Positions::last())};
            o.skip_logits = true;
            CHECK_THROWS_WITH_AS(run(m, cache, kPrompt, {}, o), doctest::Contains("skip_logits does not run"), ShapeError);
            o.skip_logits = false;
            o.last_only = true;
            CHECK_THROWS_WITH_AS(run(m, cache, kPrompt, {}, o), doctest::Contains("last_only runs on the final row alone"),
                                 ShapeError);
            o.capture.clear();  // an intervention there is refused the same way
            CHECK_THROWS_WITH_AS(run(m, cache, kPrompt, {zero(Site::final_norm, {no_layer})}, o),
                                 doctest::Contains("last_only runs on the final row alone"), ShapeError);
            CHECK(cache == before);
        }
        for (const std::vector<std::size_t>& ok : {std::vector<std::size_t>{2 * H}, {2, H}, {1, 2, H}}) {
            std::get<Set>(t.action).shape = ok;
            auto cache = m.new_cache(1);
            CHECK_NOTHROW(run(m, cache, kPrompt, {t}));
        }
    }
    std::vector<float> rows(H, 1.0f);
    rows[0] = INFINITY;
    fails({patch(site::mixer_out(att, Positions::last()), rows)}, {}, "donor value 0 is inf");
    // Heads past the end (SIZE_MAX overflowed the bound's product and wrote past the row).
    fails({head_zero(att, {SIZE_MAX})}, {}, "head 18446744073709551615 out of");
    fails({proj_patch(att, Site::k, Positions::last(), std::vector<float>(site_width(m.stack(), att, Site::k).value()),
                      {SIZE_MAX / 4})},
          {}, "out of");
    // A position named twice had one slot: one row of the capture stayed zero.
    fails({}, {site::resid_post(0, Positions::at({1, 1 - static_cast<std::int64_t>(T)}))}, "names row 1 of a run of");
}

TEST_CASE("run: an empty or moved-from model is an error, not a null read") {
    auto m = test::random_qwen({});
    auto cache = m.new_cache(1);
    auto moved = std::move(m);
    CHECK_THROWS_WITH_AS(m.forward(TokenBatch({1, 2}), cache), doctest::Contains("the model is empty"), Error);
    CHECK_THROWS_WITH_AS(decltype(moved){}.forward(TokenBatch({1, 2}), cache), doctest::Contains("the model is empty"),
                         Error);
    CHECK_THROWS_AS((void)TokenBatch({1, 2}).at(0, 2), ShapeError);
    CHECK_THROWS_AS((void)TokenBatch({1, 2}).at(1, 0), ShapeError);
    CHECK(moved.forward(TokenBatch({1, 2}), cache).shape()[1] == 2);
}

TEST_CASE("run: ConvTaps equals the model with every conv tap but the current token's zeroed by hand") {
    // The conv weight is [C, K]; tap K - 1 multiplies the current token. A copy of the model
    // whose conv weights keep that tap alone, zeroed here by hand, is what run() must compute:
    // the same weights and the same forward, so bitwise.
    const auto zero_old_taps = [](auto& model, std::vector<LayerIndex> layers) {
        for (LayerIndex l : layers)
            model.stack().visit(l, [](auto& layer) {
                using Mixer = std::decay_t<decltype(layer.mixer())>;
                if constexpr (std::is_same_v<Mixer, DeltaNetLayer<>> || std::is_same_v<Mixer, Mamba2Layer<>>) {
                    auto w = layer.mixer().weights();
                    const std::size_t K = layer.mixer().config().conv_width;
                    REQUIRE(K >= 2);
                    REQUIRE(w.conv.size() == layer.mixer().config().conv_channels() * K);
                    for (std::size_t c = 0; c < w.conv.size() / K; ++c)
                        for (std::size_t k = 0; k + 1 < K; ++k) w.conv[c * K + k] = 0.0f;
                    layer.mixer() = Mixer(layer.mixer().config(), std::move(w));
                }
            });
    };
    SUBCASE("qwen-like (DeltaNet)") {
        const auto m = test::random_qwen({});
        auto hand = m;
        zero_old_taps(hand, {0, 3});
        auto c = hand.new_cache(1);
        const Tensor3 want = hand.forward(kPrompt, c);
        CHECK(max_diff(run(m, kPrompt, {conv_taps({0, 3})}).logits, want) == 0.0f);
        CHECK(max_diff(run(m, kPrompt).logits, want) > 1e-4f);  // the taps mattered
    }
    SUBCASE("granite-like (Mamba-2)") {
        const auto m = test::random_granite({});
        auto hand = m;
        zero_old_taps(hand, {2});
        auto c = hand.new_cache(1);
        const Tensor3 want = hand.forward(kPrompt, c);
        CHECK(max_diff(run(m, kPrompt, {conv_taps({2})}).logits, want) == 0.0f);
        CHECK(max_diff(run(m, kPrompt).logits, want) > 1e-4f);
    }
}

TEST_CASE("run: donor rows [B, n, D] give each sequence its own rows, [1, n, D] is broadcast") {
    const auto m = test::random_granite({});
    const std::size_t H = m.config().hidden, n = 2;
    const TokenBatch two(std::vector<std::vector<std::int64_t>>{kPrompt.ids, kOther.ids});
    REQUIRE(two.batch == 2);
    const SiteRef at = site::mixer_out(1, Positions::at({0, -1}));
    // Distinct values per (sequence, position, channel).
    std::vector<float> rows(2 * n * H);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = 0.125f * static_cast<float>(i) - 3.0f;
    const RunResult r = run(m, two, {patch(at, rows)}, {{at}});
    REQUIRE(shape_of(r.captures.at("mixer_out.1")) == std::vector<std::size_t>{2, n, H});
    CHECK(max_diff(flat(r.captures.at("mixer_out.1")), rows) == 0.0f);  // sequence 1 got its own rows
    // One set of rows for the batch: both sequences get it.
    const std::vector<float> one(rows.begin() + static_cast<std::ptrdiff_t>(n * H), rows.end());
    const RunResult rb = run(m, two, {patch(at, one)}, {{at}});
    std::vector<float> both = one;
    both.insert(both.end(), one.begin(), one.end());
    CHECK(max_diff(flat(rb.captures.at("mixer_out.1")), both) == 0.0f);
}

TEST_CASE("run: Mean and Surrogate with one vector or table per layer use layer l's own at layer l") {
    const auto m = test::random_granite({});
    const std::size_t H = m.config().hidden, T = kPrompt.T();
    const std::vector<SiteRef> caps{site::mixer_out(0), site::mixer_out(2)};
    SUBCASE("Mean: mu[j] at layers[j]") {
        const RunResult r = run(m, kPrompt, {mean_ablate(Site::mixer_out, {0, 2}, {std::vector<float>(H, 0.25f),
                                                                                   std::vector<float>(H, -0.5f)})},
                                {caps});
        CHECK(max_diff(flat(r.captures.at("mixer_out.0")), std::vector<float>(T * H, 0.25f)) == 0.0f);
        CHECK(max_diff(flat(r.captures.at("mixer_out.2")), std::vector<float>(T * H, -0.5f)) == 0.0f);
    }
    SUBCASE("Surrogate: tables[j] and fallback[j] at layers[j]") {
        Surrogate s;
        s.tables.resize(2);
        s.tables[0][5] = std::vector<float>(H, 1.0f);  // token 5 occurs 3 times in kPrompt
        s.tables[1][5] = std::vector<float>(H, 2.0f);
        s.fallback = {std::vector<float>(H, -1.0f), std::vector<float>(H, -2.0f)};
        const Intervention iv{Site::mixer_out, {0, 2}, Positions::all(), s, false};
        const RunResult r = run(m, kPrompt, {iv}, {caps});
        std::vector<float> want0(T * H), want2(T * H);
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t d = 0; d < H; ++d) {
                const bool hit = kPrompt.at(0, t) == 5;
                want0[t * H + d] = hit ? 1.0f : -1.0f;
                want2[t * H + d] = hit ? 2.0f : -2.0f;
            }
        CHECK(max_diff(flat(r.captures.at("mixer_out.0")), want0) == 0.0f);
        CHECK(max_diff(flat(r.captures.at("mixer_out.2")), want2) == 0.0f);
        REQUIRE(r.coverage.size() == 1);
        CHECK(r.coverage[0] == doctest::Approx(3.0 / static_cast<double>(T)));  // 6 hits of 2T rows
    }
}

TEST_CASE("run: attn_probs captured under StateResetEvery span every key of the run") {
    const auto m = test::random_qwen({});  // GDN GDN ATTN GDN
    const std::size_t T = kPrompt.T();
    const NamedTensors whole = capture(m, kPrompt, {site::attn_probs(2)});
    const NamedTensor& want = whole.at("attn_probs.2");
    REQUIRE(shape_of(want) == std::vector<std::size_t>{1, 4, T, T});
    // Resetting layer 3, after the attention layer, leaves layer 2's inputs as they were: the
    // chunked capture (chunks of 4, one cache) is the unchunked one, [B, Hq, T, T], to the
    // rounding of the recurrent layers run in chunks.
    const RunResult r = run(m, kPrompt, {state_reset_every({3}, 4)}, {{site::attn_probs(2)}});
    const NamedTensor& p = r.captures.at("attn_probs.2");
    REQUIRE(shape_of(p).size() == 4);
    CHECK(shape_of(p)[3] == T);  // keys: all T of the run, not those of the first chunk
    REQUIRE(shape_of(p) == std::vector<std::size_t>{1, 4, T, T});
    CHECK(max_diff(flat(p), flat(want)) <= 1e-5f);
    // Resetting layer 0 changes the probabilities, not the keys: causal rows over all T keys
    // that sum to 1.
    const RunResult r0 = run(m, kPrompt, {state_reset_every({0}, 4)}, {{site::attn_probs(2)}});
    const NamedTensor& p0 = r0.captures.at("attn_probs.2");
    REQUIRE(shape_of(p0) == std::vector<std::size_t>{1, 4, T, T});
    for (std::size_t h = 0; h < 4; ++h)
        for (std::size_t t = 0; t < T; ++t) {
            double s = 0;
            for (std::size_t k = 0; k < T; ++k) {
                if (k > t) CHECK(p0(0, h, t, k) == 0.0f);
                s += p0(0, h, t, k);
            }
            CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
        }
    CHECK(max_diff(flat(p0), flat(want)) > 1e-4f);
}

}  // TEST_SUITE
