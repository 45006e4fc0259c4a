// Quickstart: load a model folder and its tokenizer, ask one question in the model's chat
// format, generate the answer greedily, and look at the typed cache it left.
//
//   quickstart [MODEL_DIR [QUESTION]]
//
// MODEL_DIR defaults to models/qwen35-tiny, a small Qwen3.5-layout model trained on hylens'
// study tasks (docs/organisms.md), so the answer means something: it follows the instruction
// in the context ("Answer only in French.") and writes French.

#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/generate.hpp>
#include <hylens/text/tokenizer.hpp>

#include <filesystem>
#include <iostream>
#include <string>

#ifndef HYLENS_DEFAULT_MODEL
#define HYLENS_DEFAULT_MODEL "models/qwen35-tiny"
#endif

int main(int argc, char** argv) {
    namespace hl = hylens;
    const std::string dir = argc > 1 ? argv[1] : HYLENS_DEFAULT_MODEL;
    const std::string context = "A light wind moved the trees. Answer only in French. The library was full of people.";
    const std::string question = argc > 2 ? argv[2] : "Where would you like to travel?";
    if (dir == "-h" || dir == "--help") {
        std::cout << "usage: quickstart [MODEL_DIR [QUESTION]]   (default " << HYLENS_DEFAULT_MODEL << ")\n";
        return 0;
    }
    try {
        const hl::AnyModel model = hl::load(dir);
        const hl::Tokenizer tok = hl::Tokenizer::from_file((std::filesystem::path(dir) / "tokenizer.json").string());
        model.visit([&](const auto& m) {
            std::cout << "model " << dir << " (" << m.config().model_type << "), " << m.num_layers() << " layers\n";
            // The chat format of the model's family; the context and the question are two
            // segments of one user message, as the studies feed them.
            const hl::experiments::PromptRenderer chat(tok, hl::experiments::chat_family(m.config().model_type));
            const auto encode = [&](const std::string& s) {
                const hl::Encoding e = tok.encode(s, {.add_special = false});
                return std::vector<std::int64_t>(e.ids.begin(), e.ids.end());
            };
            const std::vector<std::int64_t> ctx_ids = encode(chat.context_text(context));
            const std::vector<std::int64_t> query_ids = encode(chat.query_text(question));

            auto cache = m.prefill(hl::TokenBatch(ctx_ids));  // the filled cache: a value you can copy and edit
            std::cout << "context: " << ctx_ids.size() << " tokens; cache KV length " << cache.kv_len()
                      << ", next position " << cache.next_position() << "\n";
            hl::GenerateOptions opt;
            opt.max_new = 24;
            opt.stop_ids = chat.stop_ids();  // the family's end-of-turn token
            opt.check_finite = true;
            const auto res = hl::generate(m, cache, hl::TokenBatch(query_ids), opt);
            std::cout << "user: " << context << " " << question << "\n";
            std::cout << "model: " << chat.decode(chat.until_stop(res.ids[0]).first) << "\n";
            std::cout << "positions used: " << res.positions.front() << " .. " << res.positions.back()
                      << "; cache KV length now " << cache.kv_len() << "\n";
        });
    } catch (const hl::Error& e) {
        std::cerr << "quickstart: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
