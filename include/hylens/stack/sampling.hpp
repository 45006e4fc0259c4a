#pragma once
// Next-token choice for generate(): greedy (the default: the argmax, first index on ties) or
// sampling with temperature, top-k and top-p (nucleus), drawn from a fixed portable PRNG
// (splitmix64), so one seed gives the same tokens on every machine and standard library.
//
//   sampling a row of logits z (temperature tau > 0):
//     p_v = softmax(z / tau)  over the k largest logits (top_k > 0), then over the smallest
//     prefix of them, by descending p, whose mass reaches top_p (top_p < 1); renormalized;
//     one uniform draw u in [0, 1) picks the token whose cumulative mass first exceeds u.
// Ties in the ordering go to the lower token id.

#include <algorithm>  // std::sort, std::partial_sort
#include <cmath>      // std::exp, std::isfinite
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t, std::int64_t
#include <numeric>    // std::iota
#include <vector>     // std::vector

#include "../core/error.hpp"

namespace hylens {

/// splitmix64 (Steele, Lea, Flood 2014): a fixed 64-bit generator, identical everywhere.
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed = 0) noexcept : s_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, 1) with 53 random bits.
    double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    std::uint64_t s_;
};

struct SamplingOptions {
    float temperature = 0.0f;  ///< 0: greedy (argmax); > 0: sample from softmax(logits / temperature)
    std::size_t top_k = 0;     ///< keep the k most likely tokens (0: all)
    float top_p = 1.0f;        ///< keep the smallest set of most likely tokens with mass >= top_p (1: all)
    std::uint64_t seed = 0;    ///< PRNG seed (one stream for the whole generate call)

    bool greedy() const noexcept { return temperature == 0.0f; }
    void validate() const {
        check<ShapeError>(temperature >= 0.0f && std::isfinite(temperature),
                          "[sampling] temperature must be a finite number >= 0, got ", temperature);
        check<ShapeError>(top_p > 0.0f && top_p <= 1.0f, "[sampling] top_p must be in (0, 1], got ", top_p);
    }
};

namespace detail {

inline std::int64_t argmax_row(const float* row, std::size_t V) noexcept {
    std::size_t best = 0;
    for (std::size_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
    return static_cast<std::int64_t>(best);
}

}  // namespace detail

/// The token ids of `row` [V] by descending logit (ties: lower id first; NaN last), the first
/// `k` only (k = 0 or k >= V: all).
inline std::vector<std::size_t> top_ids(const float* row, std::size_t V, std::size_t k = 0) {
    std::vector<std::size_t> idx(V);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    // NaN orders last (a strict weak order even on non-finite rows).
    const auto key = [row](std::size_t i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };
    const auto before = [&key](std::size_t a, std::size_t b) {
        const float ka = key(a), kb = key(b);
        return ka > kb || (ka == kb && a < b);
    };
    if (k == 0 || k >= V) {
        std::sort(idx.begin(), idx.end(), before);
    } else {
        std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), before);
        idx.resize(k);
    }
    return idx;
}

/// softmax(row) [V] in double (probabilities for reports).
inline std::vector<double> softmax(const float* row, std::size_t V, double temperature = 1.0) {
    double mx = row[0];
    for (std::size_t v = 1; v < V; ++v) mx = row[v] > mx ? row[v] : mx;
    std::vector<double> p(V);
    double sum = 0.0;
    for (std::size_t v = 0; v < V; ++v) sum += p[v] = std::exp((row[v] - mx) / temperature);
    for (double& x : p) x /= sum;
    return p;
}

/// The next token for one row of logits [V]: the argmax when opt.greedy(), else a draw. A
/// non-finite logit is an Error either way (with NaN the argmax was id 0, or whichever id came
/// before the NaN: a token from garbage, where the forward's finite check was turned off).
inline std::int64_t choose_token(const float* row, std::size_t V, const SamplingOptions& opt, SplitMix64& rng) {
    for (std::size_t v = 0; v < V; ++v)
        check(std::isfinite(row[v]), "[sampling] logit of token ", v, " is ", row[v], "; cannot ",
              opt.greedy() ? "take the argmax of" : "sample from",
              " non-finite logits (ForwardOptions::check_finite locates the cause)");
    if (opt.greedy()) return detail::argmax_row(row, V);
    const std::vector<std::size_t> ids = top_ids(row, V, opt.top_k);
    // Softmax over the kept ids at the temperature (ids[0] holds the largest logit).
    std::vector<double> p(ids.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < ids.size(); ++i)
        sum += p[i] = std::exp((static_cast<double>(row[ids[i]]) - row[ids[0]]) / opt.temperature);
    std::size_t n = ids.size();
    if (opt.top_p < 1.0f) {
        double mass = 0.0;
        for (std::size_t i = 0; i < ids.size(); ++i) {
            mass += p[i] / sum;
            if (mass >= opt.top_p) {
                n = i + 1;
                break;
            }
        }
        sum = 0.0;
        for (std::size_t i = 0; i < n; ++i) sum += p[i];
    }
    const double u = rng.uniform() * sum;
    double c = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        c += p[i];
        if (u < c) return static_cast<std::int64_t>(ids[i]);
    }
    return static_cast<std::int64_t>(ids[n - 1]);  // rounding left u at the very end
}

}  // namespace hylens
