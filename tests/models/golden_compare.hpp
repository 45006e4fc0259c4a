#pragma once
// Test helpers: compare NamedTensors against a golden safetensors file with the per-tensor
// atol of its manifest.

#include <hylens/interp/named_tensors.hpp>
#include <hylens/io/config_json.hpp>
#include <hylens/io/safetensors.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

namespace hylens::test {

/// Compares every tensor the manifest lists (except inputs) that `got` holds; returns how
/// many were compared. Every listed float tensor must be present in `got`.
inline int compare_to_golden(const NamedTensors& got, const io::SafetensorsFile& golden,
                             const nlohmann::json& tensors, const std::string& label, double atol_scale = 1.0) {
    int compared = 0;
    for (auto it = tensors.begin(); it != tensors.end(); ++it) {
        const std::string name = it.key();
        if (it.value().value("dtype", std::string("F32")) != "F32") continue;
        if (!it.value().contains("atol")) continue;
        INFO(label << ": tensor " << name);
        REQUIRE_MESSAGE(got.contains(name), label << ": missing tensor " << name);
        const double atol = it.value()["atol"].get<double>() * atol_scale;
        const std::vector<float> ref = golden.read_f32(name);
        const NamedTensor& t = got.at(name);
        REQUIRE(t.size() == ref.size());
        double worst = 0.0;
        std::size_t where = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const double d = std::fabs(static_cast<double>(t.data()[i]) - ref[i]);
            if (!(d <= worst)) {
                worst = d;
                where = i;
            }
            if (std::isnan(d)) break;  // a later finite difference would replace the NaN
        }
        CHECK_MESSAGE(worst <= atol, label << ": " << name << " max |diff| " << worst << " at flat index " << where
                                           << " > atol " << atol);
        ++compared;
    }
    return compared;
}

}  // namespace hylens::test
