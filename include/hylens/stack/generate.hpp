#pragma once
// Generation on any cache, mixed caches included: feed the prompt (or query) from the
// cache's next position (or an explicit start), then one token at a time, each the argmax of
// the previous logits (greedy, the default) or a seeded draw (GenerateOptions::sampling,
// stack/sampling.hpp). Every step appends K/V at the next position and advances the
// recurrent states.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <vector>   // std::vector

#include "../core/precision.hpp"  // HoldRoundActivations
#include "../core/tensor.hpp"
#include "causal_lm.hpp"
#include "sampling.hpp"

namespace hylens {

struct GenerateOptions {
    std::size_t max_new = 16;               ///< tokens to generate
    std::vector<std::int64_t> stop_ids{};   ///< stop once every sequence has produced one of these (at any step)
    std::int64_t start_position = -1;       ///< position of the first prompt token (-1: cache.next_position())
    bool feed_last = false;                 ///< also feed the last generated token (its logits are returned)
    const Hook* hook = nullptr;             ///< sees every forward (prompt and steps)
    SamplingOptions sampling{};             ///< default: greedy
    bool check_finite = false;              ///< ForwardOptions::check_finite on every forward
    /// false: step_logits stays empty, for a caller that reads the ids alone (the channel study,
    /// the judge); the same ids. Kept, a batch of 16 holds 16 x V floats a step: 16 GB over
    /// 1,024 steps of a 248k vocabulary. (The prompt's logits are computed at every position
    /// either way: a last-position-only head is a product of fewer rows, which may take the
    /// matrix-vector kernel and round its sums otherwise.)
    bool keep_logits = true;
};

struct GenerateResult {
    Tensor3 prompt_logits;                  ///< [B, T_prompt, V]
    std::vector<std::vector<std::int64_t>> ids;  ///< [B][n] generated tokens (n: the steps the batch ran)
    /// Per sequence: its ids up to and including its first stop id, or n when it produced none.
    /// A batch runs until every sequence has stopped, so a sequence that stopped earlier has
    /// further draws after its stop id (fed like any other; they are not part of its answer).
    std::vector<std::size_t> lengths;
    std::vector<Tensor2> step_logits;       ///< per fed generated token: [B, V] logits after feeding it (none without keep_logits)
    std::vector<std::int64_t> positions;    ///< every position used (prompt and fed tokens)
};

template <class Model>
GenerateResult generate(const Model& model, typename Model::cache_type& cache, const TokenBatch& prompt,
                        const GenerateOptions& opt = {}) {
    const precision::HoldRoundActivations one_arithmetic;  // every step of the generation
    const std::size_t B = prompt.batch, T = prompt.T(), V = model.config().vocab;
    opt.sampling.validate();
    SplitMix64 rng(opt.sampling.seed);
    GenerateResult res;
    check<ShapeError>(opt.start_position >= -1, "[generate] start_position ", opt.start_position,
                      " (a position, or -1 for the cache's next one)");
    std::int64_t p = opt.start_position >= 0 ? opt.start_position : static_cast<std::int64_t>(cache.next_position());
    // Every position must fit an int64 (it wrapped to a negative): the prompt's here, each fed
    // token's below.
    check<ShapeError>(static_cast<std::uint64_t>(INT64_MAX - p) >= T, "[generate] positions from ", p, " for ", T,
                      " prompt tokens overflow a 64-bit position");
    // A stop id the model cannot produce never matched: the run went on to max_new silently.
    for (std::int64_t s : opt.stop_ids)
        check<ShapeError>(s >= 0 && static_cast<std::size_t>(s) < V, "[generate] stop id ", s,
                          " is outside the model's vocabulary of ", V, " (it could never be generated)");
    std::vector<std::int64_t> pos(T);
    for (std::size_t t = 0; t < T; ++t) pos[t] = p++;
    res.positions = pos;
    ForwardOptions fo;
    fo.hook = opt.hook;
    fo.check_finite = opt.check_finite;
    fo.positions = pos;
    res.prompt_logits = model.forward(prompt, cache, fo);
    res.ids.assign(B, {});
    res.lengths.assign(B, 0);
    std::vector<char> stopped(B, 0);
    std::vector<const float*> last(B);
    for (std::size_t b = 0; b < B; ++b) last[b] = res.prompt_logits.data() + (b * T + T - 1) * V;
    Tensor3 step;
    for (std::size_t n = 0; n < opt.max_new; ++n) {
        TokenBatch next;
        next.batch = B;
        bool all_stopped = !opt.stop_ids.empty();
        for (std::size_t b = 0; b < B; ++b) {
            const std::int64_t id = choose_token(last[b], V, opt.sampling, rng);
            res.ids[b].push_back(id);
            next.ids.push_back(id);
            for (auto s : opt.stop_ids)
                if (!stopped[b] && s == id) {
                    stopped[b] = 1;
                    res.lengths[b] = n + 1;
                }
            all_stopped = all_stopped && stopped[b];
        }
        const bool final = (n + 1 == opt.max_new) || all_stopped;
        if (final && !opt.feed_last) break;
        check<ShapeError>(p < INT64_MAX, "[generate] the next position overflows a 64-bit position");
        const std::int64_t step_pos[1] = {p++};
        res.positions.push_back(step_pos[0]);
        fo.positions = std::span<const std::int64_t>(step_pos, 1);
        model.forward(next, cache, step, fo);  // the step's logits tensor is reused
        if (!opt.keep_logits) {  // read by the next choice, before the next forward
            for (std::size_t b = 0; b < B; ++b) last[b] = step.data() + b * V;
            if (final) break;
            continue;
        }
        Tensor2 row = Tensor2::from_shape({B, V});
        std::copy(step.data(), step.data() + B * V, row.data());
        res.step_logits.push_back(std::move(row));
        for (std::size_t b = 0; b < B; ++b) last[b] = res.step_logits.back().data() + b * V;
        if (final) break;
    }
    for (std::size_t b = 0; b < B; ++b)
        if (!stopped[b]) res.lengths[b] = res.ids[b].size();
    return res;
}

}  // namespace hylens
