#pragma once
// NamedTensors: an ordered collection of float32 tensors by name (captures, dumps, cache
// exports), written to and read from safetensors by io/.

#include <cstddef>  // std::size_t
#include <map>      // std::map
#include <string>   // std::string
#include <vector>   // std::vector

#include "../core/error.hpp"

namespace hylens {

struct NamedTensor {
    std::vector<std::size_t> shape;
    std::vector<float> values;
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
