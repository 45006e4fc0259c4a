// Every model of tests/golden/models, from its F32 and its BF16 checkpoint, against the
// float64 Hugging Face reference: logits, every layer's residual stream, the final norm,
// every cache after prefill, and five decode steps with their caches (manifest atol).

#include <hylens/models/load.hpp>

#include "golden_compare.hpp"
#include "../support/reference_format.hpp"
#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace hylens;

namespace {

std::vector<fs::path> golden_models() {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models"))
        if (e.is_directory() && fs::exists(e.path() / "golden.safetensors")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    return dirs;
}

void check_model(const fs::path& dir, const fs::path& weights_dir, const std::string& label) {
    const io::SafetensorsFile golden = io::SafetensorsFile::open(dir / "golden.safetensors");
    const nlohmann::json manifest = io::Config::from_file(dir / "manifest.json").raw();
    const nlohmann::json& tensors = manifest["files"]["golden.safetensors"]["tensors"];
    const std::vector<std::int64_t> prompt = golden.read_i64("input_ids");
    const std::vector<std::int64_t> decode = golden.read_i64("decode.input_ids");
    AnyModel model = load(weights_dir);
    const NamedTensors got = model.visit([&](const auto& m) { return test::dump_run(m, prompt, decode); });
    const int n = test::compare_to_golden(got, golden, tensors, label);
    CHECK(n >= 8);
}

}  // namespace

TEST_CASE("golden models: float32 checkpoints match the float64 reference") {
    const auto dirs = golden_models();
    REQUIRE(dirs.size() >= 1);
    for (const auto& dir : dirs) {
        SUBCASE(dir.filename().string().c_str()) { check_model(dir, dir, dir.filename().string() + " (F32)"); }
    }
}

TEST_CASE("golden models: bfloat16 checkpoints (bf16 weights used in place) match the float64 reference") {
    for (const auto& dir : golden_models()) {
        if (!fs::exists(dir / "model-bf16" / "model.safetensors")) continue;
        SUBCASE(dir.filename().string().c_str()) {
            check_model(dir, dir / "model-bf16", dir.filename().string() + " (BF16)");
        }
    }
}

TEST_CASE("golden models: a bf16 checkpoint keeps its weights in bf16 inside the mapped file") {
    const auto dirs = golden_models();
    REQUIRE(!dirs.empty());
    AnyModel model = load(dirs.front() / "model-bf16");
    model.visit([](const auto& m) {
        CHECK(m.embedding().is_bf16());
        CHECK(m.lm_head().is_bf16());
    });
}

TEST_CASE("golden models: weights read into memory (--no-mmap) give the mapped run's results bit for bit") {
    for (const auto& dir : golden_models()) {
        for (const fs::path& weights : {dir, dir / "model-bf16"}) {
            if (!fs::exists(weights / "model.safetensors")) continue;
            CAPTURE(weights.string());
            const io::SafetensorsFile golden = io::SafetensorsFile::open(dir / "golden.safetensors");
            const std::vector<std::int64_t> prompt = golden.read_i64("input_ids");
            const std::vector<std::int64_t> decode = golden.read_i64("decode.input_ids");
            const auto run = [&](io::Storage storage) {
                AnyModel model = load(weights, LoadOptions{storage});
                return model.visit([&](const auto& m) { return test::dump_run(m, prompt, decode); });
            };
            const NamedTensors mapped = run(io::Storage::mapped), in_memory = run(io::Storage::in_memory);
            REQUIRE(mapped.size() == in_memory.size());
            for (const auto& [name, t] : mapped.all()) {
                CAPTURE(name);
                REQUIRE(in_memory.contains(name));
                const NamedTensor& u = in_memory.at(name);
                REQUIRE(shape_of(u) == shape_of(t));
                CHECK(std::memcmp(t.data(), u.data(), t.size() * sizeof(float)) == 0);
            }
        }
    }
}

#ifdef HYLENS_CLI
#include <cstdlib>

TEST_CASE("cli: hylens dump reproduces the golden tensors of a bf16 checkpoint") {
    for (const char* name : {"falcon_h1_bias", "qwen3_next_moe", "granite_h_allmamba"}) {
        const fs::path dir = fs::path(HYLENS_GOLDEN_DIR) / "models" / name;
        const fs::path out = fs::temp_directory_path() / (std::string("hylens_cli_dump_") + name + ".safetensors");
        const std::string cmd = std::string(HYLENS_CLI) + " dump --model " + (dir / "model-bf16").string() + " --input " +
                                (dir / "golden.safetensors").string() + " --out " + out.string() + " 2>/dev/null";
        REQUIRE(std::system(cmd.c_str()) == 0);
        const io::SafetensorsFile dumped = io::SafetensorsFile::open(out);
        NamedTensors got;
        for (const auto& n : dumped.names()) got.put(n, dumped.info(n).shape, dumped.read_f32(n));
        const io::SafetensorsFile golden = io::SafetensorsFile::open(dir / "golden.safetensors");
        const nlohmann::json manifest = io::Config::from_file(dir / "manifest.json").raw();
        CHECK(test::compare_to_golden(got, golden, manifest["files"]["golden.safetensors"]["tensors"], name) >= 8);
        fs::remove(out);
    }
    CHECK(std::system((std::string(HYLENS_CLI) + " dump --model /nonexistent --input x --out y 2>/dev/null").c_str()) != 0);
    CHECK(std::system((std::string(HYLENS_CLI) + " dump --help >/dev/null").c_str()) == 0);
}
#endif

TEST_CASE("golden models: shorter prompts (1, 2, 31, 63, 64, 65 tokens) reproduce the golden rows (causality)") {
    // The model is causal, so the logits of a prefix of the golden prompt are the first rows of
    // the golden logits: this runs every model at other prompt lengths, around the chunk
    // boundaries and below the conv width, with the same tolerance.
    for (const auto& dir : golden_models()) {
        const io::SafetensorsFile golden = io::SafetensorsFile::open(dir / "golden.safetensors");
        const nlohmann::json manifest = io::Config::from_file(dir / "manifest.json").raw();
        const double atol = manifest["files"]["golden.safetensors"]["tensors"]["logits"]["atol"].get<double>();
        const std::vector<std::int64_t> prompt = golden.read_i64("input_ids");
        const std::vector<float> ref = golden.read_f32("logits");
        AnyModel model = load(dir / "model-bf16");
        const std::size_t V = model.config().vocab;
        for (std::size_t T : {1u, 2u, 31u, 63u, 64u, 65u}) {
            if (T > prompt.size()) continue;
            const std::vector<std::int64_t> ids(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(T));
            const Tensor3 logits = model.visit([&](const auto& m) {
                auto cache = m.new_cache(1);
                return m.forward(TokenBatch(ids), cache);
            });
            double worst = 0;
            for (std::size_t i = 0; i < T * V; ++i) worst = hylens::test::nan_max(worst, std::fabs(double(logits.data()[i]) - ref[i]));
            INFO(dir.filename().string() << " T = " << T);
            CHECK(worst <= atol);
        }
    }
}
