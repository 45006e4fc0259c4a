// Every golden model checkpoint reads cleanly, and its F32 and BF16 files hold bit-identical
// values after widening (tests/golden/README.md: the weights are bf16-representable).

#include <doctest/doctest.h>

#include <hylens/io/checkpoint.hpp>
#include <hylens/io/config_json.hpp>
#include <hylens/io/safetensors.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace hylens;
using namespace hylens::io;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> golden_model_dirs() {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models"))
        if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    return dirs;
}

}  // namespace

TEST_SUITE("io/golden models") {

TEST_CASE("the golden model folders are there") { CHECK(golden_model_dirs().size() >= 11); }

TEST_CASE("F32 and BF16 checkpoints hold bit-identical values") {
    for (const auto& dir : golden_model_dirs()) {
        CAPTURE(dir.string());
        const auto f32 = SafetensorsFile::open(dir / "model.safetensors");
        const auto b16 = SafetensorsFile::open(dir / "model-bf16" / "model.safetensors");
        auto names32 = f32.names(), names16 = b16.names();
        REQUIRE(!names32.empty());
        std::sort(names32.begin(), names32.end());
        std::sort(names16.begin(), names16.end());
        REQUIRE(names32 == names16);
        for (const auto& name : names32) {
            CAPTURE(name);
            const TensorInfo& a = f32.info(name);
            const TensorInfo& b = b16.info(name);
            REQUIRE(a.dtype == DType::F32);
            REQUIRE(b.dtype == DType::BF16);
            REQUIRE(a.shape == b.shape);
            const auto va = f32.read_f32(name);
            const auto vb = b16.read_f32(name);
            REQUIRE(va.size() == vb.size());
            CHECK(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0);
            // And through the zero-copy weights the models will use.
            const Weight wa = f32.weight(name);
            const Weight wb = b16.weight(name);
            REQUIRE(wb.is_bf16());
            CHECK(wa.raw() == f32.bytes(name).data());
            CHECK(wb.raw() == b16.bytes(name).data());
            bool same = true;
            for (std::size_t i = 0; i < wa.numel(); ++i) same = same && wa.at(i) == wb.at(i);
            CHECK(same);
        }
    }
}

TEST_CASE("golden folders open as checkpoints, token ids are in the vocabulary") {
    for (const auto& dir : golden_model_dirs()) {
        CAPTURE(dir.string());
        // The folder also holds golden.safetensors: model.safetensors must win.
        const auto ck = Checkpoint::open(dir);
        CHECK(ck.shards().size() == 1);
        CHECK(ck.shards()[0].path().filename() == "model.safetensors");
        CHECK(ck.dir() == dir);
        const auto ck16 = Checkpoint::open(dir / "model-bf16");
        CHECK(ck16.names() == ck.names());

        const auto cfg = Config::from_file(dir / "config.json");
        const auto cfg16 = Config::from_file(dir / "model-bf16" / "config.json");
        const Config text = cfg.is_object("text_config") ? cfg.sub("text_config") : cfg;
        const std::int64_t vocab = text.get_int("vocab_size");
        CHECK(vocab > 0);
        CHECK(cfg16.get_string("dtype") == "bfloat16");
        // The embedding is [vocab, hidden].
        const auto names = ck.names();
        const auto emb = std::find_if(names.begin(), names.end(), [](const std::string& n) {
            return n.find("embed_tokens.weight") != std::string::npos;
        });
        if (emb != names.end()) CHECK(ck.info(*emb).shape.at(0) == static_cast<std::size_t>(vocab));

        const auto golden = SafetensorsFile::open(dir / "golden.safetensors");
        REQUIRE(golden.contains("input_ids"));
        const auto ids = golden.read_i64("input_ids");
        REQUIRE(!ids.empty());
        for (auto id : ids) {
            CHECK(id >= 0);
            CHECK(id < vocab);
        }
    }
}

}  // TEST_SUITE
