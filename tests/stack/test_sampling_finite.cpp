// Sampling in generate (fixed portable PRNG, temperature / top-k / top-p against exact
// probabilities; greedy stays the default) and the forward's non-finite check (first layer and
// site of a NaN, from damaged weights or from a hook), and the mark a forward that failed inside
// the layers leaves on its cache.

#include <hylens/cache/cache_io.hpp>
#include <hylens/cache/surgery.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/generate.hpp>
#include <hylens/stack/sampling.hpp>
#include <hylens/stack/split_prefill.hpp>

#include "../support/damaged_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>  // getpid

using namespace hylens;

namespace {

/// Frequencies of choose_token over n draws of one stream.
std::vector<double> frequencies(const std::vector<float>& row, const SamplingOptions& opt, std::size_t n) {
    SplitMix64 rng(opt.seed);
    std::vector<double> f(row.size(), 0.0);
    for (std::size_t i = 0; i < n; ++i) f[static_cast<std::size_t>(choose_token(row.data(), row.size(), opt, rng))] += 1.0;
    for (double& x : f) x /= static_cast<double>(n);
    return f;
}

}  // namespace

TEST_SUITE("stack/sampling") {
    TEST_CASE("SplitMix64 gives the reference sequence (the same on every machine)") {
        SplitMix64 r(0);
        CHECK(r.next() == 0xE220A8397B1DCDAFull);
        CHECK(r.next() == 0x6E789E6AA1B965F4ull);
        CHECK(r.next() == 0x06C45D188009454Full);
        SplitMix64 u(42);
        for (int i = 0; i < 1000; ++i) {
            const double x = u.uniform();
            REQUIRE((x >= 0.0 && x < 1.0));
        }
    }

    TEST_CASE("choose_token: greedy is the argmax, draws follow softmax(z / T) within top-k / top-p") {
        // p = 0.1, 0.2, 0.3, 0.4 at temperature 1.
        const std::vector<float> row = {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
        SplitMix64 rng(1);
        CHECK(choose_token(row.data(), 4, {}, rng) == 3);
        const std::vector<float> tie = {1.0f, 5.0f, 5.0f, 0.0f};
        CHECK(choose_token(tie.data(), 4, {}, rng) == 1);  // first index on ties, as before
        const std::size_t n = 40000;  // binomial sd <= 0.0025: 0.012 is ~5 sd
        SamplingOptions t1{.temperature = 1.0f, .seed = 7};
        const auto f1 = frequencies(row, t1, n);
        for (std::size_t v = 0; v < 4; ++v) CHECK(std::fabs(f1[v] - 0.1 * double(v + 1)) < 0.012);
        // Temperature 0.5 squares the probabilities: 1, 4, 9, 16 over 30.
        const auto f2 = frequencies(row, {.temperature = 0.5f, .seed = 8}, n);
        for (std::size_t v = 0; v < 4; ++v) CHECK(std::fabs(f2[v] - double((v + 1) * (v + 1)) / 30.0) < 0.012);
        // top_k = 2: ids 3 and 2 only, renormalized 4/7 and 3/7.
        const auto f3 = frequencies(row, {.temperature = 1.0f, .top_k = 2, .seed = 9}, n);
        CHECK(f3[0] == 0.0);
        CHECK(f3[1] == 0.0);
        CHECK(std::fabs(f3[3] - 4.0 / 7.0) < 0.012);
        // top_p = 0.65: the smallest prefix by probability reaching 0.65 is {3, 2} (0.7).
        const auto f4 = frequencies(row, {.temperature = 1.0f, .top_p = 0.65f, .seed = 10}, n);
        CHECK(f4[0] == 0.0);
        CHECK(f4[1] == 0.0);
        CHECK(std::fabs(f4[2] - 3.0 / 7.0) < 0.012);
        // top_k = 1 is greedy whatever the seed; one seed, one sequence.
        for (std::uint64_t seed : {1u, 2u, 3u}) CHECK(frequencies(row, {.temperature = 2.0f, .top_k = 1, .seed = seed}, 50)[3] == 1.0);
        SplitMix64 r1(5), r2(5);
        for (int i = 0; i < 100; ++i) CHECK(choose_token(row.data(), 4, t1, r1) == choose_token(row.data(), 4, t1, r2));
        // Non-finite logits cannot be sampled; bad options are errors.
        const std::vector<float> bad = {0.0f, std::numeric_limits<float>::quiet_NaN()};
        CHECK_THROWS_AS(choose_token(bad.data(), 2, t1, rng), Error);
        // Nor can they be argmaxed (greedy chose id 0 for {0, NaN}, whatever the NaN stood for).
        CHECK_THROWS_WITH_AS(choose_token(bad.data(), 2, SamplingOptions{}, rng),
                             doctest::Contains("logit of token 1 is nan; cannot take the argmax"), Error);
        const std::vector<float> inf = {0.0f, std::numeric_limits<float>::infinity()};
        CHECK_THROWS_AS(choose_token(inf.data(), 2, SamplingOptions{}, rng), Error);
        CHECK_THROWS_AS(SamplingOptions{.temperature = -1.0f}.validate(), ShapeError);
        CHECK_THROWS_AS(SamplingOptions{.top_p = 0.0f}.validate(), ShapeError);
    }

    TEST_CASE("generate and split_prefill: positions below -1 or past 2^63 are errors") {
        const auto m = load_as<Qwen35Model>(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
        auto c = m.new_cache(1);
        // -5 ran from the cache's next position, as -1 does.
        CHECK_THROWS_WITH_AS(generate(m, c, TokenBatch({1}), {.max_new = 1, .start_position = -5}),
                             doctest::Contains("start_position -5"), ShapeError);
        // INT64_MAX - 1 wrapped to a negative position (signed overflow) and blamed it.
        CHECK_THROWS_WITH_AS(generate(m, c, TokenBatch({1, 2, 3}), {.max_new = 1, .start_position = INT64_MAX - 1}),
                             doctest::Contains("overflow a 64-bit position"), ShapeError);
        // A stop id the model cannot produce never matched: the run went on to max_new.
        const std::int64_t V = static_cast<std::int64_t>(m.config().vocab);
        const std::string past = "stop id " + std::to_string(V) + " is outside";
        CHECK_THROWS_WITH_AS(generate(m, c, TokenBatch({1}), {.max_new = 2, .stop_ids = {3, V}}),
                             doctest::Contains(past.c_str()), ShapeError);
        CHECK_THROWS_AS(generate(m, c, TokenBatch({1}), {.max_new = 2, .stop_ids = {-1}}), ShapeError);
        CHECK(c.next_position() == 0);  // all refused before the forward
        const GenerateResult at_edge = generate(m, c, TokenBatch({1, 2}), {.max_new = 1, .start_position = INT64_MAX - 2});
        CHECK(at_edge.positions.back() == INT64_MAX - 1);
        auto c2 = m.new_cache(1);
        CHECK_THROWS_WITH_AS(generate(m, c2, TokenBatch({1, 2}), {.max_new = 2, .start_position = INT64_MAX - 2}),
                             doctest::Contains("the next position overflows"), ShapeError);
        CHECK_THROWS_WITH_AS(split_prefill(m, TokenBatch({1, 2}), TokenBatch({3}), SplitMode::FULL, {.position = -7}),
                             doctest::Contains("position -7"), ShapeError);
    }

    TEST_CASE("generate in a batch: each sequence's length ends at its own first stop id, the batch when all have one") {
        // The batch stopped only when every sequence produced a stop id at the same step, so
        // sequences that stopped at different steps ran on to max_new with nothing to say where.
        const auto m = load_as<Qwen35Model>(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
        const TokenBatch prompts(std::vector<std::vector<std::int64_t>>{{1, 2, 3}, {7, 8, 9}});
        auto c0 = m.new_cache(2);
        const GenerateResult free_run = generate(m, c0, prompts, {.max_new = 12});
        const auto& r0 = free_run.ids[0];
        const auto& r1 = free_run.ids[1];
        CHECK(free_run.lengths == std::vector<std::size_t>{12, 12});
        const std::vector<std::int64_t> stops = {r0[1], r1[4]};
        const auto first_stop = [&](const std::vector<std::int64_t>& r) {
            for (std::size_t i = 0; i < r.size(); ++i)
                if (r[i] == stops[0] || r[i] == stops[1]) return i + 1;
            return r.size();
        };
        const std::vector<std::size_t> want = {first_stop(r0), first_stop(r1)};
        const std::size_t steps = std::max(want[0], want[1]);
        REQUIRE(steps <= 5);  // both stop well before max_new
        auto c1 = m.new_cache(2);
        const GenerateResult g = generate(m, c1, prompts, {.max_new = 12, .stop_ids = stops});
        CHECK(g.lengths == want);
        for (std::size_t b = 0; b < 2; ++b) {
            REQUIRE(g.ids[b].size() == steps);
            CHECK(std::equal(g.ids[b].begin(), g.ids[b].end(), free_run.ids[b].begin()));
        }
    }

    TEST_CASE("generate without keep_logits: the same ids, cache and prompt logits, no step logits") {
        // What the channel study and the judge run: float32 and bf16 weights, a batch of 1 and
        // of 6, greedy and sampled.
        const std::string golden = std::string(HYLENS_GOLDEN_DIR) + "/models/";
        const auto check_model = [](const auto& m) {
            for (const std::size_t B : {std::size_t{1}, std::size_t{6}}) {
                std::vector<std::vector<std::int64_t>> rows;
                for (std::size_t b = 0; b < B; ++b) rows.push_back({3, static_cast<std::int64_t>(5 + b), 14, 15, 42});
                const TokenBatch prompts(rows);
                for (const double temperature : {0.0, 0.9}) {
                    CAPTURE(B);
                    CAPTURE(temperature);
                    GenerateOptions kept{.max_new = 6};
                    kept.sampling.temperature = temperature;
                    kept.sampling.seed = 11;
                    GenerateOptions lean = kept;
                    lean.keep_logits = false;
                    auto c0 = m.new_cache(B), c1 = m.new_cache(B);
                    const GenerateResult all = generate(m, c0, prompts, kept);
                    const GenerateResult ids = generate(m, c1, prompts, lean);
                    CHECK(ids.ids == all.ids);
                    CHECK(ids.lengths == all.lengths);
                    CHECK(ids.positions == all.positions);
                    CHECK(c1 == c0);
                    CHECK(all.step_logits.size() == 5);
                    CHECK(ids.step_logits.empty());
                    REQUIRE(ids.prompt_logits.shape() == all.prompt_logits.shape());
                    CHECK(std::equal(ids.prompt_logits.begin(), ids.prompt_logits.end(), all.prompt_logits.begin()));
                }
            }
        };
        check_model(load_as<Qwen35Model>(golden + "qwen3_5_dense"));
        check_model(load_as<FalconH1Model>(golden + "falcon_h1/model-bf16"));
        check_model(load_as<GraniteModel>(golden + "granite_h_dense"));
    }

    TEST_CASE("generate: greedy by default, a seed reproduces a sampled continuation") {
        const auto m = load_as<Qwen35Model>(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
        const TokenBatch prompt({3, 14, 15, 92, 65});
        CHECK(TokenBatch(std::vector<std::int32_t>{3, 14, 15, 92, 65}).ids == prompt.ids);  // tokenizer ids widen
        const auto run = [&](GenerateOptions g) {
            auto c = m.new_cache(1);
            g.max_new = 10;
            return generate(m, c, prompt, g).ids[0];
        };
        // Greedy: every token is the argmax of the logits a plain forward gives (the old rule).
        const auto greedy = run({});
        std::vector<std::int64_t> seq(prompt.ids);
        for (std::size_t i = 0; i < greedy.size(); ++i) {
            auto c = m.new_cache(1);
            const Tensor3 lg = m.forward(TokenBatch(seq), c, {.last_only = true});
            CHECK(greedy[i] == hylens::detail::argmax_row(lg.data(), m.config().vocab));
            seq.push_back(greedy[i]);
        }
        GenerateOptions s;
        s.sampling = {.temperature = 1.0f, .top_p = 0.9f, .seed = 123};
        CHECK(run(s) == run(s));
        GenerateOptions s2 = s;
        s2.sampling.seed = 124;
        CHECK(run(s) != run(s2));
    }
}

TEST_SUITE("stack/finite_check") {
    TEST_CASE("check_finite names the first layer and site of a NaN, off, the NaN reaches the logits") {
        namespace fs = std::filesystem;
        const fs::path dir = test::damaged_model(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense",
                                                 fs::temp_directory_path() / ("hylens_nan_" + std::to_string(::getpid())),
                                                 "model.language_model.layers.2.mlp.down_proj.weight");
        const auto m = load_as<Qwen35Model>(dir);
        const TokenBatch ids({1, 2, 3});
        auto c = m.new_cache(1);
        const Tensor3 lg = m.forward(ids, c);  // the library default: no check
        CHECK(std::isnan(lg(0, 2, 0)));
        auto c2 = m.new_cache(1);
        CHECK_THROWS_WITH_AS(m.forward(ids, c2, {.check_finite = true}),
                             doctest::Contains(": first non-finite value (nan) at layer 2, site mlp_out, sequence 0, "
                                               "token 0 (position 0), index 0"),
                             NonFiniteError);
        GenerateOptions g;
        g.check_finite = true;
        auto c3 = m.new_cache(1);
        CHECK_THROWS_AS(generate(m, c3, ids, g), NonFiniteError);
        // With the check off, the NaN logits still stop generation (greedy took id 0 from them).
        g.check_finite = false;
        auto c3b = m.new_cache(1);
        CHECK_THROWS_WITH_AS(generate(m, c3b, ids, g), doctest::Contains("cannot take the argmax of non-finite logits"), Error);

        // A CheckFiniteScope turns the check on for every forward of this thread while it lives.
        {
            const CheckFiniteScope scope;
            const CheckFiniteScope nested;
            auto cs = m.new_cache(1);
            CHECK_THROWS_WITH_AS(m.forward(ids, cs), doctest::Contains("at layer 2, site mlp_out"), NonFiniteError);
        }
        CHECK_FALSE(in_check_finite_scope());
        auto after = m.new_cache(1);
        CHECK(std::isnan(m.forward(ids, after)(0, 2, 0)));  // off again once the scopes are gone
        fs::remove_all(dir);

        // A small parameter is scanned at load (a NaN A_log is named there, not found later or
        // never: A_log = +inf would make the decay 0 and the logits finite); LoadOptions opt out.
        const std::string a_log = "model.language_model.layers.1.linear_attn.A_log";
        const fs::path small = test::damaged_model(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense",
                                                   fs::temp_directory_path() / ("hylens_nan_small_" + std::to_string(::getpid())),
                                                   a_log, 1);
        CHECK_THROWS_WITH_AS(load(small), doctest::Contains(("tensor '" + a_log + "' [4] holds nan at flat index 0").c_str()), FormatError);
        CHECK_NOTHROW(load(small, LoadOptions{.check_finite = false}));
        fs::remove_all(small);

        // A hook that writes an infinity: the check sees what the hook left, at that site.
        const auto good = load_as<Qwen35Model>(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
        Hook h;
        h.wants = [](Site s, LayerIndex l) { return s == Site::mixer_out && l == 1; };
        h.fn = [](Site, LayerIndex, const ActivationView& v, const std::int64_t*) { v.row(0, 1)[4] = INFINITY; };
        auto c4 = good.new_cache(1);
        CHECK_THROWS_WITH_AS(good.forward(ids, c4, {.hook = &h, .check_finite = true}),
                             doctest::Contains("(inf) at layer 1, site mixer_out, sequence 0, token 1 (position 1), index 4"),
                             NonFiniteError);
        auto c5 = good.new_cache(1);
        const Tensor3 ok = good.forward(ids, c5, {.check_finite = true});
        auto c6 = good.new_cache(1);
        CHECK(max_abs_diff(ok, good.forward(ids, c6)) == 0.0f);  // the check reads, never writes
    }

    TEST_CASE("a forward that fails inside the layers marks its cache torn, and every later use refuses it until reset") {
        namespace fs = std::filesystem;
        const auto m = load_as<Qwen35Model>(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
        const TokenBatch ids({1, 2, 3});
        Hook inf;  // an infinity written at layer 1: layers 0 and 1 have taken the tokens, the rest not
        inf.wants = [](Site s, LayerIndex l) { return s == Site::mixer_out && l == 1; };
        inf.fn = [](Site, LayerIndex, const ActivationView& v, const std::int64_t*) { v.row(0, 1)[4] = INFINITY; };
        const auto before = m.prefill(TokenBatch({5, 6}));
        auto c = before;
        CHECK_THROWS_AS(m.forward(ids, c, {.hook = &inf, .check_finite = true}), NonFiniteError);
        CHECK(c.torn().find("(inf) at layer 1, site mixer_out") != std::string::npos);
        CHECK_FALSE(c == before);  // part-updated: the mark is needed
        CHECK(c.tokens_seen() == before.tokens_seen());

        const auto refused = [](const char* op) {
            return doctest::Contains(("[" + std::string(op) + "] the cache was left part-updated by a forward that failed (").c_str());
        };
        CHECK_THROWS_WITH_AS(m.forward(ids, c), refused("HybridStack"), Error);
        auto copy = c;  // copies and single-cache surgery keep the mark
        CHECK(copy.torn() == c.torn());
        CHECK_THROWS_WITH_AS(m.forward(ids, copy), refused("HybridStack"), Error);
        auto kv = keep_only<channel::kv>(c);
        CHECK_THROWS_WITH_AS(generate(m, kv, ids, {.max_new = 1}), refused("HybridStack"), Error);
        CHECK_THROWS_WITH_AS(state_swap(before, c), refused("state_swap"), Error);
        CHECK_THROWS_WITH_AS(state_swap(c, before), refused("state_swap"), Error);
        const fs::path file = fs::temp_directory_path() / ("hylens_torn_" + std::to_string(::getpid()) + ".safetensors");
        CHECK_THROWS_WITH_AS(save_cache(c, file), refused("save_cache"), Error);
        CHECK_FALSE(fs::exists(file));
        save_cache(before, file);
        CHECK_THROWS_WITH_AS(load_cache(io::SafetensorsFile::open(file), c), refused("load_cache"), Error);
        fs::remove(file);

        c.reset();  // a fresh cache again
        CHECK(c.torn().empty());
        auto fresh = m.new_cache(1);
        CHECK(max_abs_diff(m.forward(ids, c), m.forward(ids, fresh)) == 0.0f);

        // A hook that throws at the embedding, before any layer has taken a token, leaves the
        // cache as it was and usable; so does a non-finite value found in the logits, after
        // every layer has taken the tokens (the cache is whole).
        Hook stop;
        stop.wants = [](Site s, LayerIndex) { return s == Site::embed; };
        stop.fn = [](Site, LayerIndex, const ActivationView&, const std::int64_t*) { throw Error("stop at the embedding"); };
        auto d = before;
        CHECK_THROWS_WITH_AS(m.forward(ids, d, {.hook = &stop}), "stop at the embedding", Error);
        CHECK(d.torn().empty());
        CHECK(d == before);
        Hook late;
        late.wants = [](Site s, LayerIndex) { return s == Site::final_norm; };
        late.fn = [](Site, LayerIndex, const ActivationView& v, const std::int64_t*) { v.row(0, 2)[0] = NAN; };
        auto e = before, whole = before;
        CHECK_THROWS_AS(m.forward(ids, e, {.hook = &late, .check_finite = true}), NonFiniteError);
        CHECK(e.torn().empty());
        m.forward(ids, whole);
        CHECK(e == whole);
    }

    TEST_CASE("a host's interrupt check stops generate at a forward, before any layer, and leaves the cache whole") {
        // Python's Ctrl-C: the check throws Interrupted (not a hylens::Error) at the n-th forward.
        static int forwards = 0;
        const auto m = load_as<Qwen35Model>(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");
        interrupt::set_check([] {
            if (++forwards == 4) throw Interrupted();
        });
        auto c = m.new_cache(1);
        CHECK_THROWS_AS(generate(m, c, TokenBatch({1, 2, 3}), {.max_new = 10}), Interrupted);
        interrupt::set_check(nullptr);
        CHECK(forwards == 4);
        CHECK(c.torn().empty());
        // The prompt and two generated tokens were taken (forwards 1-3), as by a generation of
        // three tokens (its last is not fed); the cache goes on from there.
        CHECK(c.next_position() == 5);
        auto whole = m.new_cache(1);
        generate(m, whole, TokenBatch({1, 2, 3}), {.max_new = 3});
        CHECK(c == whole);
        CHECK_FALSE(std::is_base_of_v<Error, Interrupted>);
        (void)m.forward(TokenBatch({1}), c);  // usable, with no check set
        CHECK(c.next_position() == 6);
    }
}
