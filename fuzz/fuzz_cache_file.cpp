// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for a saved cache file (cache/cache_io.hpp): arbitrary bytes as a
// .safetensors file (SafetensorsFile::from_memory) loaded by load_cache into a fresh cache of
// models/qwen35-tiny (loaded once; allow_missing when the input's size is odd), then one
// decode step on the loaded cache. The file must be refused with a hylens::Error or load, and
// the loaded cache must run (its values may be anything, so non-finite logits are not checked).
// A finding: another exception escaping, a sanitizer report, or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "hylens/cache/cache_io.hpp"
#include "hylens/io/safetensors.hpp"
#include "hylens/models/load.hpp"

namespace {

const hylens::Qwen35Model& model() {
    // fuzz/fuzz_cache_file.cpp -> <repo>/models/qwen35-tiny
    static const hylens::Qwen35Model m = hylens::load_as<hylens::Qwen35Model>(
        std::filesystem::path(__FILE__).parent_path().parent_path() / "models" / "qwen35-tiny");
    return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace hylens;
    const Qwen35Model& m = model();
    try {
        const auto file = io::SafetensorsFile::from_memory(std::span(reinterpret_cast<const std::byte*>(data), size), "<fuzz>");
        auto cache = m.new_cache(1);
        (void)load_cache(file, cache, "cache.", {.allow_missing = (size & 1) != 0});
        (void)m.forward({7}, cache);
    } catch (const hylens::Error&) {
        // Refused file, or a forward that names what is wrong with the cache: expected.
    }
    return 0;
}
