#pragma once
// Checkpoint: the weights of one model folder, whatever the file layout:
//   - model.safetensors.index.json + shards ({"weight_map": {tensor name: shard file}}), the
//     Hugging Face layout for models above ~5 GB;
//   - model.safetensors;
//   - a folder holding exactly one *.safetensors file (or one *.safetensors.index.json);
//   - a path to a single .safetensors file or to an index file.
// Every shard is memory-mapped and validated when the checkpoint opens, and every name of the
// index is checked against its shard, so a broken checkpoint fails at open() with a message
// naming the index, the shard and the tensor, not halfway through building a model.

#include <algorithm>    // std::sort
#include <cstddef>      // std::size_t
#include <filesystem>   // std::filesystem
#include <map>          // std::map
#include <memory>       // std::shared_ptr
#include <mutex>        // std::mutex, std::lock_guard
#include <set>          // std::set
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "../core/tensor.hpp"  // shape_string
#include "../core/weight.hpp"
#include "config_json.hpp"
#include "safetensors.hpp"

namespace hylens::io {

class Checkpoint {
public:
    /// Opens a model folder, a .safetensors file or a *.safetensors.index.json file, every shard
    /// in `storage` (mapped, or read into memory). FormatError naming the folder if no weights
    /// are found or the choice is ambiguous, and naming index, shard and tensor for a broken index.
    static Checkpoint open(const std::filesystem::path& path, Storage storage = Storage::mapped) {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (fs::is_regular_file(path, ec)) {
            const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
            if (ends_with(path.filename().string(), ".index.json")) return open_index(dir, path, storage);
            return open_single(dir, path, storage);
        }
        if (!fs::is_directory(path, ec)) fail<FormatError>("[checkpoint] ", path.string(), ": no such file or folder");
        if (fs::is_regular_file(path / "model.safetensors.index.json", ec))
            return open_index(path, path / "model.safetensors.index.json", storage);
        if (fs::is_regular_file(path / "model.safetensors", ec)) return open_single(path, path / "model.safetensors", storage);
        std::vector<fs::path> indexes, files;
        for (const auto& entry : fs::directory_iterator(path, ec)) {
            const std::string name = entry.path().filename().string();
            if (!entry.is_regular_file(ec)) continue;
            if (ends_with(name, ".safetensors.index.json")) indexes.push_back(entry.path());
            if (ends_with(name, ".safetensors")) files.push_back(entry.path());
        }
        if (ec) fail<FormatError>("[checkpoint] ", path.string(), ": cannot list the folder: ", ec.message());
        if (indexes.size() == 1) return open_index(path, indexes[0], storage);
        if (indexes.empty() && files.size() == 1) return open_single(path, files[0], storage);
        if (indexes.empty() && files.empty())
            fail<FormatError>("[checkpoint] ", path.string(),
                              ": no weights found (expected model.safetensors, model.safetensors.index.json or one "
                              "*.safetensors file)");
        std::string found;
        for (const auto& f : indexes.size() > 1 ? indexes : files) found += (found.empty() ? "" : ", ") + f.filename().string();
        fail<FormatError>("[checkpoint] ", path.string(), ": ambiguous, several candidates and no model.safetensors(.index.json): ",
                          found);
    }

    /// Tensor names: shard by shard (shards sorted by file name), in file order within a shard.
    std::vector<std::string> names() const { return s_->names; }
    std::size_t size() const noexcept { return s_->names.size(); }
    bool contains(std::string_view name) const { return s_->where.find(name) != s_->where.end(); }

    /// The file that holds `name`. FormatError "missing tensor" naming the folder and tensor.
    /// Counts the tensor as read (unread()).
    const SafetensorsFile& file_of(std::string_view name) const {
        auto it = s_->where.find(name);
        if (it == s_->where.end())
            fail<FormatError>("[checkpoint] ", s_->dir.string(), ": missing tensor '", name, "' (the checkpoint holds ",
                              s_->names.size(), " tensors)");
        {
            const std::lock_guard<std::mutex> lock(read_->mutex);
            read_->names.insert(it->first);
        }
        return s_->shards[it->second];
    }
    /// The tensors nothing has read through this checkpoint (or a copy of it) yet, in names()
    /// order: after a model is built from it, those the model does not use (a config that
    /// describes fewer layers than the file holds, an unknown tensor).
    std::vector<std::string> unread() const {
        const std::lock_guard<std::mutex> lock(read_->mutex);
        std::vector<std::string> out;
        for (const std::string& n : s_->names)
            if (read_->names.find(n) == read_->names.end()) out.push_back(n);
        return out;
    }
    const TensorInfo& info(std::string_view name) const { return file_of(name).info(name); }

