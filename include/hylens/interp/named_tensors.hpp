#pragma once
// NamedTensors: an ordered collection of float32 tensors by name (captures, dumps, cache
// exports), written to and read from safetensors by io/. Each NamedTensor is an owning,
// row-major xtensor container (xt::xarray<float>): shape(), data(), size(), xt::view() and
// every xtensor expression work on it directly (docs/containers.md). flat() hands out the
// row-major values as a span for code that wants a pointer (io, kernels, interventions);
// rank_view<N>() fixes the rank at compile time with a checked ShapeError.

#include <algorithm>  // std::copy
#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <map>      // std::map
#include <span>     // std::span
#include <string>   // std::string
#include <utility>  // std::move
#include <vector>   // std::vector

#include <xtensor/xarray.hpp>       // xt::xarray
#include <xtensor/xexpression.hpp>  // xt::xexpression

#include "../core/error.hpp"
#include "../core/tensor_view.hpp"

namespace hylens {

/// One named tensor: an owning row-major xtensor container of float32 of any rank.
using NamedTensor = xt::xarray<float, xt::layout_type::row_major>;

/// The row-major values of `t` as one flat span (no copy): what io and kernels read.
inline std::span<const float> flat(const NamedTensor& t) noexcept { return {t.data(), t.size()}; }
inline std::span<float> flat(NamedTensor& t) noexcept { return {t.data(), t.size()}; }

/// A copy of the row-major values, for data that owns its rows (interventions, fits).
inline std::vector<float> to_vector(const NamedTensor& t) { return {t.data(), t.data() + t.size()}; }

/// `t` shape as a std::vector (the shape type of io/ and of the reference files).
inline std::vector<std::size_t> shape_of(const NamedTensor& t) { return {t.shape().begin(), t.shape().end()}; }

/// `t` as a rank-N view (no copy; writes go to `t`). A ShapeError when `t` has another rank.
template <std::size_t N>
std::array<std::size_t, N> rank_shape(const NamedTensor& t) {
    check<ShapeError>(t.dimension() == N, "[NamedTensor] a rank-", N, " view of a tensor of shape ",
                      shape_string(t.shape()));
    std::array<std::size_t, N> s{};
    for (std::size_t i = 0; i < N; ++i) s[i] = t.shape()[i];
    return s;
}
template <std::size_t N>
TensorView<N> rank_view(NamedTensor& t) {
    return make_view<N>(t.data(), rank_shape<N>(t));
}
template <std::size_t N>
ConstTensorView<N> rank_view(const NamedTensor& t) {
    return make_view<N>(t.data(), rank_shape<N>(t));
}

class NamedTensors {
public:
    /// Stores row-major `values` of `shape` (a ShapeError when their sizes differ).
    void put(const std::string& name, const std::vector<std::size_t>& shape, std::span<const float> values) {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        check<ShapeError>(n == values.size(), "[NamedTensors] ", name, ": ", values.size(), " values for ", n, " elements");
        NamedTensor t = NamedTensor::from_shape(shape);
        std::copy(values.begin(), values.end(), t.data());
        map_.insert_or_assign(name, std::move(t));
    }
    void put(const std::string& name, const std::vector<std::size_t>& shape, const std::vector<float>& values) {
        put(name, shape, std::span<const float>(values));
    }
    void put(const std::string& name, const std::vector<std::size_t>& shape, const float* data) {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        put(name, shape, std::span<const float>(data, n));
    }
    /// Stores a container (moved in, no copy).
    void put(const std::string& name, NamedTensor t) { map_.insert_or_assign(name, std::move(t)); }
    /// Stores an xtensor expression (a view, a lazy expression), evaluated row-major.
    template <class E>
    void put(const std::string& name, const xt::xexpression<E>& e) {
        put(name, NamedTensor(e));
    }
    bool contains(const std::string& name) const { return map_.count(name) != 0; }
    const NamedTensor& at(const std::string& name) const {
        auto it = map_.find(name);
        check<ShapeError>(it != map_.end(), "[NamedTensors] no tensor named '", name, "'");
        return it->second;
    }
    const std::map<std::string, NamedTensor>& all() const noexcept { return map_; }
    std::size_t size() const noexcept { return map_.size(); }

private:
    std::map<std::string, NamedTensor> map_;
};

}  // namespace hylens
