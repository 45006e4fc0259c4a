// The two identities the circuit studies rest on, on small random models of two families:
//  * a transplant of a prompt onto itself (donor = host) scores exactly as the clean run:
//    logits, D(A-B), ansA / ansB and the reader's attention to the two entries;
//  * a self-stitch with identity adapters equals the model to float32 rounding: the stitched
//    block adds its write g(x) = B(x) - x back onto x, so its output is fl(x + fl(B(x) - x))
//    where the intact model has B(x); per element that is within u (|B(x) - x| + |B(x)|)
//    (u = 2^-24, two roundings), and everything before the block is bit-identical; the logits
//    then differ by a few u relative (checked at 16 u).

#include <hylens/interp/circuit.hpp>
#include <hylens/interp/metrics.hpp>
#include <hylens/interp/stitch.hpp>
#include <hylens/interp/transplant.hpp>

#include "../support/random_ids.hpp"
#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace hylens;

namespace {

// Final-position transplant scores of a run: the reader is head 0 of `reader_layer`, entry A
// = positions [2, 5), entry B = [6, 9), values 7 and 11.
template <class Model>
TransplantScore scores_of(const Model& m, const TokenBatch& ids, int reader_layer, const std::vector<Intervention>& iv) {
    RunOptions o;
    o.capture = {site::attn_probs(reader_layer, Positions::last())};
    const RunResult r = run(m, ids, iv, o);
    std::size_t Tk = 0;
    const float* probs = probs_row(r.captures.at(o.capture[0].name()), 0, 0, 0, Tk);
    return score_transplant(logits_row(r.logits), m.config().vocab, 7, 11, probs, Tk, {2, 5}, {6, 9});
}

template <class Model>
void check_self_transplant(const Model& m, LayerIndex reader_layer, const std::vector<LayerIndex>& block) {
    const TokenBatch ids(test::random_ids(14, m.config().vocab, 3));
    const TransplantScore clean = scores_of(m, ids, reader_layer, {});
    for (const Positions& P : {Positions::last(), Positions::all()}) {
        std::vector<SiteRef> sites;
        for (LayerIndex l : block) sites.push_back({mixer_site(m.stack(), l, MixerChannel::recurrent), l, P, false});
        const NamedTensors donor = capture(m, ids, sites);
        std::vector<Intervention> iv;
        for (const SiteRef& s : sites) iv.push_back(patch(s, donor));
        const TransplantScore t = scores_of(m, ids, reader_layer, iv);
        CHECK(t.ansA == clean.ansA);
        CHECK(t.ansB == clean.ansB);
        CHECK(t.dAB == clean.dAB);
        CHECK(t.attA == clean.attA);
        CHECK(t.attB == clean.attB);
        // and the library's transplant gives the clean logits bit for bit
        const MixerTransplant mt = transplant_mixer(m, ids, ids, block, P);
        auto c = m.new_cache(1);
        CHECK(max_abs_diff(mt.host.logits, m.forward(ids, c)) == 0.0f);
    }
}

template <class Model, class Adapter>
void check_self_stitch(const Model& m, LayerIndex lo, LayerIndex hi, const Adapter& adapter) {
    const TokenBatch ids(test::random_ids(17, m.config().vocab, 5));
    std::vector<LayerIndex> donor_layers;
    for (LayerIndex l = lo; l <= hi; ++l) donor_layers.push_back(l);
    const StitchPlan plan{{{lo, hi, donor_layers, false}}};
    const auto s = stitch<Adapter>(m, plan, m, {adapter});
    const NamedTensors in = capture(m, ids, {site::resid_pre(lo), site::resid_post(hi)});
    const NamedTensors st = capture(s, ids, {site::resid_pre(lo), site::resid_post(lo)});
    const auto x = flat(in.at(site::resid_pre(lo).name()));
    const auto y = flat(in.at(site::resid_post(hi).name()));
    CHECK(st.at(site::resid_pre(lo).name()) == in.at(site::resid_pre(lo).name()));  // before the block: the same computation
    const auto ys = flat(st.at(site::resid_post(lo).name()));
    REQUIRE(ys.size() == y.size());
    const double u = std::ldexp(1.0, -24);
    std::size_t over = 0, differ = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        const double bound = u * (std::fabs(static_cast<double>(y[i]) - x[i]) + std::fabs(static_cast<double>(y[i])));
        over += std::fabs(static_cast<double>(ys[i]) - y[i]) > bound;
        differ += ys[i] != y[i];
    }
    CHECK(over == 0);
    MESSAGE("elements that differ by one rounding: " << differ << " of " << y.size());
    // the logits then carry that rounding through the rest of the model
    auto ci = m.new_cache(1);
    auto cs = s.new_cache(1);
    const Tensor3 li = m.forward(ids, ci), ls = s.forward(ids, cs);
    float scale = 0.0f;
    for (float v : li) scale = std::max(scale, std::fabs(v));
    // measured 0.7-4.3 u on these models (the layers after the block and the head carry one
    // rounding of the residual); 16 u leaves room for other BLAS kernels, 1e3 times below T10's 1e-3
    const double rel = max_abs_diff(ls, li) / scale;
    MESSAGE("logits: max |stitched - intact| / max |intact| = " << rel);
    CHECK(rel <= 16.0 * u);
}

}  // namespace

