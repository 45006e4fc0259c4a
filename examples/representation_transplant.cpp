// Representation transplant (Paper A exp22, experiments.md §A.8): run a donor prompt A, copy
// the mixer outputs of every layer of one block at some positions into a host prompt B as its
// mixers produce them, and read the final-position logits. One row per (block, position set).
//
//   representation_transplant [MODEL_DIR]
//
// MODEL_DIR defaults to the shipped tests/golden/models/qwen3_5_dense (random weights, so the
// numbers show the mechanics, not a circuit). The donor and host prompts are the pair of the
// model's surgery reference when there is one (they differ at one position, Tp-3), else two
// random prompts of equal length. vA / vB = the donor's / host's own top token; the table gives
// D(A-B) = logit(vA) - logit(vB) and the host's top token after the transplant.

#include <hylens/interp/lens.hpp>
#include <hylens/interp/reader_search.hpp>
#include <hylens/interp/transplant.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/models/load.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path default_model() {
#ifdef HYLENS_DEFAULT_MODEL
    if (fs::exists(HYLENS_DEFAULT_MODEL)) return HYLENS_DEFAULT_MODEL;
#endif
    return fs::path(__FILE__).parent_path().parent_path() / "tests" / "golden" / "models" / "qwen3_5_dense";
}

std::string layer_list(const std::vector<int>& l) {
    std::string s;
    for (std::size_t i = 0; i < l.size(); ++i) s += (i ? "," : "") + std::to_string(l[i]);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const fs::path dir = argc > 1 ? fs::path(argv[1]) : default_model();
        const hylens::AnyModel model = hylens::load(dir);
        std::vector<std::int64_t> donor, host;
        const fs::path surgery = dir.parent_path().parent_path() / "surgery" / dir.filename() / "surgery.safetensors";
        if (fs::exists(surgery)) {
            const auto f = hylens::io::SafetensorsFile::open(surgery);
            donor = f.read_i64("patch.donor.ids");
            host = f.read_i64("patch.host.ids");
        } else {
            std::mt19937 rng(1);
            for (int i = 0; i < 24; ++i) {
                donor.push_back(static_cast<std::int64_t>(rng() % model.config().vocab));
                host.push_back(static_cast<std::int64_t>(rng() % model.config().vocab));
            }
        }
        model.visit([&](const auto& m) {
            using namespace hylens;
            const std::size_t V = m.config().vocab;
            const TokenBatch A(donor), B(host);
            const Tensor3 la = run(m, A).logits, lb = run(m, B).logits;
            const std::int64_t vA = argmax(logits_row(la), V), vB = argmax(logits_row(lb), V);
            std::printf("%s: %zu layers, donor/host %zu tokens, vA = %lld, vB = %lld\n", dir.filename().c_str(),
                        m.num_layers(), host.size(), static_cast<long long>(vA), static_cast<long long>(vB));
            std::printf("host alone: D(A-B) = %+.4f\n\n", logit_diff(logits_row(lb), vA, vB));
            std::printf("%-6s %-12s %-10s %10s %8s\n", "block", "layers", "positions", "D(A-B)", "top");
            // Blocks: the linear layers before each softmax layer (groups(0) of §A.6).
            const auto groups = layer_groups(m.stack(), 0);
            const std::pair<const char*, Positions> sets[] = {{"final", Positions::last()},
                                                              {"question", Positions::range(-4, static_cast<std::int64_t>(host.size()))},
                                                              {"all", Positions::all()}};
            for (std::size_t g = 0; g < groups.size(); ++g)
                for (const auto& [name, pos] : sets) {
                    const MixerTransplant t = transplant_mixer(m, A, B, groups[g].layers, pos);
                    const float* row = logits_row(t.host.logits);
                    std::printf("G%-5zu %-12s %-10s %+10.4f %8lld%s\n", g, layer_list(groups[g].layers).c_str(), name,
                                logit_diff(row, vA, vB), static_cast<long long>(argmax(row, V)),
                                argmax(row, V) == vA ? "  (= vA)" : "");
                }
        });
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "representation_transplant: " << e.what() << "\n";
        return 1;
    }
}
