#pragma once
// What generate(), split_prefill() and run() hand back to Python: small structs of NumPy
// arrays (logits and captures own the C++ buffers they view) and the cache they ran on.

#include <hylens/interp/named_tensors.hpp>
#include <hylens/stack/generate.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <map>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "cache.hpp"

namespace hylens::python {

namespace pyb = pybind11;

/// generate()'s result as Python values (batch axis dropped for 1-D input).
struct PyGenerate {
    pyb::object ids, lengths, prompt_logits, step_logits, positions;
    CachePtr cache;
};

inline pyb::array_t<std::int64_t> i64_array(const std::vector<std::int64_t>& v, std::vector<pyb::ssize_t> shape) {
    pyb::array_t<std::int64_t> a(std::move(shape));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

inline PyGenerate to_python(GenerateResult&& r, bool batched, std::size_t V, CachePtr cache) {
    PyGenerate g;
    const std::size_t B = r.ids.size(), n = B ? r.ids[0].size() : 0, steps = r.step_logits.size();
    std::vector<std::int64_t> flat;
    for (const auto& row : r.ids) flat.insert(flat.end(), row.begin(), row.end());
    const auto sB = static_cast<pyb::ssize_t>(B), sn = static_cast<pyb::ssize_t>(n), sV = static_cast<pyb::ssize_t>(V);
    g.ids = batched ? i64_array(flat, {sB, sn}) : i64_array(flat, {sn});
    const std::vector<std::int64_t> lengths(r.lengths.begin(), r.lengths.end());
    g.lengths = batched ? pyb::object(i64_array(lengths, {sB})) : pyb::object(pyb::int_(B ? lengths[0] : 0));
    g.prompt_logits = to_numpy(std::move(r.prompt_logits), !batched);
    std::vector<float> st(steps * B * V);
    for (std::size_t s = 0; s < steps; ++s) std::copy(r.step_logits[s].data(), r.step_logits[s].data() + B * V, st.data() + s * B * V);
    const auto ss = static_cast<pyb::ssize_t>(steps);
    g.step_logits = batched ? to_numpy(std::move(st), {ss, sB, sV}) : to_numpy(std::move(st), {ss, sV});
    g.positions = i64_array(r.positions, {static_cast<pyb::ssize_t>(r.positions.size())});
    g.cache = std::move(cache);
    return g;
}

struct PySplit {
    PyGenerate run;
    CachePtr cache;
    std::int64_t position = 0;
};

/// run()'s result: logits, captures (name -> array owning the C++ buffer), coverage.
struct PyRun {
    pyb::object logits;
    pyb::dict captures;
    std::vector<double> coverage;
};

inline pyb::dict to_python(NamedTensors& t) {
    pyb::dict out;
    // The map is ours (a local result): move each buffer into the array that views it.
    auto& all = const_cast<std::map<std::string, NamedTensor>&>(t.all());
    for (auto& [name, tensor] : all) {
        std::vector<pyb::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
        auto owner = std::make_unique<NamedTensor>(std::move(tensor));
        const float* data = owner->data();
        out[pyb::str(name)] = owning_array(std::move(owner), data, std::move(shape));
    }
    return out;
}

}  // namespace hylens::python