TEST_SUITE("circuit/identities") {

TEST_CASE("a transplant of a prompt onto itself scores exactly as the clean run") {
    SUBCASE("Qwen-like: DeltaNet block [0, 1], reader layer 2") { check_self_transplant(test::random_qwen({}), 2, {0, 1}); }
    SUBCASE("Granite-like: Mamba-2 layer 0, reader layer 1") {
        check_self_transplant(test::random_granite({}), 1, {0});
    }
}

TEST_CASE("a self-stitch with identity adapters equals the model to float32 rounding") {
    const auto q = test::random_qwen({});
    const std::size_t H = q.config().hidden;
    SUBCASE("Qwen-like, NoAdapter, block [0, 1]") { check_self_stitch(q, 0, 1, NoAdapter{}); }
    SUBCASE("Qwen-like, identity LinearAdapter, block [1, 3] across the attention layer") {
        check_self_stitch(q, 1, 3, LinearAdapter{AffineMap::identity(H), AffineMap::identity(H)});
    }
    SUBCASE("Granite-like, identity LinearAdapter, block [2, 3]") {
        const auto g = test::random_granite({});
        const std::size_t Hg = g.config().hidden;
        check_self_stitch(g, 2, 3, LinearAdapter{AffineMap::identity(Hg), AffineMap::identity(Hg)});
    }
}

}  // TEST_SUITE

