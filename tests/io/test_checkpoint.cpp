// Checkpoint: sharded and single-file folders, and broken indexes.

#include <doctest/doctest.h>

#include <hylens/io/checkpoint.hpp>
#include <hylens/io/safetensors_writer.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using namespace hylens;
using namespace hylens::io;
using hylens::io_test::has;
using hylens::io_test::message_of_throw;
using hylens::io_test::TempDir;
namespace fs = std::filesystem;

namespace {

std::vector<float> ramp(std::size_t n, float start) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
    return v;
}

/// Three shards holding 6 tensors, plus the index; returns the weight map as written.
void write_sharded(const fs::path& dir, const std::string& extra_map_entry = "") {
    SafetensorsWriter s1, s2, s3;
    s1.add_bf16("model.embed_tokens.weight", {8, 4}, ramp(32, 0.0f));
    s1.add_f32("model.layers.0.norm.weight", {4}, ramp(4, 100.0f));
    s2.add_bf16("model.layers.0.proj.weight", {4, 4}, ramp(16, 200.0f));
    s2.add_f32("model.layers.1.norm.weight", {4}, ramp(4, 300.0f));
    s2.add_f32("not.in.index", {1}, ramp(1, 0.0f));  // ignored: the index is the authority
    s3.add_bf16("lm_head.weight", {8, 4}, ramp(32, -16.0f));
    s3.add_f16("model.norm.weight", {4}, ramp(4, 1.0f));
    s1.write(dir / "model-00001-of-00003.safetensors");
    s2.write(dir / "model-00002-of-00003.safetensors");
    s3.write(dir / "model-00003-of-00003.safetensors");
    io_test::write_bytes(dir / "model.safetensors.index.json", R"({
  "metadata": {"total_size": 1234},
  "weight_map": {
    "lm_head.weight": "model-00003-of-00003.safetensors",
    "model.embed_tokens.weight": "model-00001-of-00003.safetensors",
    "model.layers.0.norm.weight": "model-00001-of-00003.safetensors",
    "model.layers.0.proj.weight": "model-00002-of-00003.safetensors",
    "model.layers.1.norm.weight": "model-00002-of-00003.safetensors",)" + extra_map_entry + R"(
    "model.norm.weight": "model-00003-of-00003.safetensors"
  }
})");
}

}  // namespace

