// Loading bad model folders gives a hylens::Error that names what and where.

#include <hylens/io/safetensors_writer.hpp>
#include <hylens/models/load.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace fs = std::filesystem;
using namespace hylens;

namespace {

fs::path scratch(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("hylens_test_load_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

fs::path golden(const std::string& model) { return fs::path(HYLENS_GOLDEN_DIR) / "models" / model; }

std::string read_text(const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

template <class E>
std::string error_of(const fs::path& dir) {
    try {
        (void)load(dir);
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("wrong exception type: " << std::string(e.what()));
    }
    FAIL("no exception");
    return {};
}

}  // namespace

TEST_CASE("load: unknown model_type is an UnsupportedError naming it") {
    const fs::path d = scratch("unknown");
    fs::copy_file(golden("granite_h_dense") / "model.safetensors", d / "model.safetensors");
    std::string cfg = read_text(golden("granite_h_dense") / "config.json");
    cfg.replace(cfg.find("\"granitemoehybrid\""), 18, "\"llama\"");
    write_text(d / "config.json", cfg);
    const std::string msg = error_of<UnsupportedError>(d);
    CHECK(msg.find("llama") != std::string::npos);
}

TEST_CASE("load: malformed config.json is a FormatError naming the file") {
    const fs::path d = scratch("badjson");
    fs::copy_file(golden("granite_h_dense") / "model.safetensors", d / "model.safetensors");
    write_text(d / "config.json", "{\"model_type\": \"granitemoehybrid\", ");
    const std::string msg = error_of<FormatError>(d);
    CHECK(msg.find("config.json") != std::string::npos);
}

TEST_CASE("load: a file that is not the checkpoint's weights or their index says to give the folder") {
    // config.json (or any other file) was opened as safetensors: "header length ... runs past the end".
    const std::string msg = error_of<FormatError>(golden("granite_h_dense") / "config.json");
    CHECK(msg.find("is not a model folder, a .safetensors file or a .safetensors.index.json") != std::string::npos);
    CHECK(msg.find("config.json") != std::string::npos);
    // The weights file itself loads, as its folder.
    CHECK(load(golden("granite_h_dense") / "model.safetensors").config().model_type == "granitemoehybrid");
}

TEST_CASE("load: a tensor shape disagreeing with config.json names the tensor") {
    const fs::path d = scratch("shape");
    fs::copy_file(golden("granite_h_dense") / "model.safetensors", d / "model.safetensors");
    std::string cfg = read_text(golden("granite_h_dense") / "config.json");
    cfg.replace(cfg.find("\"mamba_d_state\": 16"), 19, "\"mamba_d_state\": 12");
    write_text(d / "config.json", cfg);
    const std::string msg = error_of<ShapeError>(d);
    CHECK(msg.find("mamba.in_proj.weight") != std::string::npos);
}

TEST_CASE("load: a missing tensor is a FormatError naming it") {
    const fs::path d = scratch("missing");
    const io::SafetensorsFile src = io::SafetensorsFile::open(golden("falcon_h1_nomambanorm") / "model.safetensors");
    io::SafetensorsWriter w;
    for (const auto& n : src.names()) {
        if (n == "model.layers.1.mamba.D") continue;
        const auto& info = src.info(n);
        w.add(n, info.dtype, info.shape, src.bytes(n));
    }
    w.write(d / "model.safetensors");
    fs::copy_file(golden("falcon_h1_nomambanorm") / "config.json", d / "config.json");
    const std::string msg = error_of<FormatError>(d);
    CHECK(msg.find("model.layers.1.mamba.D") != std::string::npos);
}

TEST_CASE("load: out-of-range token ids are a ShapeError naming the position") {
    AnyModel m = load(golden("qwen3_5_moe"));
    const auto V = static_cast<std::int64_t>(m.config().vocab);
    m.visit([&](const auto& model) {
        auto cache = model.new_cache(1);
        try {
            (void)model.forward(TokenBatch({1, 2, V}), cache);
            FAIL("no exception");
        } catch (const ShapeError& e) {
            const std::string msg = e.what();
            CHECK(msg.find("position 2") != std::string::npos);
            CHECK(msg.find(std::to_string(V)) != std::string::npos);
        }
        CHECK_THROWS_AS((void)model.forward(TokenBatch({-1}), cache), ShapeError);
    });
}

TEST_CASE("load: a cache for another batch size is rejected") {
    AnyModel m = load(golden("granite_h_moe"));
    m.visit([&](const auto& model) {
        auto cache = model.new_cache(2);
        CHECK_THROWS_AS((void)model.forward(TokenBatch({1, 2, 3}), cache), ShapeError);
    });
}

TEST_CASE("load: config values that would load into silent garbage are errors naming the key") {
    // Each would have loaded: an epsilon of 1e30 makes every logit 0 (a uniform distribution,
    // nothing for the finite check to catch), 0 or a negative epsilon or theta makes NaN blamed
    // on the weights, 2^40 layers was a std::bad_alloc, an unknown position_embedding_type ran
    // as "nope".
    const nlohmann::json base = nlohmann::json::parse(read_text(golden("granite_h_dense") / "config.json"));
    const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
        {"rms_norm_eps", 1e30, "rms_norm_eps must be finite, > 0 and below 1"},
        {"rms_norm_eps", 0.0, "rms_norm_eps must be finite, > 0"},
        {"rms_norm_eps", -1e-6, "rms_norm_eps must be finite, > 0"},
        {"rope_theta", 0.0, "rope_theta must be finite and > 0, got 0"},
        // a theta below float32's normal range became 0, and 1 / 0^e made every logit NaN
        {"rope_theta", 1e-300, "rope_theta must be a normal float32 value"},
        {"rope_theta", 1e300, "rope_theta must be a normal float32 value"},
        // 16 x (2^60 + 4) heads wrapped to 64, the real q projection's width: it loaded and the
        // attention wrote past its buffers (from fuzzing the config)
        {"num_attention_heads", (std::int64_t{1} << 60) + 4, "num_attention_heads must be at most 2147483647, got 1152921504606846980"},
        {"mamba_d_state", (std::int64_t{1} << 62) + 8, "mamba_d_state must be at most 2147483647"},
        {"partial_rotary_factor", -1.0, "partial_rotary_factor must be in (0, 1]"},
        {"num_hidden_layers", 100000, "num_hidden_layers is 100000 but the checkpoint holds only"},
        {"num_hidden_layers", std::int64_t{1} << 40, "num_hidden_layers must be at most 2147483647"},
        // scale factors: logits_scaling -2 flipped the distribution, a zero multiplier zeroed a path
        {"logits_scaling", -2.0, "logits_scaling must be a positive finite number (a scale factor), got -2"},
        {"embedding_multiplier", 0.0, "embedding_multiplier must be a positive finite number"},
        {"residual_multiplier", 1e40, "residual_multiplier must be a positive finite number"},
    };
    // Each case: the model's config.json with one key set, loaded with the model's weights.
    const auto refused = [](const std::string& model, const auto& list) {
        const nlohmann::json cfg0 = nlohmann::json::parse(read_text(golden(model) / "config.json"));
        for (const auto& [key, value, want] : list) {
            INFO(model << ": " << key << " = " << value.dump());
            const fs::path d = scratch("garbage");
            fs::copy_file(golden(model) / "model.safetensors", d / "model.safetensors");
            nlohmann::json cfg = cfg0;
            cfg[key] = value;
            write_text(d / "config.json", cfg.dump());
            const std::string msg = error_of<ConfigError>(d);
            CHECK(msg.find(want) != std::string::npos);
            CHECK(msg.find("config.json") != std::string::npos);
        }
    };
    refused("granite_h_dense", cases);
    // Falcon-H1's scale factors, the lists too
    const std::vector<std::tuple<std::string, nlohmann::json, std::string>> falcon_cases = {
        {"lm_head_multiplier", 0.0, "lm_head_multiplier must be a positive finite number"},
        {"mlp_multipliers", nlohmann::json::array({1.0, -0.75}), "mlp_multipliers[1] must be a positive finite number"},
        {"ssm_multipliers", nlohmann::json::array({1, 1, 1, 1, 0}), "ssm_multipliers[4] must be a positive finite number"},
    };
    refused("falcon_h1", falcon_cases);
    // Negative widths and counts with a default: they wrapped around into 18446744073709551612
    // in the shape messages ("mamba_n_groups 18446744073709551615 does not divide 128").
    refused("falcon_h1", std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
                             {"mamba_d_conv", -4, "mamba_d_conv must be > 0, got -4"},
                             {"mamba_n_groups", -1, "mamba_n_groups must be > 0, got -1"},
                             {"mamba_d_conv", 0, "mamba_d_conv must be > 0, got 0"}});
    refused("granite_h_moe", std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
                                 {"num_local_experts", -1, "num_local_experts must be >= 0, got -1"},
                                 {"shared_intermediate_size", -3, "shared_intermediate_size must be >= 0, got -3"},
                                 {"mamba_expand", -2, "mamba_expand must be > 0, got -2"}});
    refused("qwen3_next_moe", std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
                                  {"linear_conv_kernel_dim", -4, "linear_conv_kernel_dim must be > 0, got -4"},
                                  {"shared_expert_intermediate_size", -1,
                                   "shared_expert_intermediate_size must be >= 0, got -1"}});
    {  // a NaN where an integer goes is named as config.json wrote it (it showed the parser's marker)
        const fs::path n = scratch("nan_width");
        fs::copy_file(golden("granite_h_dense") / "model.safetensors", n / "model.safetensors");
        nlohmann::json without = base;
        without.erase("mamba_d_conv");
        write_text(n / "config.json", without.dump().insert(1, "\"mamba_d_conv\": NaN, "));
        const std::string msg = error_of<ConfigError>(n);
        CHECK(msg.find("mamba_d_conv: expected an integer, got number NaN") != std::string::npos);
        CHECK(msg.find("hylens:") == std::string::npos);
    }
    const fs::path d = scratch("pos_type");
    fs::copy_file(golden("granite_h_dense") / "model.safetensors", d / "model.safetensors");
    nlohmann::json cfg = base;
    cfg["position_embedding_type"] = "bogus";
    write_text(d / "config.json", cfg.dump());
    CHECK(error_of<UnsupportedError>(d).find("position_embedding_type 'bogus'") != std::string::npos);
    // config.json a directory: a FormatError naming it (it was a read error without the path)
    const fs::path dir_cfg = scratch("cfg_dir");
    fs::create_directories(dir_cfg / "config.json");
    CHECK(error_of<FormatError>(dir_cfg).find("config.json: a directory") != std::string::npos);
}

