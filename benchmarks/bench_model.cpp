// Whole-model speed on a Qwen3.5-0.8B-shaped checkpoint (random bf16 weights, real key names
// and config.json, written once to $TMPDIR and loaded with hylens::load like a real one):
//  * prefill of 512 tokens: tokens/s, and achieved GFLOP/s (2 x weight elements per token for
//    the projections, plus attention) against the sgemm floor;
//  * one decode step after 512 tokens: against the bytes floor (every weight byte read once
//    per token, bf16: 2 bytes, plus the caches) over the measured triad bandwidth.
// Set HYLENS_BENCH_LAYERS to shorten the model (default: the real 24 layers).

#include <hylens/io/safetensors_writer.hpp>
#include <hylens/models/load.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "floors.hpp"

namespace fs = std::filesystem;
using namespace hylens;

namespace {

struct Shape {
    std::size_t H = 1024, V = 248320, L = 24, I = 3584, Hq = 8, Hkv = 2, hd = 256, Hk = 16, Hv = 16, dk = 128, dv = 128,
                K = 4;
};

std::size_t layers_from_env() {
    const char* s = std::getenv("HYLENS_BENCH_LAYERS");
    return s ? static_cast<std::size_t>(std::atoi(s)) : 24;
}

/// Writes (once) a Qwen3.5-0.8B-shaped checkpoint with random bf16 weights; returns its folder.
fs::path fixture(const Shape& s) {
    const fs::path dir = fs::temp_directory_path() / ("hylens_bench_qwen35_0p8b_L" + std::to_string(s.L));
    if (fs::exists(dir / "model.safetensors")) return dir;
    fs::create_directories(dir);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    io::SafetensorsWriter w;
    auto add = [&](const std::string& name, std::vector<std::size_t> shape, float scale, float offset = 0.0f) {
        std::size_t n = 1;
        for (auto d : shape) n *= d;
        std::vector<float> v(n);
        for (auto& x : v) x = offset + scale * nd(rng);
        w.add_bf16(name, std::move(shape), v);
    };
    const std::string P = "model.language_model.";
    add(P + "embed_tokens.weight", {s.V, s.H}, 1.0f);
    add(P + "norm.weight", {s.H}, 0.1f);
    std::string types;
    for (std::size_t i = 0; i < s.L; ++i) {
        const std::string p = P + "layers." + std::to_string(i) + ".";
        const bool attn = (i + 1) % 4 == 0;
        types += std::string(i ? ", " : "") + (attn ? "\"full_attention\"" : "\"linear_attention\"");
        const float g = 1.0f / std::sqrt(static_cast<float>(s.H));
        add(p + "input_layernorm.weight", {s.H}, 0.1f);
        add(p + "post_attention_layernorm.weight", {s.H}, 0.1f);
        add(p + "mlp.gate_proj.weight", {s.I, s.H}, g);
        add(p + "mlp.up_proj.weight", {s.I, s.H}, g);
        add(p + "mlp.down_proj.weight", {s.H, s.I}, 0.5f / std::sqrt(static_cast<float>(s.I)));
        if (attn) {
            add(p + "self_attn.q_proj.weight", {2 * s.Hq * s.hd, s.H}, g);
            add(p + "self_attn.k_proj.weight", {s.Hkv * s.hd, s.H}, g);
            add(p + "self_attn.v_proj.weight", {s.Hkv * s.hd, s.H}, g);
            add(p + "self_attn.o_proj.weight", {s.H, s.Hq * s.hd}, 0.5f / std::sqrt(static_cast<float>(s.Hq * s.hd)));
            add(p + "self_attn.q_norm.weight", {s.hd}, 0.1f);
            add(p + "self_attn.k_norm.weight", {s.hd}, 0.1f);
        } else {
            const std::size_t Kd = s.Hk * s.dk, Vd = s.Hv * s.dv, Cc = 2 * Kd + Vd;
            const std::string q = p + "linear_attn.";
            add(q + "in_proj_qkv.weight", {Cc, s.H}, g);
            add(q + "in_proj_z.weight", {Vd, s.H}, g);
            add(q + "in_proj_b.weight", {s.Hv, s.H}, g);
            add(q + "in_proj_a.weight", {s.Hv, s.H}, g);
            add(q + "conv1d.weight", {Cc, 1, s.K}, 0.5f);
            add(q + "dt_bias", {s.Hv}, 0.5f);
            add(q + "A_log", {s.Hv}, 0.5f);
            add(q + "norm.weight", {s.dv}, 0.1f, 1.0f);
            add(q + "out_proj.weight", {s.H, Vd}, 0.5f / std::sqrt(static_cast<float>(Vd)));
        }
    }
    w.write(dir / "model.safetensors");
    std::ofstream(dir / "config.json")
        << "{\"model_type\": \"qwen3_5\", \"tie_word_embeddings\": true, \"text_config\": {"
        << "\"model_type\": \"qwen3_5_text\", \"vocab_size\": " << s.V << ", \"hidden_size\": " << s.H
        << ", \"intermediate_size\": " << s.I << ", \"num_hidden_layers\": " << s.L
        << ", \"num_attention_heads\": " << s.Hq << ", \"num_key_value_heads\": " << s.Hkv << ", \"head_dim\": " << s.hd
        << ", \"linear_num_key_heads\": " << s.Hk << ", \"linear_num_value_heads\": " << s.Hv
        << ", \"linear_key_head_dim\": " << s.dk << ", \"linear_value_head_dim\": " << s.dv
        << ", \"linear_conv_kernel_dim\": " << s.K << ", \"rms_norm_eps\": 1e-6, \"tie_word_embeddings\": true"
        << ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25}"
        << ", \"layer_types\": [" << types << "]}}\n";
    return dir;
}

