#pragma once
// Test-only safetensors reader for tests/golden/kernels: the 8-byte little-endian header
// length, the JSON header, then raw little-endian data. Reads F32 and I64 tensors into
// float vectors. Kept tiny on purpose; the library's reader is io/safetensors.hpp.

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace golden {

struct Tensor {
    std::vector<std::size_t> shape;
    std::vector<float> data;  // I64 values are converted to float
};

inline std::map<std::string, Tensor> read_safetensors(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("golden: cannot open " + path);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() < 8) throw std::runtime_error("golden: truncated " + path);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
    if (header_len > bytes.size() - 8) throw std::runtime_error("golden: bad header length in " + path);
    const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_len));
    const std::size_t base = 8 + header_len;
    std::map<std::string, Tensor> out;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") continue;
        Tensor t;
        std::size_t n = 1;
        for (const auto& d : info.at("shape")) {
            t.shape.push_back(d.get<std::size_t>());
            n *= t.shape.back();
        }
        const auto off = info.at("data_offsets");
        const std::size_t b0 = base + off.at(0).get<std::size_t>(), b1 = base + off.at(1).get<std::size_t>();
        const std::string dtype = info.at("dtype");
        const std::size_t width = dtype == "F32" ? 4 : dtype == "I64" ? 8 : 0;
        if (width == 0) throw std::runtime_error("golden: unsupported dtype " + dtype + " in " + path);
        if (b1 > bytes.size() || b1 < b0 || b1 - b0 != n * width)
            throw std::runtime_error("golden: bad offsets for " + name + " in " + path);
        t.data.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            if (width == 4) {
                std::memcpy(&t.data[i], &bytes[b0 + 4 * i], 4);
            } else {
                std::int64_t v;
                std::memcpy(&v, &bytes[b0 + 8 * i], 8);
                t.data[i] = static_cast<float>(v);
            }
        }
        out.emplace(name, std::move(t));
    }
    return out;
}

}  // namespace golden
