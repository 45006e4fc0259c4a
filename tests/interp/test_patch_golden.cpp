// The patching references of tests/golden/surgery (README: 'Mixer-output patch', 'State
// patch') for every model folder there, within each tensor's manifest atol; T3 (a state
// patch of a run with itself changes nothing); and `hylens patch` writing the same tensors.

#include <hylens/interp/transplant.hpp>
#include <hylens/io/config_json.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/models/load.hpp>

#include "../models/golden_compare.hpp"
#include "../support/reference_format.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace hylens;

namespace {

std::vector<fs::path> surgery_dirs() {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "surgery"))
        if (e.is_directory() && fs::exists(e.path() / "surgery.safetensors")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    return dirs;
}

struct SurgeryCase {
    io::SafetensorsFile file;
    nlohmann::json tensors;  // manifest entries of the patch.* / state_patch.* outputs
    fs::path model_dir;
    std::vector<std::int64_t> donor, host;
    std::vector<LayerIndex> layers;
    LayerIndex attn_layer = no_layer;
};

const char* const kOutputs[] = {"patch.donor.mixer_out",          "patch.attn.donor.mixer_out",
                                "patch.host.logits_final",        "patch.attn.host.logits_final",
                                "state_patch.logits_final",       "state_patch.ssm_only.logits_final",
                                "state_patch.all.logits_final",   "state_patch.control.logits_final"};

SurgeryCase open_case(const fs::path& dir) {
    SurgeryCase c{io::SafetensorsFile::open(dir / "surgery.safetensors"), {}, {}, {}, {}, {}, no_layer};
    const nlohmann::json manifest = io::Config::from_file(dir / "manifest.json").raw();
    for (const char* name : kOutputs) c.tensors[name] = manifest["tensors"][name];
    c.model_dir = fs::path(HYLENS_GOLDEN_DIR) / manifest["model_folder"].get<std::string>();
    c.donor = c.file.read_i64("patch.donor.ids");
    c.host = c.file.read_i64("patch.host.ids");
    for (auto l : c.file.read_i64("patch.layers")) c.layers.push_back(layer_index(l));
    c.attn_layer = layer_index(c.file.read_i64("patch.attn_layer").at(0));
    return c;
}

}  // namespace

TEST_CASE("interp/patch: mixer-output and state patches match the surgery references of every model") {
    const auto dirs = surgery_dirs();
    REQUIRE(dirs.size() >= 1);
    for (const auto& dir : dirs) {
        SUBCASE(dir.filename().string().c_str()) {
            const SurgeryCase c = open_case(dir);
            const AnyModel model = load(c.model_dir);
            const NamedTensors got = model.visit(
                [&](const auto& m) { return test::patch_reference_tensors(m, c.donor, c.host, c.layers, c.attn_layer); });
            CHECK(test::compare_to_golden(got, c.file, c.tensors, dir.filename().string()) == 8);
        }
    }
}

TEST_CASE("interp/patch: the references are not trivially met (each patch moves the logits past the atol)") {
    for (const auto& dir : surgery_dirs()) {
        SUBCASE(dir.filename().string().c_str()) {
            const SurgeryCase c = open_case(dir);
            const auto clean = c.file.read_f32("patch.host.logits_final_clean");
            for (const char* name : {"patch.host.logits_final", "state_patch.logits_final", "state_patch.all.logits_final"}) {
                const auto patched = c.file.read_f32(name);
                double d = 0;
                for (std::size_t i = 0; i < clean.size(); ++i) d = std::max(d, std::fabs(double(patched[i]) - clean[i]));
                CHECK_MESSAGE(d > c.tensors[name]["atol"].get<double>(), name << " differs from the clean run by only " << d);
            }
        }
    }
}

