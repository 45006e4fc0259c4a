#pragma once
// KVCache: the K and V of one attention layer for B sequences of equal length.
// Layout per sequence b and KV head j: [capacity, head_dim] rows, so the keys of one head are
// contiguous (what attention's sgemm wants). K is stored exactly as it enters the score
// (after any k-norm, key multiplier and RoPE), V raw. Values: copyable, comparable.
// K and V are each one xtensor container [batch, kv_heads, capacity, head_dim]. k_view / v_view
// give the filled positions as xtensor views over it (no copy): [kv_heads, length, head_dim] per
// sequence, [batch, kv_heads, length, head_dim] for all; valid until the cache grows
// (reserve_more, a forward) or dies. Kernels use the raw k() / v().

#include <xtensor/xview.hpp>  // xt::view, xt::range

#include <algorithm>    // std::copy, std::max
#include <cstddef>      // std::size_t
#include <limits>       // std::numeric_limits
#include <type_traits>  // std::remove_cvref_t
#include <utility>      // std::declval, std::forward, std::move

#include "../core/error.hpp"
#include "../core/tensor_view.hpp"
#include "channels.hpp"

namespace hylens {

namespace detail {
template <class View>
auto filled_positions(View&& capacity_view, std::size_t length) {
    if constexpr (std::remove_cvref_t<View>::rank == 3)
        return xt::view(std::forward<View>(capacity_view), xt::all(), xt::range(std::size_t{0}, length), xt::all());
    else
        return xt::view(std::forward<View>(capacity_view), xt::all(), xt::all(), xt::range(std::size_t{0}, length), xt::all());
}
}  // namespace detail

/// K or V of one sequence, [kv_heads, length, head_dim] (a strided xt::view over the cache).
using KVView = decltype(detail::filled_positions(std::declval<TensorView<3>>(), 0));
using ConstKVView = decltype(detail::filled_positions(std::declval<ConstTensorView<3>>(), 0));
/// K or V of every sequence, [batch, kv_heads, length, head_dim].
using KVBatchView = decltype(detail::filled_positions(std::declval<TensorView<4>>(), 0));
using ConstKVBatchView = decltype(detail::filled_positions(std::declval<ConstTensorView<4>>(), 0));

class KVCache {
public:
    using channels = channel::list<channel::kv>;

    KVCache() = default;
    KVCache(std::size_t batch, std::size_t kv_heads, std::size_t head_dim)
        : B_(batch), H_(kv_heads), hd_(head_dim) {
        checked_elements({B_, H_, std::size_t{16}, hd_}, "KVCache");  // the first reserve's, refused when made
    }

    std::size_t batch() const noexcept { return B_; }
    std::size_t kv_heads() const noexcept { return H_; }
    std::size_t head_dim() const noexcept { return hd_; }
    std::size_t length() const noexcept { return len_; }
    std::size_t capacity() const noexcept { return cap_; }
    /// Elements between two KV heads (the ld_head of kernels::attention).
    std::size_t head_stride() const noexcept { return cap_ * hd_; }

    /// Makes room for `extra` more positions (amortised doubling).
    void reserve_more(std::size_t extra) {
        const std::size_t need = len_ + extra;
        if (need <= cap_) return;
        check<ShapeError>(need >= len_, "[KVCache] ", len_, " + ", extra, " positions overflow");
        const std::size_t doubled = cap_ <= std::numeric_limits<std::size_t>::max() / 2 ? cap_ * 2 : need;  // amortised growth
        const std::size_t cap = std::max<std::size_t>(need, std::max<std::size_t>(16, doubled));
        checked_elements({B_, H_, cap, hd_}, "KVCache");
        Tensor4 k = Tensor4::from_shape({B_, H_, cap, hd_}), v = Tensor4::from_shape({B_, H_, cap, hd_});
        k.fill(0.0f);
        v.fill(0.0f);
        for (std::size_t b = 0; b < B_; ++b)
            for (std::size_t j = 0; j < H_; ++j) {
                const std::size_t src = (b * H_ + j) * cap_ * hd_, dst = (b * H_ + j) * cap * hd_;
                std::copy(k_.data() + src, k_.data() + src + len_ * hd_, k.data() + dst);
                std::copy(v_.data() + src, v_.data() + src + len_ * hd_, v.data() + dst);
            }
        k_ = std::move(k);
        v_ = std::move(v);
        cap_ = cap;
    }