TEST_CASE("load: the checkpoint's tensors a model does not use are listed (a config with fewer layers ran silently)") {
    // Every golden checkpoint and every organism is read whole.
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models")) {
        if (!fs::exists(e.path() / "config.json")) continue;
        INFO(e.path().string());
        CHECK(load(e.path()).unused_tensors().empty());
    }
    for (const char* o : {"qwen35-tiny", "granite-h-tiny", "falcon-h1-tiny"}) {
        INFO(o);
        CHECK(load(fs::path(HYLENS_MODELS_DIR) / o).unused_tensors().empty());
    }
    // config.json of one layer fewer than the file: the last layer's tensors, in file order.
    const fs::path d = scratch("unused");
    const fs::path src = golden("granite_h_dense");
    fs::copy_file(src / "model.safetensors", d / "model.safetensors");
    nlohmann::json cfg = nlohmann::json::parse(read_text(src / "config.json"));
    const std::size_t L = cfg["num_hidden_layers"].get<std::size_t>();
    cfg["num_hidden_layers"] = L - 1;
    cfg["layer_types"].erase(cfg["layer_types"].size() - 1);
    write_text(d / "config.json", cfg.dump());
    {
        const AnyModel fewer = load(d);
        CHECK(fewer.num_layers() == L - 1);
        std::vector<std::string> want;
        const std::string last = "model.layers." + std::to_string(L - 1) + ".";
        for (const std::string& n : io::SafetensorsFile::open(d / "model.safetensors").names())
            if (n.rfind(last, 0) == 0) want.push_back(n);
        REQUIRE_FALSE(want.empty());
        CHECK(fewer.unused_tensors() == want);
        // the warning the tool and hylens.load print: the folder, the count, the first five names
        REQUIRE(want.size() > 5);
        const std::string warning = fewer.unused_tensors_warning("DIR");
        CHECK(warning == "DIR: " + std::to_string(want.size()) +
                             " tensor(s) of the checkpoint are not used by its config.json (is it the checkpoint's?): " +
                             want[0] + ", " + want[1] + ", " + want[2] + ", " + want[3] + ", " + want[4] + ", ...");
        CHECK(load(src).unused_tensors_warning("DIR").empty());
    }
    // An extra tensor no family has is listed; those released checkpoints hold beside the
    // language model are not: a Qwen3.5 vision tensor, a Falcon-H1 mup_vector, and an
    // lm_head.weight beside tied embeddings (granite_h_allmamba is tied).
    const fs::path tied = golden("granite_h_allmamba");
    const io::SafetensorsFile f = io::SafetensorsFile::open(tied / "model.safetensors");
    io::SafetensorsWriter w;
    for (const auto& n : f.names()) w.add(n, f.info(n).dtype, f.info(n).shape, f.bytes(n));
    const std::vector<float> one{1.0f};
    const auto add_one = [&](const std::string& n) { w.add(n, DType::F32, {1}, std::as_bytes(std::span<const float>(one))); };
    add_one("model.layers.0.foo.weight");
    add_one("model.visual.patch_embed.weight");
    add_one("model.layers.0.mamba.mup_vector");
    REQUIRE_FALSE(f.contains("lm_head.weight"));
    w.add("lm_head.weight", f.info("model.embed_tokens.weight").dtype, f.info("model.embed_tokens.weight").shape,
          f.bytes("model.embed_tokens.weight"));
    w.write(d / "model.safetensors");
    fs::copy_file(tied / "config.json", d / "config.json", fs::copy_options::overwrite_existing);
    CHECK(load(d).unused_tensors() == std::vector<std::string>{"model.layers.0.foo.weight"});
    fs::remove_all(d);
}

