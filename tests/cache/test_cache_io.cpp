// Cache save / load through safetensors (names cache.N.{conv,state,k,v} as in the golden
// files): exact round trips with batch 1 and 2, the reference caches of the surgery files
// read back into our caches, and clear errors for missing or mis-shaped tensors.

#include <hylens/cache/cache_diff.hpp>
#include <hylens/cache/cache_io.hpp>
#include <hylens/cache/surgery.hpp>
#include <hylens/models/load.hpp>

#include "../support/random_model.hpp"
#include "golden_surgery.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include <unistd.h>  // getpid

using namespace hylens;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
    return fs::temp_directory_path() / ("hylens_test_cache_io_" + std::to_string(::getpid()) + "_" + name);
}

template <class Model>
void check_round_trip(const Model& m, std::size_t B, const std::string& label) {
    INFO(label);
    std::vector<std::vector<std::int64_t>> seqs(B);
    for (std::size_t b = 0; b < B; ++b)
        for (std::int64_t t = 0; t < 7; ++t) seqs[b].push_back((t * 7 + static_cast<std::int64_t>(b) * 3) % 50);
    const auto cache = m.prefill(TokenBatch(seqs));
    const fs::path p = temp_file(label + ".safetensors");
    save_cache(cache, p);
    const auto back = load_cache(p, m.new_cache(B));
    CHECK(back == cache);
    CHECK(diff(back, cache).max() == 0.0);
    // A surgered cache (empty KV, zeroed parts) round-trips too.
    const auto edited = keep_only<channel::recurrent>(cache);
    save_cache(edited, p);
    CHECK(load_cache(p, m.new_cache(B)) == edited);
    fs::remove(p);
}

}  // namespace

TEST_CASE("cache io: save / load round trips exactly (every stack kind, batch 1 and 2)") {
    for (std::size_t B : {1u, 2u}) {
        check_round_trip(test::random_qwen({}), B, "qwen_B" + std::to_string(B));
        check_round_trip(test::random_granite({}), B, "granite_B" + std::to_string(B));
        check_round_trip(test::random_falcon({}), B, "falcon_B" + std::to_string(B));
    }
}

TEST_CASE("cache io: tokens_seen of a stack without attention survives the round trip") {
    test::RandomWeights r({});
    HybridStack<Mamba2Layer<>> st;
    st.push_back(r.decoder(r.mamba2()));
    const auto m = r.model(std::move(st));
    const auto c = m.prefill(TokenBatch({1, 2, 3, 4}));
    const fs::path p = temp_file("mamba.safetensors");
    save_cache(c, p);
    const auto back = load_cache(p, m.new_cache(1));
    CHECK(back.next_position() == 4);
    CHECK(back == c);
    // The counter is a position, 0 to 2^63 - 1: twenty nines wrapped around, "" read as 0.
    const auto with_seen = [&](const std::string& seen) {
        std::ifstream in(p, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
        nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
        header["__metadata__"]["hylens.tokens_seen"] = seen;
        const std::string h = header.dump();
        std::string out(8, '\0');
        for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
        const fs::path q = temp_file("mamba_seen.safetensors");
        std::ofstream(q, std::ios::binary) << out << h << bytes.substr(8 + n);
        return q;
    };
    CHECK(load_cache(with_seen("9223372036854775807"), m.new_cache(1)).tokens_seen() == 9223372036854775807ULL);
    for (const char* bad : {"99999999999999999999", "9223372036854775808", "", "-1", "4x"})
        CHECK_THROWS_WITH_AS(load_cache(with_seen(bad), m.new_cache(1)),
                             doctest::Contains("metadata hylens.tokens_seen is not a position (0 to 2^63 - 1)"), FormatError);
    fs::remove(temp_file("mamba_seen.safetensors"));
    fs::remove(p);
}

TEST_CASE("cache io: the reference caches of the surgery files load into our caches and match our prefill") {
    for (const auto& dir : test::surgery_folders()) {
        SUBCASE(dir.filename().string().c_str()) {
            const test::SurgeryReference ref(dir);
            const AnyModel model = load(test::surgery_model_dir(dir, false));
            model.visit([&](const auto& m) {
                const auto ours = m.prefill(TokenBatch(ref.file.read_i64("ctx_a.ids")));
                auto theirs = m.new_cache(1);
                // The file holds only the recurrent parts (ctx_a.cache.N.{conv,state}).
                const std::size_t n = load_cache(ref.file, theirs, "ctx_a.cache.", LoadCacheOptions{.allow_missing = true});
                CHECK(n == 2 * layers_with<channel::recurrent>(theirs).size());
                for (std::size_t i : layers_with<channel::recurrent>(ours)) {
                    const CacheDiff d = diff(ours, theirs, LayerSet({i}));
                    const std::string p = "ctx_a.cache." + std::to_string(i) + ".";
                    CHECK_MESSAGE(d.conv <= ref.atol(p + "conv"), dir.filename().string() << " layer " << i);
                    CHECK_MESSAGE(d.state <= ref.atol(p + "state"), dir.filename().string() << " layer " << i);
                }
                // Without allow_missing the absent K/V is an error naming the tensor.
                auto strict = m.new_cache(1);
                CHECK_THROWS_AS((void)load_cache(ref.file, strict, "ctx_a.cache."), FormatError);
                // With it, a prefix under which the file holds none of the cache is one too (a
                // fresh cache came back as if read).
                auto none = m.new_cache(1);
                CHECK_THROWS_WITH_AS((void)load_cache(ref.file, none, "cache.", LoadCacheOptions{.allow_missing = true}),
                                     doctest::Contains("no tensor of this cache under 'cache.'"), FormatError);
            });
        }
    }
}

TEST_CASE("cache io: mis-shaped tensors are ShapeErrors naming the tensor") {
    const auto q = test::random_qwen({});
    const fs::path p = temp_file("qwen.safetensors");
    save_cache(q.prefill(TokenBatch({1, 2, 3})), p);
    test::RandomWeights r({});
    test::QwenLikeStack st;  // same kinds, layer 0 narrower
    st.push_back(r.decoder(r.deltanet(2, 2, 8, 6), false, true));
    const auto other = r.model(std::move(st));
    try {
        (void)load_cache(p, other.new_cache(1));
        FAIL("expected a ShapeError");
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()).find("cache.0.conv") != std::string::npos);
    }
    CHECK_THROWS_AS((void)load_cache(p, q.new_cache(2)), ShapeError);  // batch 2 needs a batch axis
    CHECK_THROWS_AS((void)load_cache(p, q.new_cache(1), "other."), FormatError);
    test::QwenLikeStack shallow;  // the first layers of q only: the file holds more
    {
        test::RandomWeights r2({});
        shallow.push_back(r2.decoder(r2.deltanet(), false, true));
    }
    CHECK_THROWS_AS((void)load_cache(p, r.model(std::move(shallow)).new_cache(1)), FormatError);
    fs::remove(p);
}

