#pragma once
// NamedTensors: an ordered collection of float32 tensors by name (captures, dumps, cache
// exports), written to and read from safetensors by io/. A NamedTensor keeps its row-major
// values in a std::vector (shape + values, as before); view() shows them as an xtensor
// container of that shape without copying (docs/containers.md).

#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <map>      // std::map
#include <string>   // std::string
#include <vector>   // std::vector

#include <xtensor/xexpression.hpp>  // xt::xexpression

#include "../core/error.hpp"
#include "../core/tensor_view.hpp"

namespace hylens {

struct NamedTensor {
    std::vector<std::size_t> shape;
    std::vector<float> values;  ///< row-major, product(shape) elements

    /// The values shaped `shape` as an xtensor container (a view, no copy; writes go to
    /// `values`). Valid while `values` is not reallocated.
    ArrayView view() { return make_view(checked_data(), shape); }
    ConstArrayView view() const { return make_view(checked_data(), shape); }
    /// The same with the rank fixed at compile time; a ShapeError when the rank differs.
    template <std::size_t N>
    TensorView<N> view() {
        return make_view<N>(checked_data(), fixed_shape<N>());
    }
    template <std::size_t N>
    ConstTensorView<N> view() const {
        return make_view<N>(checked_data(), fixed_shape<N>());
    }

private:
    float* checked_data() {
        check_size();
        return values.data();
    }
    const float* checked_data() const {
        check_size();
        return values.data();
    }
    void check_size() const {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        check<ShapeError>(n == values.size(), "[NamedTensor] shape ", shape_string(shape), " needs ", n, " values, holds ",
                          values.size());
    }
    template <std::size_t N>
    std::array<std::size_t, N> fixed_shape() const {
        check<ShapeError>(shape.size() == N, "[NamedTensor] a rank-", N, " view of a tensor of shape ", shape_string(shape));
        std::array<std::size_t, N> s{};
        for (std::size_t i = 0; i < N; ++i) s[i] = shape[i];
        return s;
    }
};

class NamedTensors {
public:
    void put(const std::string& name, std::vector<std::size_t> shape, std::vector<float> values) {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        check<ShapeError>(n == values.size(), "[NamedTensors] ", name, ": ", values.size(), " values for ", n, " elements");
        map_[name] = NamedTensor{std::move(shape), std::move(values)};
    }
    void put(const std::string& name, std::vector<std::size_t> shape, const float* data) {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        put(name, std::move(shape), std::vector<float>(data, data + n));
    }
    /// Stores an xtensor expression (evaluated, row-major) under `name`.
    template <class E>
    void put(const std::string& name, const xt::xexpression<E>& e) {
        const auto& x = e.derived_cast();
        std::vector<std::size_t> shape(x.shape().begin(), x.shape().end());
        std::vector<float> values(x.size());
        make_view(values.data(), shape) = x;
        map_[name] = NamedTensor{std::move(shape), std::move(values)};
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
