#pragma once
// ParallelLayer<A, B>: two token mixers run side by side on the same normed input and their
// scaled outputs summed (Falcon-H1: attention and Mamba-2 in every layer, families.md §5.4):
//   out = mult_a * A(x) + mult_b * B(x)
// Its cache holds both halves, so it declares both channels and cache surgery needs no
// special code for it.

#include <cstddef>  // std::size_t
#include <span>     // std::span

#include "../cache/parallel_cache.hpp"
#include "../core/thread_pool.hpp"
#include "concepts.hpp"
#include "hooks.hpp"
#include "../kernels/workspace.hpp"

namespace hylens {

template <class A, class B>
struct ParallelConfig {
    typename A::config_type a;
    typename B::config_type b;
    float mult_a = 1.0f;  ///< Falcon-H1 attention_out_multiplier
    float mult_b = 1.0f;  ///< Falcon-H1 ssm_out_multiplier
};

template <class A, class B>
class ParallelLayer {
    static_assert(detail::assert_mixer_kind<A>() && detail::assert_mixer_kind<B>());

public:
    using first_kind = A;
    using second_kind = B;
    using cache_type = ParallelCache<typename A::cache_type, typename B::cache_type>;
    using config_type = ParallelConfig<A, B>;
    static constexpr const char* kind_name = "parallel";

    ParallelLayer() = default;
    ParallelLayer(A a, B b, float mult_a, float mult_b)
        : a_(std::move(a)), b_(std::move(b)), c_{a_.config(), b_.config(), mult_a, mult_b} {}

    const config_type& config() const noexcept { return c_; }
    const A& first() const noexcept { return a_; }
    const B& second() const noexcept { return b_; }

    cache_type new_cache(std::size_t batch) const { return cache_type{a_.new_cache(batch), b_.new_cache(batch)}; }

    void forward(const float* x, std::size_t B_, std::size_t T, float* out, cache_type& cache,
                 const ForwardContext& ctx) const {
        const std::size_t H = hidden();
        Workspace::Frame ws;
        const std::span<float> ob = ws.uninitialized<float>(B_ * T * H);  // written in full by B
        a_.forward(x, B_, T, out, cache.first, ctx);
        ctx.fire(A::out_site, out, B_, T, H, H);
        b_.forward(x, B_, T, ob.data(), cache.second, ctx);
        ctx.fire(B::out_site, ob.data(), B_, T, H, H);
        for_each_element(B_ * T, H, [&](std::size_t i) { out[i] = c_.mult_a * out[i] + c_.mult_b * ob[i]; });
    }

private:
    std::size_t hidden() const noexcept { return a_.config().hidden; }

    A a_;
    B b_;
    config_type c_;
};

}  // namespace hylens