TEST_SUITE("io/checkpoint") {

TEST_CASE("sharded round trip through model.safetensors.index.json") {
    TempDir tmp;
    write_sharded(tmp.path());
    const auto ck = Checkpoint::open(tmp.path());
    CHECK(ck.dir() == tmp.path());
    CHECK(ck.shards().size() == 3);
    // Shard by shard; within a shard in file order (the writer puts 4-byte F32 before 2-byte BF16/F16).
    CHECK(ck.names() == std::vector<std::string>{"model.layers.0.norm.weight", "model.embed_tokens.weight",
                                                 "model.layers.1.norm.weight", "model.layers.0.proj.weight",
                                                 "lm_head.weight", "model.norm.weight"});
    CHECK_FALSE(ck.contains("not.in.index"));
    CHECK(ck.read_f32("model.embed_tokens.weight") == ramp(32, 0.0f));
    CHECK(ck.read_f32("model.layers.1.norm.weight") == ramp(4, 300.0f));
    CHECK(ck.read_f32("lm_head.weight") == ramp(32, -16.0f));

    const Weight emb = ck.weight("model.embed_tokens.weight", {8, 4});
    CHECK(emb.is_bf16());
    CHECK(emb.raw() == ck.file_of("model.embed_tokens.weight").bytes("model.embed_tokens.weight").data());
    const Weight norm = ck.weight("model.norm.weight");  // F16 on disk -> owned F32
    CHECK(norm.dtype() == DType::F32);
    CHECK(norm.to_vector() == ramp(4, 1.0f));

    SUBCASE("the same checkpoint through the index path") {
        const auto by_index = Checkpoint::open(tmp / "model.safetensors.index.json");
        CHECK(by_index.names() == ck.names());
        CHECK(by_index.dir() == tmp.path());
    }
    SUBCASE("a wrong expected shape is a ShapeError naming file, tensor, both shapes") {
        const auto m = message_of_throw<ShapeError>([&] { (void)ck.weight("model.layers.0.proj.weight", {4, 5}); });
        CHECK(has(m, "model-00002-of-00003.safetensors"));
        CHECK(has(m, "model.layers.0.proj.weight"));
        CHECK(has(m, "[4, 5]"));
        CHECK(has(m, "[4, 4]"));
    }
    SUBCASE("a missing tensor names the folder and the tensor") {
        const auto m = message_of_throw<FormatError>([&] { (void)ck.weight("model.layers.9.norm.weight"); });
        CHECK(has(m, tmp.path().string()));
        CHECK(has(m, "missing tensor"));
        CHECK(has(m, "model.layers.9.norm.weight"));
    }
}

TEST_CASE("weights outlive the checkpoint that made them") {
    TempDir tmp;
    write_sharded(tmp.path());
    Weight w;
    {
        const auto ck = Checkpoint::open(tmp.path());
        w = ck.weight("lm_head.weight");
    }
    CHECK(w.to_vector() == ramp(32, -16.0f));
}

TEST_CASE("Storage::in_memory: the same tensors, read into private memory instead of mapped") {
    TempDir tmp;
    write_sharded(tmp.path());
    const auto mapped = Checkpoint::open(tmp.path());
    const auto in_memory = Checkpoint::open(tmp.path(), Storage::in_memory);
    REQUIRE(in_memory.names() == mapped.names());
    for (const std::string& name : mapped.names()) {
        CAPTURE(name);
        const auto a = mapped.file_of(name).bytes(name);
        const auto b = in_memory.file_of(name).bytes(name);
        REQUIRE(a.size() == b.size());
        CHECK(std::equal(a.begin(), a.end(), b.begin()));
        CHECK(a.data() != b.data());  // a copy, not the file's pages
        // The copy may sit a multiple of 8 bytes further past its page (cache_line_shift), so a
        // tensor keeps its 8-byte alignment.
        CHECK((reinterpret_cast<std::uintptr_t>(a.data()) - reinterpret_cast<std::uintptr_t>(b.data())) % 8 == 0);
    }
    // bf16 weights are still used in place, inside the in-memory copy.
    const Weight emb = in_memory.weight("model.embed_tokens.weight", {8, 4});
    CHECK(emb.is_bf16());
    CHECK(emb.raw() == in_memory.file_of("model.embed_tokens.weight").bytes("model.embed_tokens.weight").data());
    CHECK(in_memory.read_f32("lm_head.weight") == ramp(32, -16.0f));
    SUBCASE("a copy outlives its checkpoint") {
        Weight w;
        {
            const auto ck = Checkpoint::open(tmp.path(), Storage::in_memory);
            w = ck.weight("lm_head.weight");
        }
        CHECK(w.to_vector() == ramp(32, -16.0f));
    }
    SUBCASE("an empty file and a folder are refused as when mapped") {
        io_test::write_bytes(tmp / "empty.safetensors", "");
        const auto m = message_of_throw<FormatError>([&] { (void)MappedFile::map(tmp / "empty.safetensors", Storage::in_memory); });
        CHECK(has(m, "empty.safetensors"));
        CHECK(has(m, "empty file"));
        const auto d = message_of_throw<FormatError>([&] { (void)MappedFile::map(tmp.path(), Storage::in_memory); });
        CHECK(has(d, "not a regular file"));
    }
}

TEST_CASE("Storage::in_memory puts the tensors on 64-byte lines (SafetensorsFile::cache_line_shift)") {
    SUBCASE("the byte-weighted vote") {
        auto t = [](std::size_t offset, std::size_t nbytes) { return TensorInfo{"t", DType::F32, {nbytes / 4}, offset, nbytes}; };
        // data area at 8: tensors starting at 8 (1000 bytes) and 48 (2000 bytes) past a line.
        CHECK(SafetensorsFile::cache_line_shift(8, {t(0, 1000), t(1000, 2000)}) == 16);
        CHECK(SafetensorsFile::cache_line_shift(8, {t(0, 3000), t(1000, 2000)}) == 56);
        CHECK(SafetensorsFile::cache_line_shift(64, {t(0, 128), t(128, 64)}) == 0);            // all on lines already
        CHECK(SafetensorsFile::cache_line_shift(8, {t(0, 64), t(1016, 64)}) == 0);             // a tie: the smaller shift
        CHECK(SafetensorsFile::cache_line_shift(2, {t(0, 4096)}) == 0);                         // not 8-aligned: no vote
        CHECK(SafetensorsFile::cache_line_shift(0, {}) == 0);
    }
    SUBCASE("a file whose large tensors all start 64k + 8 bytes into it") {
        TempDir tmp;
        SafetensorsWriter w;  // (it starts the data area on a line, so the 8 bytes of "first" move the rest off it)
        w.add_f32("first", {2}, ramp(2, 7.0f));
        w.add_f32("tensor.a", {16}, ramp(16, 0.0f));        // multiples of 64 bytes: all share one start modulo 64
        w.add_f32("tensor.b", {4, 16}, ramp(64, 100.0f));
        w.add_f32("tensor.c", {32}, ramp(32, -50.0f));
        w.write(tmp / "model.safetensors");
        const auto mapped = SafetensorsFile::open(tmp / "model.safetensors");
        const auto in_memory = SafetensorsFile::open(tmp / "model.safetensors", Storage::in_memory);
        // The header leaves the data area off a line (otherwise this file tests nothing).
        REQUIRE(reinterpret_cast<std::uintptr_t>(mapped.weight("tensor.a").raw()) % 64 != 0);
        for (const std::string name : {"tensor.a", "tensor.b", "tensor.c"}) {
            CAPTURE(name);
            CHECK(in_memory.read_f32(name) == mapped.read_f32(name));
            const Weight x = in_memory.weight(name);
            CHECK(reinterpret_cast<std::uintptr_t>(x.raw()) % 64 == 0);
        }
        CHECK(in_memory.read_f32("first") == mapped.read_f32("first"));
    }
}

TEST_CASE("broken indexes") {
    TempDir tmp;
    SUBCASE("a shard file is missing") {
        write_sharded(tmp.path(), R"(
    "model.layers.2.norm.weight": "model-00004-of-00003.safetensors",)");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model-00004-of-00003.safetensors"));
        CHECK(has(m, "model.layers.2.norm.weight"));
        CHECK(has(m, "missing"));
    }
    SUBCASE("a name is listed but not in its shard") {
        write_sharded(tmp.path(), R"(
    "model.layers.2.norm.weight": "model-00002-of-00003.safetensors",)");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model-00002-of-00003.safetensors"));
        CHECK(has(m, "model.layers.2.norm.weight"));
        CHECK(has(m, "does not hold it"));
    }
    SUBCASE("a shard path that escapes the folder") {
        write_sharded(tmp.path(), R"(
    "model.layers.2.norm.weight": "../model-00001-of-00003.safetensors",)");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model.layers.2.norm.weight"));
        CHECK(has(m, "not a file name inside"));
    }
    SUBCASE("an absolute shard path") {
        write_sharded(tmp.path(), R"(
    "model.layers.2.norm.weight": "/etc/passwd",)");
        CHECK_THROWS_AS((void)Checkpoint::open(tmp.path()), FormatError);
    }
    SUBCASE("a shard that is not a string") {
        write_sharded(tmp.path(), R"(
    "model.layers.2.norm.weight": 3,)");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model.layers.2.norm.weight"));
    }
    SUBCASE("no weight_map") {
        io_test::write_bytes(tmp / "model.safetensors.index.json", R"({"metadata": {}})");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model.safetensors.index.json"));
        CHECK(has(m, "weight_map"));
    }
    SUBCASE("malformed index JSON") {
        io_test::write_bytes(tmp / "model.safetensors.index.json", "{\"weight_map\": {\n  \"a\": }");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model.safetensors.index.json"));
        CHECK(has(m, "line 2"));
    }
    SUBCASE("a hostile shard fails with the shard's name") {
        write_sharded(tmp.path());
        io_test::write_bytes(tmp / "model-00002-of-00003.safetensors", io_test::raw_file(5000, "{}", ""));
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "model-00002-of-00003.safetensors"));
    }
}