TEST_SUITE("circuit/identify") {

TEST_CASE("identify_circuit: groups, removal scans, reader search and B6 on a Qwen-like and a Granite-like model") {
    // Items of random ids with two single-token "values" exchanged between entries [2, 4) and [6, 8).
    const auto items_for = [](std::size_t vocab) {
        std::vector<PairItem> items;
        for (unsigned s = 0; s < 6; ++s) {
            PairItem p;
            p.clean = test::random_ids(14, vocab, 40 + s);
            if (p.clean[3] == p.clean[7]) p.clean[7] = (p.clean[7] + 1) % static_cast<std::int64_t>(vocab);
            p.corrupt = p.clean;
            std::swap(p.corrupt[3], p.corrupt[7]);
            p.answer = p.clean[3];
            p.other = p.clean[7];
            p.entries = {{2, 4}, {6, 8}, {9, 11}};
            p.target = 0;
            items.push_back(p);
        }
        return items;
    };
    const auto check_circuit = [](const Circuit& c, std::size_t n_groups, std::size_t n_linear) {
        CHECK(c.groups.size() == n_groups);
        CHECK(c.group_removed.size() == n_groups);
        CHECK(c.layer_removed.size() == n_linear);
        CHECK(c.encode == 0);
        // critical layers: only against a positive baseline gap, and then by the rule
        if (c.baseline.gap.mean <= 0.0) CHECK(c.critical_layers.empty());
        for (std::size_t i = 0; i < c.linear_layers.size(); ++i)
            CHECK(std::count(c.critical_layers.begin(), c.critical_layers.end(), c.linear_layers[i]) ==
                  (c.baseline.gap.mean > 0.0 && c.layer_removed[i].gap.mean < 0.6 * c.baseline.gap.mean ? 1 : 0));
        CHECK(c.reader.ranked.size() >= 4);
        // the reader is one of the top candidates by target mass, and the least gap once removed
        for (std::size_t i = 0; i < 4; ++i) CHECK(c.reader.reader.gap_removed <= c.reader.ranked[i].gap_removed);
        REQUIRE(!c.address_candidates.empty());
        CHECK(c.groups[c.address_candidates[0]].softmax_layer <= c.reader.reader.layer);
        CHECK(c.selectivity.size() == c.address_candidates.size());
        for (const auto& cell : c.selectivity)
            for (const auto& row : cell)
                for (const SelectivityMean& s : row) CHECK((s.top1 >= 0.0 && s.top1 <= 1.0));
        // the circuit file round-trips the roles
        const CircuitRoles r = circuit_from_json(nlohmann::json::parse(to_json(c).dump()));
        CHECK(r.encode == c.groups[c.encode].layers);
        CHECK(r.address == c.groups[c.address].layers);
        CHECK(r.reader_layer == c.reader.reader.layer);
        CHECK(r.reader_head == c.reader.reader.head);
    };
    SUBCASE("Qwen-like: GDN GDN ATTN GDN, groups of all linear layers since the previous softmax") {
        const auto m = test::random_qwen({});
        const Circuit c = identify_circuit(m, items_for(m.config().vocab), {0, 4});
        check_circuit(c, 1, 3);
        CHECK(c.groups[0].layers == std::vector<LayerIndex>{0, 1});
        CHECK(c.reader.reader.layer == 2);
        CHECK(c.address == 0);
    }
    SUBCASE("Granite-like: M ATTN M M") {
        const auto m = test::random_granite({});
        const Circuit c = identify_circuit(m, items_for(m.config().vocab), {0, 4});
        check_circuit(c, 1, 3);
        CHECK(c.groups[0].layers == std::vector<LayerIndex>{0});
    }
    CHECK_THROWS_AS(circuit_from_json(nlohmann::json::object()), FormatError);
    // Malformed fields name themselves (they were nlohmann's "cannot use at() with array" or
    // "key 'layers' not found"; a head of 1.5 was read as 1, -1 as 2^64 - 1).
    const nlohmann::json good = {{"encode", {{"layers", {0}}}}, {"address", {{"layers", {1}}}}, {"reader", {{"layer", 2}, {"head", 1}}}};
    CHECK(circuit_from_json(good).reader_head == 1);
    const auto refused = [&](const char* key, const char* inner, const nlohmann::json& v, const std::string& says) {
        nlohmann::json j = good;
        if (inner) j[key][inner] = v;
        else j[key] = v;
        CHECK_THROWS_WITH_AS(circuit_from_json(j), doctest::Contains(says.c_str()), FormatError);
    };
    refused("encode", nullptr, nlohmann::json::array({0, 1}), "needs 'encode.layers' ('encode' is [0,1])");
    refused("reader", nullptr, nlohmann::json::object(), "needs 'reader.layer'");
    refused("reader", "head", 1.5, "reader.head: 1.5 is not a head index");
    refused("reader", "head", -1, "reader.head: -1 is not a head index");
    refused("reader", "head", "1", "reader.head: \"1\" is not a head index");
    refused("address", "layers", 3, "address.layers is not a list of layers");
    CHECK_THROWS_WITH_AS(circuit_from_json(nlohmann::json::array()), doctest::Contains("needs 'encode'"), FormatError);
}

TEST_CASE("pair_item: a generated clean/corrupted pair as the reader-search item") {
    tasks::lookup::CleanCorruptItem it;
    it.clean.ids = {1, 2, 3, 4, 5, 6};
    it.corrupt_ids = {1, 2, 5, 4, 3, 6};
    it.clean.entries = {{1, 2, 3}, {3, 4, 5}};
    it.answer = 3;
    it.corrupt_answer = 5;
    it.target = 1;
    const PairItem p = pair_item(it);
    CHECK(p.clean == it.clean.ids);
    CHECK(p.corrupt == it.corrupt_ids);
    CHECK(p.entries == std::vector<Span>{{1, 4}, {3, 6}});
    CHECK(p.target == 1);
    CHECK(p.answer == 3);
    CHECK(p.other == 5);
    it.clean.entries = {{1, 3}};
    CHECK_THROWS_AS(pair_item(it), ShapeError);
}

}  // TEST_SUITE
