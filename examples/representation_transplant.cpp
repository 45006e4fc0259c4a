// Representation transplant (Paper A exp22, protocols.md §A.8): run a donor prompt A, copy
// the mixer outputs of every layer of one block at some positions into a host prompt B as its
// mixers produce them, and read the final-position logits. One row per (block, position set).
//
//   representation_transplant [MODEL_DIR]
//
// MODEL_DIR defaults to models/qwen35-tiny, a trained Qwen3.5-layout organism (docs/organisms.md).
// Donor A and host B share one dictionary and ask for different keys, in the model's chat
// format: the two prompts differ only in the queried key, which must have the same token length
// in both. vA / vB = the values of A's and B's keys (their first tokens); the table gives
// D(A-B) = logit(vA) - logit(vB) and the host's top token after the transplant. The organism's
// lookup accuracy is in its card, so read D as what it is on this model. The study with many
// pairs, controls and CIs is `hylens experiment transplant`.

#include <hylens/interp/lens.hpp>
#include <hylens/interp/reader_search.hpp>
#include <hylens/interp/transplant.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>
#include <hylens/text/tokenizer.hpp>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <iostream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path default_model() {
#ifdef HYLENS_DEFAULT_MODEL
    if (fs::exists(HYLENS_DEFAULT_MODEL)) return HYLENS_DEFAULT_MODEL;
#endif
    return fs::path(__FILE__).parent_path().parent_path() / "models" / "qwen35-tiny";
}

std::string layer_list(const std::vector<hylens::LayerIndex>& l) {
    std::string s;
    for (std::size_t i = 0; i < l.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(l[i]);
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const fs::path dir = argc > 1 ? fs::path(argv[1]) : default_model();
        const hylens::AnyModel model = hylens::load(dir);
        const hylens::Tokenizer tok = hylens::Tokenizer::from_file((dir / "tokenizer.json").string());
        const hylens::experiments::PromptRenderer chat(tok, hylens::experiments::chat_family(model.config().model_type));
        const auto encode = [&](const std::string& text) {
            const hylens::Encoding e = tok.encode(text, {.add_special = false});
            return std::vector<std::int64_t>(e.ids.begin(), e.ids.end());
        };
        const std::string dictionary = "Dictionary: ring=pink, bed=gold, map=sheep, coin=duck, hill=mouse.";
        const auto prompt = [&](const std::string& key) {
            std::vector<std::int64_t> ids = encode(chat.context_text(dictionary));
            const std::vector<std::int64_t> q = encode(chat.query_text("What is the value of " + key + "?"));
            ids.insert(ids.end(), q.begin(), q.end());
            return ids;
        };
        const std::vector<std::int64_t> donor = prompt("bed"), host = prompt("hill");
        if (donor.size() != host.size())
            throw std::runtime_error("the two keys have different token lengths with this tokenizer; pick others");
        const std::int64_t vA = encode("gold").front(), vB = encode("mouse").front();
        model.visit([&](const auto& m) {
            using namespace hylens;
            const std::size_t V = m.config().vocab;
            const TokenBatch A(donor), B(host);
            const Tensor3 la = run(m, A).logits, lb = run(m, B).logits;
            const auto word = [&](std::int64_t id) { return "'" + chat.decode({id}) + "'"; };
            std::printf("%s: %zu layers, donor asks bed (value gold), host asks hill (value mouse), %zu tokens each\n",
                        dir.filename().c_str(), m.num_layers(), host.size());
            std::printf("donor alone: top %s, D(A-B) = %+.4f; host alone: top %s, D(A-B) = %+.4f\n\n",
                        word(argmax(logits_row(la), V)).c_str(), logit_diff(logits_row(la), V, vA, vB),
                        word(argmax(logits_row(lb), V)).c_str(), logit_diff(logits_row(lb), V, vA, vB));
            std::printf("%-6s %-12s %-10s %10s  %s\n", "block", "layers", "positions", "D(A-B)", "host's top token");
            // Blocks: the linear layers before each softmax layer (groups(0) of §A.6).
            const auto groups = layer_groups(m.stack(), 0);
            const std::pair<const char*, Positions> sets[] = {{"final", Positions::last()},
                                                              {"question", Positions::range(-4, static_cast<std::int64_t>(host.size()))},
                                                              {"all", Positions::all()}};
            for (std::size_t g = 0; g < groups.size(); ++g)
                for (const auto& [name, pos] : sets) {
                    const MixerTransplant t = transplant_mixer(m, A, B, groups[g].layers, pos);
                    const float* row = logits_row(t.host.logits);
                    std::printf("G%-5zu %-12s %-10s %+10.4f  %s%s\n", g, layer_list(groups[g].layers).c_str(), name,
                                logit_diff(row, V, vA, vB), word(argmax(row, V)).c_str(),
                                argmax(row, V) == vA ? "  (= vA)" : "");
                }
        });
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "representation_transplant: " << e.what() << "\n";
        return 1;
    }
}