const Qwen35Model& model() {
    static Shape s = [] {
        Shape x;
        x.L = layers_from_env();
        return x;
    }();
    static Qwen35Model m = load_as<Qwen35Model>(fixture(s));
    return m;
}

/// Weight elements a token multiplies in the layers (every projection once).
double layer_elements(const Qwen35Model& m) {
    double n = 0.0;
    for (std::size_t i = 0; i < m.num_layers(); ++i)
        m.stack().visit(i, [&](const auto& layer) {
            const auto& f = layer.ffn().dense;
            n += static_cast<double>(f.gate.numel() + f.up.numel() + f.down.numel());
            using K = typename std::remove_cvref_t<decltype(layer)>::kind_type;
            const auto& w = layer.mixer().weights();
            if constexpr (std::is_same_v<K, AttentionLayer<>>)
                n += static_cast<double>(w.q_proj.numel() + w.k_proj.numel() + w.v_proj.numel() + w.o_proj.numel());
            else
                n += static_cast<double>(w.in_proj_qkv.numel() + w.in_proj_z.numel() + w.in_proj_b.numel() +
                                         w.in_proj_a.numel() + w.out_proj.numel());
        });
    return n;
}

std::vector<std::int64_t> prompt(std::size_t T) {
    std::vector<std::int64_t> ids(T);
    for (std::size_t t = 0; t < T; ++t) ids[t] = static_cast<std::int64_t>((t * 7919) % 248320);
    return ids;
}

void BM_prefill(benchmark::State& state) {
    const auto& m = model();
    const std::size_t T = static_cast<std::size_t>(state.range(0));
    const TokenBatch ids(prompt(T));
    for (auto _ : state) {
        auto cache = m.new_cache(1);
        ForwardOptions o;
        o.last_only = true;
        benchmark::DoNotOptimize(m.forward(ids, cache, o));
    }
    state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(T) * state.iterations(), benchmark::Counter::kIsRate);
    bench::report_flops(state, 2.0 * (layer_elements(m) * static_cast<double>(T) + static_cast<double>(m.lm_head().numel())));
}

void BM_decode_step(benchmark::State& state) {
    const auto& m = model();
    auto cache = m.prefill(TokenBatch(prompt(static_cast<std::size_t>(state.range(0)))));
    const TokenBatch next({42});
    for (auto _ : state) {
        auto c = cache;  // each step from the same context (the copy is excluded below)
        state.PauseTiming();
        state.ResumeTiming();
        benchmark::DoNotOptimize(m.forward(next, c));
        state.PauseTiming();
        c = cache;
        state.ResumeTiming();
    }
    state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    bench::report_bytes(state, 2.0 * (layer_elements(m) + static_cast<double>(m.lm_head().numel())));  // bf16, read once per token
}

}  // namespace

BENCHMARK(BM_prefill)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_decode_step)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
