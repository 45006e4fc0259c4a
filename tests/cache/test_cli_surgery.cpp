// The command-line tool: `hylens surgery` on a golden model folder writes exactly the
// condition tensors of its reference file (names, shapes, dtypes), within the manifest atol
// (ids and positions exact). Built only when the tool is (HYLENS_CLI).

#ifdef HYLENS_CLI
#include <hylens/io/safetensors.hpp>

#include "golden_surgery.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>  // getpid

using namespace hylens;
namespace fs = std::filesystem;

TEST_CASE("cli: hylens surgery writes exactly what the golden surgery file holds") {
    const auto dirs = test::surgery_folders();
    REQUIRE(!dirs.empty());
    // One model of the folders (the last by name: a Qwen3.5 one), from its bf16 checkpoint.
    const fs::path dir = dirs.back();
    const fs::path out = fs::temp_directory_path() / ("hylens_cli_surgery_" + std::to_string(::getpid()) + ".safetensors");
    const std::string cmd = std::string(HYLENS_CLI) + " surgery --model " + test::surgery_model_dir(dir, true).string() +
                            " --input " + (dir / "surgery.safetensors").string() + " --out " + out.string() + " 2>/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const io::SafetensorsFile got = io::SafetensorsFile::open(out);
    const test::SurgeryReference ref(dir);
    std::set<std::string> expected;
    for (auto it = ref.manifest["conditions"].begin(); it != ref.manifest["conditions"].end(); ++it)
        for (const char* t : {".logits", ".gen.ids", ".gen.logits", ".positions"}) expected.insert(it.key() + t);
    const auto names = got.names();
    CHECK(std::set<std::string>(names.begin(), names.end()) == expected);
    CHECK(expected.size() == 40);
    for (const auto& name : expected) {
        INFO(name);
        REQUIRE(got.contains(name));
        CHECK(got.info(name).shape == ref.file.info(name).shape);
        CHECK(got.info(name).dtype == ref.file.info(name).dtype);
        if (ref.file.info(name).dtype == DType::I64) {
            CHECK(got.read_i64(name) == ref.file.read_i64(name));
        } else {
            const std::vector<float> v = got.read_f32(name);
            ref.check_close(name, v.data(), v.size(), dir.filename().string() + " (hylens surgery)");
        }
    }
    fs::remove(out);
    CHECK(std::system((std::string(HYLENS_CLI) + " surgery --help >/dev/null").c_str()) == 0);
    CHECK(std::system((std::string(HYLENS_CLI) + " surgery --model /nonexistent --input x --out y 2>/dev/null").c_str()) != 0);
    CHECK(std::system((std::string(HYLENS_CLI) + " surgery --model " + dir.string() + " --input " +
                       (dir / "surgery.safetensors").string() + " --out " + out.string() + " --gen x 2>/dev/null")
                          .c_str()) != 0);
}
#endif
