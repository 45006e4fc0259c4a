// Cache surgery demo: prefill two contexts, cut and mix the KV and recurrent channels of their
// caches (split-prefill and state swap), ask the same question after each edit, and print the
// answers.
//
//   cache_surgery_demo [MODEL_DIR [SEED INDEX]]
//
// MODEL_DIR defaults to models/qwen35-tiny, a trained Qwen3.5-layout organism (docs/organisms.md).
// The two contexts are item INDEX of seed SEED (default 1 0) of the study task `mixed`: context A
// instructs one language and holds a dictionary, context B instructs another language and gives
// the queried key another value (hylens tasks --task mixed). The answer to "What is the value of
// KEY?" then shows, in one line, which context's language and which context's value survived the
// edit. The full study with every task, many items and CIs is `hylens experiment channels`.

#include <hylens/cache/surgery.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/split_prefill.hpp>
#include <hylens/tasks/registry.hpp>
#include <hylens/text/tokenizer.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#ifndef HYLENS_DEFAULT_MODEL
#define HYLENS_DEFAULT_MODEL "models/qwen35-tiny"
#endif

namespace hl = hylens;

namespace {

constexpr std::size_t kGen = 16;

struct Row {
    std::string name, what;
    hl::GenerateResult run;
};

template <class Model>
void demo(const Model& m, const hl::experiments::PromptRenderer& chat, const hl::tasks::Item& item) {
    using Cache = typename Model::cache_type;
    const hl::experiments::RenderedItem ids = chat.render(item, /*swap=*/true);
    const hl::TokenBatch query(ids.query);

    // Prefill each context once; every condition below edits a copy (caches are values).
    const Cache a = m.prefill(hl::TokenBatch(ids.context));
    const Cache b = m.prefill(hl::TokenBatch(ids.alt_context));
    const std::vector<std::size_t> rec = hl::layers_with<hl::channel::recurrent>(a);

    std::vector<Row> rows;
    const auto run = [&](std::string name, std::string what, hl::EditedCache<Cache> e) {
        hl::GenerateOptions g;
        g.max_new = kGen;
        g.stop_ids = chat.stop_ids();
        g.start_position = e.position;  // positions follow the KV source
        g.check_finite = true;
        rows.push_back({std::move(name), std::move(what), hl::generate(m, e.cache, query, g)});
    };
    const auto swapped = [](Cache c) {
        const auto p = static_cast<std::int64_t>(hl::continue_position(c));
        return hl::EditedCache<Cache>{std::move(c), p};
    };
    run("FULL", "KV A + rec A", hl::apply_split_mode(a, hl::SplitMode::FULL));
    run("KV_ONLY", "KV A, recurrent state reset", hl::apply_split_mode(a, hl::SplitMode::KV_ONLY));
    run("REC_ONLY", "no KV, recurrent state A", hl::apply_split_mode(a, hl::SplitMode::REC_ONLY));
    run("NONE", "the question alone", hl::apply_split_mode(a, hl::SplitMode::NONE));
    run("KV_A+REC_B", "KV A + recurrent state B", swapped(hl::state_swap(a, b)));
    run("KV_B+REC_A", "KV B + recurrent state A", swapped(hl::state_swap(b, a)));
    run("FULL B", "KV B + rec B", hl::apply_split_mode(b, hl::SplitMode::FULL));

    std::printf("model: %s, %zu layers (%zu recurrent); contexts %zu tokens each, question %zu\n\n",
                m.config().model_type.c_str(), m.num_layers(), rec.size(), ids.context.size(), ids.query.size());
    std::printf("A: %s\nB: %s\nquestion: %s\nexpected from A: %s\nexpected from B: %s\n\n", item.context.c_str(),
                item.alt_context.c_str(), item.query.c_str(), item.expected[0].c_str(), item.alt_expected[0].c_str());
    std::printf("%-11s %-28s  %s\n", "condition", "cache", "answer");
    for (const Row& r : rows)
        std::printf("%-11s %-28s  %s\n", r.name.c_str(), r.what.c_str(),
                    chat.decode(chat.until_stop(r.run.ids[0]).first).c_str());
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : HYLENS_DEFAULT_MODEL;
    if (dir == "-h" || dir == "--help" || argc == 3 || argc > 4) {
        std::cout << "usage: cache_surgery_demo [MODEL_DIR [SEED INDEX]]   (default " << HYLENS_DEFAULT_MODEL << " 1 0)\n";
        return argc == 3 || argc > 4 ? 2 : 0;
    }
    try {
        const std::uint64_t seed = argc > 3 ? std::stoull(argv[2]) : 1;
        const std::size_t index = argc > 3 ? std::stoull(argv[3]) : 0;
        const hl::AnyModel model = hl::load(dir);
        const hl::Tokenizer tok = hl::Tokenizer::from_file((std::filesystem::path(dir) / "tokenizer.json").string());
        const hl::experiments::PromptRenderer chat(tok, hl::experiments::chat_family(model.config().model_type));
        // The state swap needs contexts of equal token length: take the first item from INDEX on
        // whose A and B contexts have it.
        const hl::tasks::TaskSpec& task = hl::tasks::find_task("mixed");
        hl::tasks::Item item = task.make(seed, index);
        for (std::size_t i = index; i < index + 100; item = task.make(seed, ++i)) {
            const auto r = chat.render(item, true);
            if (r.context.size() == r.alt_context.size()) break;
        }
        model.visit([&](const auto& m) { demo(m, chat, item); });
    } catch (const hl::Error& e) {
        std::cerr << "cache_surgery_demo: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "cache_surgery_demo: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