    /// See SafetensorsFile::weight (F32/BF16 zero-copy).
    Weight weight(std::string_view name) const { return file_of(name).weight(name); }
    /// As weight(name), after checking the stored shape: ShapeError naming file, tensor,
    /// expected and actual shape.
    Weight weight(std::string_view name, const std::vector<std::size_t>& expected_shape) const {
        const SafetensorsFile& f = file_of(name);
        const TensorInfo& t = f.info(name);
        check<ShapeError>(t.shape == expected_shape, "[checkpoint] ", f.path().string(), ": tensor '", t.name,
                          "': expected shape ", shape_string(expected_shape), ", got ", shape_string(t.shape));
        return f.weight(name);
    }
    std::vector<float> read_f32(std::string_view name) const { return file_of(name).read_f32(name); }
    std::vector<std::int64_t> read_i64(std::string_view name) const { return file_of(name).read_i64(name); }

    /// The folder (config.json and tokenizer files live here).
    const std::filesystem::path& dir() const noexcept { return s_->dir; }
    /// The open files, sorted by name (one unless sharded).
    const std::vector<SafetensorsFile>& shards() const noexcept { return s_->shards; }

private:
    struct State {
        std::filesystem::path dir;
        std::vector<SafetensorsFile> shards;
        std::map<std::string, std::size_t, std::less<>> where;  // name -> shard
        std::vector<std::string> names;
    };

    explicit Checkpoint(std::shared_ptr<const State> s) : s_(std::move(s)) {}

    struct Reads {
        std::mutex mutex;
        std::set<std::string, std::less<>> names;
    };

    static bool ends_with(const std::string& s, std::string_view suffix) {
        return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    }

    static Checkpoint open_single(const std::filesystem::path& dir, const std::filesystem::path& file, Storage storage) {
        auto s = std::make_shared<State>();
        s->dir = dir;
        s->shards.push_back(SafetensorsFile::open(file, storage));
        s->names = s->shards[0].names();
        for (const auto& n : s->names) s->where.emplace(n, 0);
        return Checkpoint(std::move(s));
    }

    static Checkpoint open_index(const std::filesystem::path& dir, const std::filesystem::path& index, Storage storage) {
        namespace fs = std::filesystem;
        const std::string where = "[checkpoint] " + index.string() + ": ";
        const Config cfg = Config::from_file(index);
        if (!cfg.is_object("weight_map")) fail<FormatError>(where, "no \"weight_map\" object");
        const auto& map = cfg.raw().at("weight_map");

        // Shard file -> tensor names it should hold (std::map: shards sorted by file name).
        std::map<std::string, std::vector<std::string>> wanted;
        for (auto it = map.begin(); it != map.end(); ++it) {
            if (!it.value().is_string())
                fail<FormatError>(where, "tensor '", it.key(), "': shard must be a file name string, got ", it.value().type_name());
            const std::string shard = it.value().get<std::string>();
            // A shard is a file next to the index: refuse absolute paths and "..", so a hostile
            // index cannot make us map an arbitrary file.
            const fs::path rel(shard);
            bool escapes = shard.empty() || rel.is_absolute() || rel.has_root_path();
            for (const auto& part : rel) escapes = escapes || part == "..";
            if (escapes) fail<FormatError>(where, "tensor '", it.key(), "': shard '", shard, "' is not a file name inside ", dir.string());
            wanted[shard].push_back(it.key());
        }
        if (wanted.empty()) fail<FormatError>(where, "\"weight_map\" is empty");

        auto s = std::make_shared<State>();
        s->dir = dir;
        for (const auto& [shard, names] : wanted) {
            const fs::path file = dir / shard;
            std::error_code ec;
            if (!fs::is_regular_file(file, ec))
                fail<FormatError>(where, "shard '", shard, "' (listed for tensor '", names.front(), "' and ", names.size() - 1,
                                  " others) is missing: ", file.string());
            SafetensorsFile f = SafetensorsFile::open(file, storage);
            for (const auto& n : names) {
                if (!f.contains(n))
                    fail<FormatError>(where, "tensor '", n, "' is listed in shard '", shard, "', but ", file.string(),
                                      " does not hold it");
            }
            const std::size_t k = s->shards.size();
            for (const auto& n : names) s->where.emplace(n, k);
            // File order within the shard, restricted to the names the index lists (tensors a
            // shard holds but the index omits are ignored, as transformers does).
            for (const auto& t : f.tensors())
                if (s->where.count(t.name) != 0 && s->where.find(t.name)->second == k) s->names.push_back(t.name);
            s->shards.push_back(std::move(f));
        }
        return Checkpoint(std::move(s));
    }

    std::shared_ptr<const State> s_;
    std::shared_ptr<Reads> read_ = std::make_shared<Reads>();  // shared by copies
};

}  // namespace hylens::io
