// Quickstart: load a model folder, prefill a prompt, generate greedily, and look at the
// typed cache. Usage: quickstart [MODEL_DIR] (default: the small Qwen3.5 test model).

#include <hylens/models/load.hpp>
#include <hylens/stack/generate.hpp>

#include <iostream>
#include <string>

#ifndef HYLENS_DEFAULT_MODEL
#define HYLENS_DEFAULT_MODEL "tests/golden/models/qwen3_5_dense"
#endif

int main(int argc, char** argv) {
    namespace hl = hylens;
    const std::string dir = argc > 1 ? argv[1] : HYLENS_DEFAULT_MODEL;
    try {
        const hl::AnyModel model = hl::load(dir);
        model.visit([&](const auto& m) {
            std::cout << "model " << dir << " (" << m.config().model_type << "), " << m.num_layers() << " layers\n";
            const hl::TokenBatch prompt({5, 17, 42, 7, 99, 3, 12, 64});
            auto cache = m.prefill(prompt);  // the filled cache: a value you can copy and edit
            std::cout << "after the prompt: KV length " << cache.kv_len() << ", next position "
                      << cache.next_position() << "\n";
            hl::GenerateOptions opt;
            opt.max_new = 8;
            const hl::TokenBatch next({1});
            const auto res = hl::generate(m, cache, next, opt);
            std::cout << "greedy continuation:";
            for (auto id : res.ids[0]) std::cout << ' ' << id;
            std::cout << "\npositions used:";
            for (auto p : res.positions) std::cout << ' ' << p;
            std::cout << "\n";
        });
    } catch (const hl::Error& e) {
        std::cerr << "quickstart: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
