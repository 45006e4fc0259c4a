#pragma once
// Weight: a read-only float tensor stored as float32 or bfloat16, borrowed from a mapped
// checkpoint or owned. bf16 weights stay bf16 (kernels widen them as they read); there is
// never a float32 twin of a bf16 weight.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uintptr_t
#include <memory>   // std::shared_ptr
#include <string>   // std::string
#include <utility>  // std::move
#include <vector>   // std::vector

#include "bf16.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "tensor.hpp"

namespace hylens {

class Weight {
public:
    Weight() = default;

    /// Borrows `data` (float32 or bf16), keeping `owner` alive as long as the Weight lives.
    Weight(DType dtype, const void* data, std::vector<std::size_t> shape, std::shared_ptr<const void> owner,
           std::string name = {})
        : dtype_(dtype), data_(data), shape_(std::move(shape)), owner_(std::move(owner)), name_(std::move(name)) {
        check<UnsupportedError>(dtype_ == DType::F32 || dtype_ == DType::BF16, "[Weight] ", name_,
                                ": only F32 and BF16 weights are used in place, got ", dtype_name(dtype_));
        check<FormatError>(dtype_ != DType::F32 || reinterpret_cast<std::uintptr_t>(data_) % alignof(float) == 0,
                           "[Weight] ", name_, ": float32 data is not 4-byte aligned");
    }

    /// An owning float32 weight.
    static Weight from_floats(std::vector<float> values, std::vector<std::size_t> shape, std::string name = {}) {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        check<ShapeError>(n == values.size(), "[Weight] ", name, ": ", values.size(), " values for shape ",
                          shape_string(shape));
        auto owned = std::make_shared<std::vector<float>>(std::move(values));
        const void* p = owned->data();
        return Weight(DType::F32, p, std::move(shape), std::shared_ptr<const void>(owned, p), std::move(name));
    }

    /// An owning bf16 weight (rounded from float32).
    static Weight from_floats_bf16(const std::vector<float>& values, std::vector<std::size_t> shape,
                                   std::string name = {}) {
        auto owned = std::make_shared<std::vector<bf16>>(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) (*owned)[i] = to_bf16(values[i]);
        const void* p = owned->data();
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        check<ShapeError>(n == values.size(), "[Weight] ", name, ": ", values.size(), " values for shape ",
                          shape_string(shape));
        return Weight(DType::BF16, p, std::move(shape), std::shared_ptr<const void>(owned, p), std::move(name));
    }

    bool empty() const noexcept { return data_ == nullptr; }
    DType dtype() const noexcept { return dtype_; }
    bool is_bf16() const noexcept { return dtype_ == DType::BF16; }
    const std::vector<std::size_t>& shape() const noexcept { return shape_; }
    std::size_t dim(std::size_t i) const { return i < shape_.size() ? shape_[i] : 1; }
    std::size_t rank() const noexcept { return shape_.size(); }
    std::size_t numel() const noexcept {
        std::size_t n = empty() ? 0 : 1;
        for (auto d : shape_) n *= d;
        return n;
    }
    /// Rows and columns of a 2-D view (leading dims folded into rows).
    std::size_t cols() const noexcept { return shape_.empty() ? 1 : shape_.back(); }
    std::size_t rows() const noexcept { return cols() ? numel() / cols() : 0; }
    const std::string& name() const noexcept { return name_; }

    const float* f32() const noexcept { return static_cast<const float*>(data_); }
    const bf16* bf16_data() const noexcept { return static_cast<const bf16*>(data_); }
    const void* raw() const noexcept { return data_; }

    /// Element i, widened to float.
    float at(std::size_t i) const noexcept { return dtype_ == DType::F32 ? f32()[i] : to_f32(bf16_data()[i]); }

    /// Copies `n` elements starting at `offset` into dst as float32.
    void read(std::size_t offset, std::size_t n, float* dst) const noexcept {
        if (dtype_ == DType::F32) {
            for (std::size_t i = 0; i < n; ++i) dst[i] = f32()[offset + i];
        } else {
            widen(bf16_data() + offset, dst, n);
        }
    }

    /// All elements as float32 (small tensors: norms, biases, per-head scalars).
    std::vector<float> to_vector() const {
        std::vector<float> v(numel());
        read(0, v.size(), v.data());
        return v;
    }

    /// A sub-block of rows [r0, r0+n) of a 2-D view (shares the storage).
    Weight row_block(std::size_t r0, std::size_t n) const {
        check<ShapeError>(r0 + n <= rows(), "[Weight] ", name_, ": rows [", r0, ", ", r0 + n, ") out of ", rows());
        const char* base = static_cast<const char*>(data_) + r0 * cols() * dtype_size(dtype_);
        return Weight(dtype_, base, {n, cols()}, owner_, name_);
    }

    /// Element block [i0, i0+count) of a flat view reshaped to `shape` (shares the storage).
    Weight slice(std::size_t i0, std::vector<std::size_t> shape) const {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        check<ShapeError>(i0 + n <= numel(), "[Weight] ", name_, ": slice out of range");
        const char* base = static_cast<const char*>(data_) + i0 * dtype_size(dtype_);
        return Weight(dtype_, base, std::move(shape), owner_, name_);
    }

    const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

private:
    DType dtype_ = DType::F32;
    const void* data_ = nullptr;
    std::vector<std::size_t> shape_;
    std::shared_ptr<const void> owner_;
    std::string name_;
};

/// Throws ShapeError unless w has exactly `shape`; `what` names the layer / parameter.
inline void require_shape(const Weight& w, const std::vector<std::size_t>& shape, const std::string& what) {
    check<ShapeError>(!w.empty(), "[", what, "] missing weight, expected shape ", shape_string(shape));
    check<ShapeError>(w.shape() == shape, "[", what, "] weight ", w.name(), " has shape ", shape_string(w.shape()),
                      ", expected ", shape_string(shape));
}

/// Same for a small parameter held as a float vector.
inline void require_size(const std::vector<float>& v, std::size_t n, const std::string& what) {
    check<ShapeError>(v.size() == n, "[", what, "] has ", v.size(), " values, expected ", n);
}

}  // namespace hylens
