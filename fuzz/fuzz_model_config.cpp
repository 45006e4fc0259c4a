// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for config.json: arbitrary bytes go through io::Config::parse and, as
// hylens::load does, to the loader of the family model_type names (Qwen3.5 / Qwen3-Next,
// Granite 4.0 H, Falcon-H1), each over its tiny checkpoint in models/ (opened once). A config
// must be refused with a hylens::Error or load; a loaded model must run a 3-token forward to
// finite logits. A finding: another exception escaping, a sanitizer report, a huge allocation
// (a size product that wraps or a width no checkpoint backs), or non-finite logits from an
// accepted config (garbage the loader let through, blamed later on the weights).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "hylens/models/load.hpp"

namespace {

const std::filesystem::path& models_dir() {
    // fuzz/fuzz_model_config.cpp -> <repo>/models
    static const std::filesystem::path dir = std::filesystem::path(__FILE__).parent_path().parent_path() / "models";
    return dir;
}

const hylens::io::Checkpoint& checkpoint(int family) {
    static const hylens::io::Checkpoint qwen = hylens::io::Checkpoint::open(models_dir() / "qwen35-tiny");
    static const hylens::io::Checkpoint granite = hylens::io::Checkpoint::open(models_dir() / "granite-h-tiny");
    static const hylens::io::Checkpoint falcon = hylens::io::Checkpoint::open(models_dir() / "falcon-h1-tiny");
    return family == 0 ? qwen : family == 1 ? granite : falcon;
}

template <class Model>
void run_forward(const Model& m) {
    auto cache = m.new_cache(1);
    const std::size_t V = m.config().vocab;
    const hylens::TokenBatch ids({0, static_cast<std::int64_t>(V / 2), static_cast<std::int64_t>(V - 1)});
    const auto logits = m.forward(ids, cache);
    for (const float x : logits)
        if (!std::isfinite(x)) std::abort();  // an accepted config gave NaN / inf logits
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace hylens;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const io::Config cfg = io::Config::parse(text, "<fuzz>/config.json");
        const std::string type = cfg.get_string("model_type");
        if (models::is_qwen_type(type)) {
            run_forward(models::load_qwen3_5(checkpoint(0), cfg));
        } else if (type == "granitemoehybrid") {
            run_forward(models::load_granite4h(checkpoint(1), cfg));
        } else if (type == "falcon_h1") {
            run_forward(models::load_falcon_h1(checkpoint(2), cfg));
        }
    } catch (const hylens::Error&) {
        // Refused config (or a forward error naming what went wrong): the expected outcome.
    }
    return 0;
}