    /// Start of K (or V) of sequence b, head j; position p is at + p * head_dim.
    float* k(std::size_t b, std::size_t j) noexcept { return k_.data() + (b * H_ + j) * cap_ * hd_; }
    float* v(std::size_t b, std::size_t j) noexcept { return v_.data() + (b * H_ + j) * cap_ * hd_; }
    const float* k(std::size_t b, std::size_t j) const noexcept { return k_.data() + (b * H_ + j) * cap_ * hd_; }
    const float* v(std::size_t b, std::size_t j) const noexcept { return v_.data() + (b * H_ + j) * cap_ * hd_; }

    /// K (or V) of sequence b as [kv_heads, length, head_dim]: a view of the filled positions,
    /// no copy; writing through a mutable view writes the cache.
    KVView k_view(std::size_t b) { return detail::filled_positions(make_view<3>(k(checked(b), 0), {H_, cap_, hd_}), len_); }
    KVView v_view(std::size_t b) { return detail::filled_positions(make_view<3>(v(checked(b), 0), {H_, cap_, hd_}), len_); }
    ConstKVView k_view(std::size_t b) const {
        return detail::filled_positions(make_view<3>(k(checked(b), 0), {H_, cap_, hd_}), len_);
    }
    ConstKVView v_view(std::size_t b) const {
        return detail::filled_positions(make_view<3>(v(checked(b), 0), {H_, cap_, hd_}), len_);
    }
    /// K (or V) of every sequence as [batch, kv_heads, length, head_dim] (a view, no copy).
    KVBatchView k_view() { return detail::filled_positions(make_view<4>(k_.data(), {B_, H_, cap_, hd_}), len_); }
    KVBatchView v_view() { return detail::filled_positions(make_view<4>(v_.data(), {B_, H_, cap_, hd_}), len_); }
    ConstKVBatchView k_view() const { return detail::filled_positions(make_view<4>(k_.data(), {B_, H_, cap_, hd_}), len_); }
    ConstKVBatchView v_view() const { return detail::filled_positions(make_view<4>(v_.data(), {B_, H_, cap_, hd_}), len_); }

    /// Marks `n` more positions as filled (after writing them with k()/v()).
    void commit(std::size_t n) {
        check<ShapeError>(len_ + n <= cap_, "[KVCache] commit of ", n, " positions past capacity ", cap_);
        len_ += n;
    }
    /// Drops every position (the KV channel becomes empty); capacity is kept.
    void clear() noexcept { len_ = 0; }
    /// Keeps the first n positions.
    void truncate(std::size_t n) {
        check<ShapeError>(n <= len_, "[KVCache] truncate to ", n, " of ", len_, " positions");
        len_ = n;
    }

    /// Equal shapes, lengths and the same K/V values at every filled position (bitwise).
    friend bool operator==(const KVCache& a, const KVCache& b) {
        if (a.B_ != b.B_ || a.H_ != b.H_ || a.hd_ != b.hd_ || a.len_ != b.len_) return false;
        for (std::size_t s = 0; s < a.B_; ++s)
            for (std::size_t j = 0; j < a.H_; ++j)
                for (std::size_t i = 0; i < a.len_ * a.hd_; ++i)
                    if (a.k(s, j)[i] != b.k(s, j)[i] || a.v(s, j)[i] != b.v(s, j)[i]) return false;
        return true;
    }

private:
    std::size_t checked(std::size_t b) const {
        check<ShapeError>(b < B_, "[KVCache] sequence ", b, " of a batch of ", B_);
        return b;
    }

    std::size_t B_ = 0, H_ = 0, hd_ = 0, len_ = 0, cap_ = 0;
    Tensor4 k_, v_;  // [B, H, cap, hd]
};

}  // namespace hylens
