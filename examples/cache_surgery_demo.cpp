// Cache surgery demo: prefill two contexts, cut and mix the KV and recurrent channels of their
// caches (split-prefill and state swap, experiments.md §B.3), run the same query greedily on
// each result, and print what changed.
//
//   cache_surgery_demo [MODEL_DIR]     (default: the small Qwen3.5 model shipped with the tests)
//
// Any model folder of the three families works; token ids are drawn from a fixed seed, so the
// demo needs no tokenizer. Contexts A and B differ everywhere except their last 3 tokens, so
// the first recurrent layer's conv window carries no A/B difference (experiments.md §B.6).

#include <hylens/cache/surgery.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/split_prefill.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#ifndef HYLENS_DEFAULT_MODEL
#define HYLENS_DEFAULT_MODEL "tests/golden/models/qwen3_5_dense"
#endif

namespace hl = hylens;

namespace {

constexpr std::size_t kContext = 37, kQuery = 6, kGen = 4;

std::vector<std::int64_t> draw(std::mt19937& rng, std::size_t n, std::size_t vocab) {
    std::vector<std::int64_t> v(n);
    for (auto& id : v) id = static_cast<std::int64_t>(rng() % vocab);
    return v;
}

struct Row {
    std::string name, what;
    hl::GenerateResult run;
    std::int64_t start = 0;
    std::size_t kv_after = 0;
};

/// Top-k token ids of a logits row, best first.
std::vector<std::size_t> top_k(const float* row, std::size_t V, std::size_t k) {
    std::vector<std::size_t> idx(V);
    for (std::size_t i = 0; i < V; ++i) idx[i] = i;
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
    idx.resize(k);
    return idx;
}

template <class Model>
void demo(const Model& m) {
    using Cache = typename Model::cache_type;
    const std::size_t V = m.config().vocab;
    std::mt19937 rng(2024);
    std::vector<std::int64_t> ctx_a = draw(rng, kContext, V), ctx_b = draw(rng, kContext, V);
    std::copy(ctx_a.end() - 3, ctx_a.end(), ctx_b.end() - 3);  // same last 3 tokens
    const hl::TokenBatch query(draw(rng, kQuery, V));

    // Prefill each context once; every condition below edits a copy (caches are values).
    const Cache a = m.prefill(hl::TokenBatch(ctx_a));
    const Cache b = m.prefill(hl::TokenBatch(ctx_b));
    const std::vector<std::size_t> rec = hl::layers_with<hl::channel::recurrent>(a);
    const hl::LayerSet first_half(std::vector<std::size_t>(rec.begin(), rec.begin() + static_cast<std::ptrdiff_t>((rec.size() + 1) / 2)));

    std::vector<Row> rows;
    const auto run = [&](std::string name, std::string what, hl::EditedCache<Cache> e) {
        hl::GenerateOptions g;
        g.max_new = kGen;
        g.feed_last = true;             // the last greedy token is fed too (KV grows by m + gen)
        g.start_position = e.position;  // positions follow the KV source
        Row r{std::move(name), std::move(what), hl::generate(m, e.cache, query, g), e.position, 0};
        r.kv_after = e.cache.kv_len();
        rows.push_back(std::move(r));
    };
    const auto swapped = [](Cache c) {
        const auto p = static_cast<std::int64_t>(hl::continue_position(c));
        return hl::EditedCache<Cache>{std::move(c), p};
    };
    run("FULL", "KV A + rec A", hl::apply_split_mode(a, hl::SplitMode::FULL));
    run("KV_ONLY", "KV A, rec reset", hl::apply_split_mode(a, hl::SplitMode::KV_ONLY));
    run("REC_ONLY", "no KV, rec A", hl::apply_split_mode(a, hl::SplitMode::REC_ONLY));
    run("NONE", "query alone", hl::apply_split_mode(a, hl::SplitMode::NONE));
    run("KV_ONLY/S", "reset first half of rec layers", hl::apply_split_mode(a, hl::SplitMode::KV_ONLY, first_half));
    run("SWAP A|B", "KV A + rec B", swapped(hl::state_swap(a, b)));
    run("SWAP B|A", "KV B + rec A", swapped(hl::state_swap(b, a)));
    run("FULL B", "KV B + rec B", hl::apply_split_mode(b, hl::SplitMode::FULL));

    const float* full = rows.front().run.prompt_logits.data();
    std::printf("model: %s, %zu layers (%zu recurrent), vocab %zu; context %zu tokens, query %zu, %zu greedy\n\n",
                m.config().model_type.c_str(), m.num_layers(), rec.size(), V, kContext, kQuery, kGen);
    std::printf("%-10s %-32s %5s %7s  %-26s %12s  %s\n", "condition", "cache", "pos0", "kv_end",
                "top-3 at last query token", "max|dl| FULL", "greedy ids");
    for (const Row& r : rows) {
        const float* l = r.run.prompt_logits.data();
        double d = 0.0;
        for (std::size_t i = 0; i < kQuery * V; ++i) d = std::max(d, static_cast<double>(std::fabs(l[i] - full[i])));
        std::string top;
        for (std::size_t t : top_k(l + (kQuery - 1) * V, V, 3)) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%zu(%.2f) ", t, static_cast<double>(l[(kQuery - 1) * V + t]));
            top += buf;
        }
        std::string ids;
        for (auto id : r.run.ids[0]) ids += std::to_string(id) + " ";
        std::printf("%-10s %-32s %5lld %7zu  %-26s %12.4g  %s\n", r.name.c_str(), r.what.c_str(),
                    static_cast<long long>(r.start), r.kv_after, top.c_str(), d, ids.c_str());
    }
    std::printf("\npos0: position of the first query token; kv_end: KV length after query and greedy tokens.\n"
                "max|dl| FULL: largest logit difference from FULL over the query positions.\n");
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : HYLENS_DEFAULT_MODEL;
    if (dir == "-h" || dir == "--help") {
        std::cout << "usage: cache_surgery_demo [MODEL_DIR]   (default " << HYLENS_DEFAULT_MODEL << ")\n";
        return 0;
    }
    try {
        const hl::AnyModel model = hl::load(dir);
        model.visit([](const auto& m) { demo(m); });
    } catch (const hl::Error& e) {
        std::cerr << "cache_surgery_demo: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "cache_surgery_demo: unexpected error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