TEST_CASE("folder layouts without an index") {
    TempDir tmp;
    SafetensorsWriter w;
    w.add_f32("a", {2}, ramp(2, 1.0f));
    SUBCASE("nothing there") {
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, tmp.path().string()));
        CHECK(has(m, "no weights found"));
    }
    SUBCASE("no such folder") {
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp / "nope"); });
        CHECK(has(m, "nope"));
    }
    SUBCASE("exactly one *.safetensors with another name") {
        w.write(tmp / "weights.safetensors");
        const auto ck = Checkpoint::open(tmp.path());
        CHECK(ck.names() == std::vector<std::string>{"a"});
    }
    SUBCASE("two candidates and no model.safetensors is ambiguous") {
        w.write(tmp / "x.safetensors");
        w.write(tmp / "y.safetensors");
        const auto m = message_of_throw<FormatError>([&] { (void)Checkpoint::open(tmp.path()); });
        CHECK(has(m, "ambiguous"));
        CHECK(has(m, "x.safetensors"));
    }
    SUBCASE("model.safetensors wins over other files") {
        w.write(tmp / "model.safetensors");
        w.write(tmp / "golden.safetensors");
        CHECK(Checkpoint::open(tmp.path()).shards()[0].path().filename() == "model.safetensors");
    }
    SUBCASE("a path to a single file") {
        w.write(tmp / "one.safetensors");
        const auto ck = Checkpoint::open(tmp / "one.safetensors");
        CHECK(ck.dir() == tmp.path());
        CHECK(ck.read_f32("a") == ramp(2, 1.0f));
    }
}

}  // TEST_SUITE
