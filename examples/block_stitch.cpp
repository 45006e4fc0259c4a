// Cross-model block stitch (Paper A exp27, protocols.md §A.11): replace a block of a
// receiver model by a donor model's block, with affine maps M_in / M_out fitted by ridge in
// closed form, and compare the stitched model's predictions with the intact receiver's.
//
//   block_stitch [RECEIVER_DIR DONOR_DIR]
//
// Defaults: receiver models/granite-h-tiny (Mamba-2 + attention), donor models/qwen35-tiny
// (Gated DeltaNet + attention), the trained organisms (docs/organisms.md). The stitched model is
// a new stack type, HybridStack<Mamba2Layer<>, AttentionLayer<>, StitchBlock<LinearAdapter,
// QwenStack>>, and runs through the ordinary forward. Both models are fed the same token ids
// (random ones, below both vocabularies), although their tokenizers differ, so the table shows
// the mechanics (fit quality, agreement with the intact model), not a study: the study with text,
// token alignment across the two tokenizers and every control is `hylens experiment stitch`.

#include <hylens/interp/lens.hpp>
#include <hylens/interp/reader_search.hpp>
#include <hylens/interp/stitch.hpp>
#include <hylens/models/load.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <stdexcept>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path organism(const char* name) {
#ifdef HYLENS_MODELS_DIR
    if (fs::exists(fs::path(HYLENS_MODELS_DIR) / name)) return fs::path(HYLENS_MODELS_DIR) / name;
#endif
    return fs::path(__FILE__).parent_path().parent_path() / "models" / name;
}

std::vector<std::vector<std::int64_t>> prompts(std::size_t n, std::size_t T, std::size_t vocab, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<std::int64_t>> out(n, std::vector<std::int64_t>(T));
    for (auto& p : out)
        for (auto& t : p) t = static_cast<std::int64_t>(rng() % vocab);
    return out;
}

/// Share of test prompts whose final top token equals the intact receiver's, and the mean
/// max |logit difference| at the final position; `other(ids)` returns the compared logits.
template <class Intact, class Other>
std::pair<double, double> agreement(const Intact& intact, Other&& other,
                                    const std::vector<std::vector<std::int64_t>>& test) {
    double same = 0, diff = 0;
    const std::size_t V = intact.config().vocab;
    for (const auto& ids : test) {
        const hylens::Tensor3 a = hylens::run(intact, hylens::TokenBatch(ids)).logits;
        const hylens::Tensor3 b = other(hylens::TokenBatch(ids));
        const float *ra = hylens::logits_row(a), *rb = hylens::logits_row(b);
        same += hylens::argmax(ra, V) == hylens::argmax(rb, V);
        double d = 0;
        for (std::size_t v = 0; v < V; ++v) d = std::max(d, std::fabs(double(ra[v]) - rb[v]));
        diff += d;
    }
    return {same / static_cast<double>(test.size()), diff / static_cast<double>(test.size())};
}

/// A callable running model m (with interventions iv) on one prompt.
template <class M>
auto runner(const M& m, std::vector<hylens::Intervention> iv = {}) {
    return [&m, iv](const hylens::TokenBatch& ids) { return hylens::run(m, ids, iv).logits; };
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const fs::path rdir = argc > 2 ? fs::path(argv[1]) : organism("granite-h-tiny");
        const fs::path ddir = argc > 2 ? fs::path(argv[2]) : organism("qwen35-tiny");
        const hylens::AnyModel recv_any = hylens::load(rdir), donor_any = hylens::load(ddir);
        recv_any.visit([&](const auto& recv) {
            donor_any.visit([&](const auto& donor) {
                using namespace hylens;
                const std::size_t vocab = std::min(recv.config().vocab, donor.config().vocab);
                // Receiver slot: its second block (or first); donor block: its first block.
                const auto rg = layer_groups(recv.stack(), 0), dg = layer_groups(donor.stack(), 0);
                if (rg.empty() || dg.empty() || rg.back().layers.empty() || dg.front().layers.empty())
                    throw std::invalid_argument("both models need a linear block before a softmax layer");
                const std::vector<LayerIndex>& slot = (rg.size() > 1 ? rg[1] : rg[0]).layers;
                const std::vector<LayerIndex>& dblock = dg.front().layers;
                std::vector<StitchItem> items;
                for (auto& p : prompts(60, 24, vocab, 1)) items.push_back({p});
                const auto test = prompts(20, 24, vocab, 2);

                const StitchFit fit = fit_stitch(recv, slot.front(), slot.back(), donor, dblock, items);
                const StitchPlan plan{{{slot.front(), slot.back(), dblock, false}}};
                const auto stitched = stitch<LinearAdapter>(recv, plan, donor, {fit.adapter});
                const StitchPlan plan_nomix{{{slot.front(), slot.back(), dblock, true}}};
                const auto nomix = stitch<LinearAdapter>(recv, plan_nomix, donor, {fit.adapter});

                std::printf("receiver %s (hidden %zu), slot layers %zu-%zu; donor %s (hidden %zu), block layers %zu-%zu\n",
                            rdir.filename().c_str(), recv.config().hidden, slot.front(), slot.back(),
                            ddir.filename().c_str(), donor.config().hidden, dblock.front(), dblock.back());
                std::printf("M_in  R^2 = %.4f (lambda 10^%.1f x lambda_max)\n", fit.r2_in, fit.m_in.lambda_exponent());
                std::printf("M_out R^2 = %.4f (lambda 10^%.1f x lambda_max)\n\n", fit.r2_out,
                            fit.m_out.lambda_exponent());
                std::printf("%-34s %14s %20s\n", "condition", "top-1 = intact", "mean max|dlogit|");
                const auto row = [](const char* name, std::pair<double, double> a) {
                    std::printf("%-34s %14.2f %20.4f\n", name, a.first, a.second);
                };
                row("intact", agreement(recv, runner(recv), test));
                row("removed (block outputs its input)", agreement(recv, runner(recv, {skip_layers(slot)}), test));
                row("donor block, stitched", agreement(recv, runner(stitched), test));
                row("donor block, mixers zeroed", agreement(recv, runner(nomix), test));
            });
        });
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "block_stitch: " << e.what() << "\n";
        return 1;
    }
}
