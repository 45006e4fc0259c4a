#pragma once
// RecurrentCache: the recurrent part of one Gated DeltaNet or Mamba-2 layer for B sequences:
// the conv window (the last K pre-convolution inputs per channel, oldest first, [C, K]) and
// the state (DeltaNet [Hv, dk, dv], Mamba-2 [H, P, N]), both float32. All zeros is exactly
// "no previous state" (a fresh sequence). Values: copyable, comparable.
// Both are xtensor containers: conv windows [B, C, K], states [B, state_shape...]. conv_view /
// state_view give them as xtensor views over this storage (no copy), per sequence or for the
// whole batch; kernels use the raw conv() / state().

#include <xtensor/xarray.hpp>  // xt::xarray

#include <algorithm>  // std::fill
#include <cstddef>    // std::size_t
#include <utility>    // std::move
#include <vector>     // std::vector

#include "../core/error.hpp"
#include "../core/tensor_view.hpp"
#include "channels.hpp"

namespace hylens {

class RecurrentCache {
public:
    using channels = channel::list<channel::recurrent, channel::conv, channel::ssm>;

    RecurrentCache() = default;
    RecurrentCache(std::size_t batch, std::size_t conv_channels, std::size_t conv_width,
                   std::vector<std::size_t> state_shape)
        : B_(batch), C_(conv_channels), K_(conv_width), state_shape_(std::move(state_shape)) {
        // A batch whose sizes wrap around allocated a small buffer (Python's new_cache(2**60)).
        checked_elements({B_, C_, K_}, "RecurrentCache");
        checked_elements(batch_state_shape(), "RecurrentCache");
        state_size_ = 1;
        for (auto d : state_shape_) state_size_ *= d;
        conv_ = Tensor3::from_shape({B_, C_, K_});
        state_ = xt::xarray<float>::from_shape(batch_state_shape());
        reset();
    }

    std::size_t batch() const noexcept { return B_; }
    std::size_t conv_channels() const noexcept { return C_; }
    std::size_t conv_width() const noexcept { return K_; }
    const std::vector<std::size_t>& state_shape() const noexcept { return state_shape_; }
    std::size_t state_size() const noexcept { return state_size_; }

    float* conv(std::size_t b) noexcept { return conv_.data() + b * C_ * K_; }
    const float* conv(std::size_t b) const noexcept { return conv_.data() + b * C_ * K_; }
    float* state(std::size_t b) noexcept { return state_.data() + b * state_size_; }
    const float* state(std::size_t b) const noexcept { return state_.data() + b * state_size_; }

    /// Conv window of sequence b as [conv_channels, conv_width] (a view, no copy).
    TensorView<2> conv_view(std::size_t b) { return make_view<2>(conv(checked(b)), {C_, K_}); }
    ConstTensorView<2> conv_view(std::size_t b) const { return make_view<2>(conv(checked(b)), {C_, K_}); }
    /// Conv windows of every sequence as [batch, conv_channels, conv_width].
    TensorView<3> conv_view() { return make_view<3>(conv_.data(), {B_, C_, K_}); }
    ConstTensorView<3> conv_view() const { return make_view<3>(conv_.data(), {B_, C_, K_}); }
    /// State of sequence b shaped state_shape() (a view, no copy).
    ArrayView state_view(std::size_t b) { return make_view(state(checked(b)), state_shape_); }
    ConstArrayView state_view(std::size_t b) const { return make_view(state(checked(b)), state_shape_); }
    /// States of every sequence as [batch, state_shape...].
    ArrayView state_view() { return make_view(state_.data(), batch_state_shape()); }
    ConstArrayView state_view() const { return make_view(state_.data(), batch_state_shape()); }

    void zero_conv() noexcept { std::fill(conv_.data(), conv_.data() + conv_.size(), 0.0f); }
    void zero_state() noexcept { std::fill(state_.data(), state_.data() + state_.size(), 0.0f); }
    /// Back to "no previous state": conv window and state zeroed.
    void reset() noexcept {
        zero_conv();
        zero_state();
    }

    friend bool operator==(const RecurrentCache&, const RecurrentCache&) = default;

private:
    std::size_t checked(std::size_t b) const {
        check<ShapeError>(b < B_, "[RecurrentCache] sequence ", b, " of a batch of ", B_);
        return b;
    }
    std::vector<std::size_t> batch_state_shape() const {
        std::vector<std::size_t> s{B_};
        s.insert(s.end(), state_shape_.begin(), state_shape_.end());
        return s;
    }

    std::size_t B_ = 0, C_ = 0, K_ = 0, state_size_ = 0;
    std::vector<std::size_t> state_shape_;
    Tensor3 conv_;                                             // [B, C, K]
    xt::xarray<float, xt::layout_type::row_major> state_;  // [B, state_shape...]
};

}  // namespace hylens