TEST_CASE("load: a Qwen3.5 config without layer_types falls back on full_attention_interval") {
    // qwen3_5_dense lists layer_types (3 linear, 1 full, twice) and full_attention_interval 4.
    // Without the list, layer i is full attention when (i + 1) % 4 == 0: the same layers, so the
    // same model, bitwise.
    const fs::path d = scratch("no_layer_types");
    struct RemoveAtEnd {
        fs::path p;
        ~RemoveAtEnd() { fs::remove_all(p); }
    } const remove_at_end{d};  // also when a load throws
    fs::copy_file(golden("qwen3_5_dense") / "model.safetensors", d / "model.safetensors");
    nlohmann::json cfg = nlohmann::json::parse(read_text(golden("qwen3_5_dense") / "config.json"));
    nlohmann::json& text = cfg.at("text_config");
    REQUIRE(text.contains("layer_types"));
    REQUIRE(text.at("full_attention_interval") == 4);
    text.erase("layer_types");
    write_text(d / "config.json", cfg.dump());
    const AnyModel listed = load(golden("qwen3_5_dense"));
    const AnyModel derived = load(d);
    const Qwen35Model* a = listed.get_if<Qwen35Model>();
    const Qwen35Model* b = derived.get_if<Qwen35Model>();
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    REQUIRE(b->num_layers() == 8);
    for (std::size_t i = 0; i < 8; ++i) {
        INFO("layer " << i);
        CHECK(b->stack().kind_of(i) == ((i + 1) % 4 == 0 ? 1u : 0u));  // kind 1: AttentionLayer
        CHECK(b->stack().kind_of(i) == a->stack().kind_of(i));
    }
    const TokenBatch ids({1, 5, 9, 2, 7, 3});
    auto ca = a->new_cache(1);
    auto cb = b->new_cache(1);
    const Tensor3 la = a->forward(ids, ca);
    const Tensor3 lb = b->forward(ids, cb);
    REQUIRE(la.size() == lb.size());
    CHECK(std::equal(la.begin(), la.end(), lb.begin()));
}
