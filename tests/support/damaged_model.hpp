#pragma once
// Test helper: a copy of a golden model folder (config.json + model.safetensors) whose header
// is intact but one F32 tensor's data starts with NaN values, as a damaged download would be.

#include <hylens/io/safetensors.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

namespace hylens::test {

/// Copies `model_dir` to `out_dir` and overwrites the first `n` values of tensor `name` (F32)
/// with NaN. Returns out_dir.
inline std::filesystem::path damaged_model(const std::filesystem::path& model_dir, const std::filesystem::path& out_dir,
                                           const std::string& name, std::size_t n = 3) {
    namespace fs = std::filesystem;
    fs::remove_all(out_dir);
    fs::create_directories(out_dir);
    fs::copy_file(model_dir / "config.json", out_dir / "config.json");
    fs::copy_file(model_dir / "model.safetensors", out_dir / "model.safetensors");
    std::size_t offset = 0;
    {
        const io::SafetensorsFile f = io::SafetensorsFile::open(out_dir / "model.safetensors");
        const io::TensorInfo& t = f.info(name);
        if (t.dtype != DType::F32 || t.nbytes < n * 4) throw Error("damaged_model: " + name + " is not an F32 tensor of >= n values");
        offset = t.offset;
    }
    std::fstream io(out_dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    unsigned char len[8];
    io.read(reinterpret_cast<char*>(len), 8);
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | len[i];
    io.seekp(static_cast<std::streamoff>(8 + header + offset));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t i = 0; i < n; ++i) io.write(reinterpret_cast<const char*>(&nan), 4);
    if (!io) throw Error("damaged_model: cannot write " + (out_dir / "model.safetensors").string());
    return out_dir;
}

}  // namespace hylens::test