TEST_CASE("cache io: a load that fails part-way leaves the cache as it was (all or nothing)") {
    // A file missing the last layer's tensors overwrote the first layers, then threw: a cache of
    // two lengths at once, unmarked.
    const auto q = test::random_qwen({});
    const std::size_t L = q.num_layers();
    const fs::path whole = temp_file("whole.safetensors"), cut = temp_file("cut.safetensors");
    save_cache(q.prefill(TokenBatch({1, 2, 3})), whole);
    const io::SafetensorsFile f = io::SafetensorsFile::open(whole);
    io::SafetensorsWriter w;
    const std::string last = "cache." + std::to_string(L - 1) + ".";
    for (const auto& n : f.names())
        if (n.rfind(last, 0) != 0) w.add(n, f.info(n).dtype, f.info(n).shape, f.bytes(n));
    w.write(cut);
    const auto before = q.prefill(TokenBatch({4, 5, 6, 7, 8}));
    auto c = before;
    CHECK_THROWS_WITH_AS(load_cache(io::SafetensorsFile::open(cut), c), doctest::Contains("missing tensor"), FormatError);
    CHECK(c == before);
    CHECK(c.torn().empty());
    fs::remove(whole);
    fs::remove(cut);
}

TEST_CASE("cache io: allow_missing leaves out whole KV parts, never half of one") {
    // A .v without its .k was dropped without a word, and a .k without its .v read and thrown
    // away: the part kept its old K/V while the file held half of a new one.
    const auto q = test::random_qwen({});
    const std::vector<std::size_t> kv_layers = layers_with<channel::kv>(q.new_cache(1));
    REQUIRE(!kv_layers.empty());
    const std::string p = "cache." + std::to_string(kv_layers.front()) + ".";
    const fs::path whole = temp_file("kv_whole.safetensors");
    save_cache(q.prefill(TokenBatch({1, 2, 3})), whole);
    const io::SafetensorsFile f = io::SafetensorsFile::open(whole);
    const auto without = [&](const std::vector<std::string>& left_out, const std::string& name) {
        io::SafetensorsWriter w;
        for (const auto& n : f.names())
            if (std::find(left_out.begin(), left_out.end(), n) == left_out.end())
                w.add(n, f.info(n).dtype, f.info(n).shape, f.bytes(n));
        const fs::path out = temp_file(name);
        w.write(out);
        return out;
    };
    const LoadCacheOptions some{.allow_missing = true};
    for (const std::string half : {"k", "v"}) {
        INFO("without ." << half);
        const fs::path cut = without({p + half}, "kv_half.safetensors");
        auto c = q.new_cache(1);
        const std::string message = "missing tensor '" + p + half + "' (allow_missing leaves out whole parts";
        CHECK_THROWS_WITH_AS(load_cache(io::SafetensorsFile::open(cut), c, "cache.", some), doctest::Contains(message.c_str()),
                             FormatError);
        CHECK(c == q.new_cache(1));
        fs::remove(cut);
    }
    // Both left out: the part keeps what it held, the rest is read.
    const fs::path both = without({p + "k", p + "v"}, "kv_both.safetensors");
    const auto before = q.prefill(TokenBatch({4, 5}));
    auto c = before;
    CHECK(load_cache(io::SafetensorsFile::open(both), c, "cache.", some) == f.names().size() - 2);
    const auto saved = q.prefill(TokenBatch({1, 2, 3}));
    for (std::size_t i = 0; i < c.num_layers(); ++i) {
        INFO("layer " << i);
        const CacheDiff d = diff(c, i == kv_layers.front() ? before : saved, LayerSet({i}));
        CHECK(d.same_layout);
        CHECK(d.max() == 0.0);
    }
    fs::remove(both);
    fs::remove(whole);
}
