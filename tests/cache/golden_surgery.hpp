#pragma once
// Test helpers for the cache-surgery reference data (tests/golden/surgery/<model>/): the
// folders, their inputs, and a comparison against the manifest's per-tensor atol.

#include <hylens/io/config_json.hpp>
#include <hylens/io/safetensors.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace hylens::test {

namespace fs = std::filesystem;

/// Every folder of tests/golden/surgery that holds a reference file (sorted by name).
inline std::vector<fs::path> surgery_folders() {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "surgery"))
        if (e.is_directory() && fs::exists(e.path() / "surgery.safetensors")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    return dirs;
}

/// The model weights of a surgery folder (same name under models/), F32 or BF16.
inline fs::path surgery_model_dir(const fs::path& surgery_dir, bool bf16) {
    const fs::path m = fs::path(HYLENS_GOLDEN_DIR) / "models" / surgery_dir.filename();
    return bf16 ? m / "model-bf16" : m;
}

struct SurgeryReference {
    io::SafetensorsFile file;
    nlohmann::json manifest;

    explicit SurgeryReference(const fs::path& dir)
        : file(io::SafetensorsFile::open(dir / "surgery.safetensors")),
          manifest(io::Config::from_file(dir / "manifest.json").raw()) {}

    double atol(const std::string& name) const { return manifest["tensors"][name]["atol"].get<double>(); }

    /// max |got - ref| <= atol for tensor `name`; returns the largest difference.
    double check_close(const std::string& name, const float* got, std::size_t n, const std::string& label) const {
        const std::vector<float> ref = file.read_f32(name);
        REQUIRE_MESSAGE(ref.size() == n, label << ": " << name << " has " << ref.size() << " values, got " << n);
        double worst = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
            if (!(d <= worst)) worst = d;
            if (std::isnan(d)) break;  // a later finite difference would replace the NaN
        }
        CHECK_MESSAGE(worst <= atol(name), label << ": " << name << " max |diff| " << worst << " > atol " << atol(name));
        return worst;
    }
};

}  // namespace hylens::test