TEST_CASE("interp/patch T3: a state patch of a run with itself changes nothing") {
    for (const auto& dir : surgery_dirs()) {
        SUBCASE(dir.filename().string().c_str()) {
            const SurgeryCase c = open_case(dir);
            const AnyModel model = load(c.model_dir);
            model.visit([&](const auto& m) {
                const TokenBatch host(c.host);
                const Tensor3 control = transplant_state(m, host, host, {});
                const Tensor3 self = transplant_state(m, host, host, recurrent_layers(m.stack()), true);
                CHECK(max_abs_diff(control, self) == 0.0f);
                // and the control is the plain forward's final row (split execution, §A.15)
                auto cache = m.new_cache(1);
                const Tensor3 plain = m.forward(host, cache);
                const std::size_t V = m.config().vocab, T = host.T();
                double d = 0;
                for (std::size_t v = 0; v < V; ++v)
                    d = std::max(d, std::fabs(double(plain.data()[(T - 1) * V + v]) - control.data()[v]));
                CHECK(d <= 1e-4);
            });
        }
    }
}

#ifdef HYLENS_CLI
#include <cstdlib>

TEST_CASE("interp/patch: `hylens patch` writes the patching references") {
    const auto dirs = surgery_dirs();
    REQUIRE(!dirs.empty());
    const fs::path dir = dirs.back();
    const SurgeryCase c = open_case(dir);
    const fs::path out = fs::temp_directory_path() / "hylens_cli_patch_test.safetensors";
    const std::string cmd = std::string(HYLENS_CLI) + " patch --model " + c.model_dir.string() + " --input " +
                            (dir / "surgery.safetensors").string() + " --out " + out.string() + " 2>/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const io::SafetensorsFile written = io::SafetensorsFile::open(out);
    NamedTensors got;
    for (const auto& n : written.names()) got.put(n, written.info(n).shape, written.read_f32(n));
    CHECK(test::compare_to_golden(got, c.file, c.tensors, dir.filename().string() + " (cli)") == 8);
    fs::remove(out);
    CHECK(std::system((std::string(HYLENS_CLI) + " patch --model /nonexistent --input x --out y 2>/dev/null").c_str()) != 0);
    CHECK(std::system((std::string(HYLENS_CLI) + " patch --help >/dev/null").c_str()) == 0);
}
#endif

TEST_CASE("interp/patch: every shipped model folder, surgery reference or not, patches and self-patches cleanly") {
    // The second-batch models (qwen3_next_moe, falcon_h1_bias, ...) have no surgery reference:
    // nothing here is tuned to the six that do. A host->host mixer patch and state patch are
    // exact no-ops on each, and the patch of a different donor moves the final logits.
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models"))
        if (e.is_directory() && fs::exists(e.path() / "config.json")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    REQUIRE(dirs.size() >= 6);
    for (const auto& dir : dirs) {
        SUBCASE(dir.filename().string().c_str()) {
            const AnyModel model = load(dir);
            model.visit([&](const auto& m) {
                const std::vector<LayerIndex> rec = recurrent_layers(m.stack()), att = attention_layers(m.stack());
                REQUIRE(!rec.empty());
                std::vector<std::int64_t> host(20), donor(20);
                for (std::size_t i = 0; i < 20; ++i) host[i] = donor[i] = static_cast<std::int64_t>((7 * i + 3) % m.config().vocab);
                donor[17] = (donor[17] + 1) % static_cast<std::int64_t>(m.config().vocab);
                const TokenBatch H(host), D(donor);
                auto c = m.new_cache(1);
                const Tensor3 plain = m.forward(H, c);
                const std::vector<LayerIndex> layers(rec.begin(), rec.begin() + std::min<std::ptrdiff_t>(2, std::ssize(rec)));
                const MixerTransplant self = transplant_mixer(m, H, H, layers, Positions::last());
                CHECK(max_abs_diff(self.host.logits, plain) == 0.0f);
                const MixerTransplant moved = transplant_mixer(m, D, H, layers, Positions::all());
                CHECK(max_abs_diff(moved.host.logits, plain) > 1e-6f);
                CHECK(max_abs_diff(transplant_state(m, H, H, rec), transplant_state(m, H, H, {})) == 0.0f);
                if (!att.empty()) {
                    const NamedTensors t = test::patch_reference_tensors(m, donor, host, layers, att.front());
                    CHECK(t.size() == 8);
                }
            });
        }
    }
}
