#pragma once
// Save and load a stack cache through safetensors, with the names of the golden files
// (tests/golden/README.md): <prefix>N.conv (C, K), <prefix>N.state (state_shape), <prefix>N.k
// and <prefix>N.v (Hkv, L, hd) for layer N, float32; the parts of a stitched block's donor
// layer j under <prefix>N.j. (<prefix>N.j.conv, ...). With batch B = 1 the batch axis is
// dropped (as in the golden files); with B > 1 every tensor gets a leading (B, ...) axis.
// The metadata key "hylens.tokens_seen" keeps the position counter of stacks without KV.

#include <algorithm>   // std::copy
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t
#include <limits>      // std::numeric_limits
#include <filesystem>  // std::filesystem::path
#include <string>      // std::string, std::to_string, std::stoull
#include <utility>     // std::move
#include <vector>      // std::vector

#include "../core/error.hpp"
#include "../core/tensor.hpp"  // shape_string
#include "../io/safetensors.hpp"
#include "../io/safetensors_writer.hpp"
#include "kv_cache.hpp"
#include "layered_cache.hpp"
#include "parts.hpp"
#include "recurrent_cache.hpp"

namespace hylens {

namespace detail {
inline std::vector<std::size_t> with_batch(std::size_t B, std::vector<std::size_t> shape) {
    if (B != 1) shape.insert(shape.begin(), B);
    return shape;
}
}  // namespace detail

/// Adds every part of `cache` to a writer (so a cache can share a file with other tensors).
template <LayeredCache Cache>
void add_cache(io::SafetensorsWriter& w, const Cache& cache, const std::string& prefix = "cache.") {
    if constexpr (requires { cache.check_usable("save_cache"); }) cache.check_usable("save_cache");
    const std::size_t B = cache.batch();
    for (std::size_t i = 0; i < cache.num_layers(); ++i)
        cache.visit(i, [&](const auto& c) {
            // A stitched block's donor layers: <prefix>N.<j>.conv and so on (for_each_named_part).
            for_each_named_part<RecurrentCache>(c, prefix + std::to_string(i) + ".", [&](const RecurrentCache& r,
                                                                                        const std::string& p) {
                const std::size_t nc = r.conv_channels() * r.conv_width();
                std::vector<float> conv(B * nc), state(B * r.state_size());
                for (std::size_t b = 0; b < B; ++b) {
                    std::copy(r.conv(b), r.conv(b) + nc, conv.data() + b * nc);
                    std::copy(r.state(b), r.state(b) + r.state_size(), state.data() + b * r.state_size());
                }
                w.add_f32(p + "conv", detail::with_batch(B, {r.conv_channels(), r.conv_width()}), conv);
                w.add_f32(p + "state", detail::with_batch(B, r.state_shape()), state);
            });
            for_each_named_part<KVCache>(c, prefix + std::to_string(i) + ".", [&](const KVCache& kv, const std::string& p) {
                const std::size_t H = kv.kv_heads(), L = kv.length(), hd = kv.head_dim(), n = L * hd;
                std::vector<float> k(B * H * n), v(B * H * n);  // (B, Hkv, L, hd)
                for (std::size_t b = 0; b < B; ++b)
                    for (std::size_t j = 0; j < H; ++j) {
                        std::copy(kv.k(b, j), kv.k(b, j) + n, k.data() + (b * H + j) * n);
                        std::copy(kv.v(b, j), kv.v(b, j) + n, v.data() + (b * H + j) * n);
                    }
                w.add_f32(p + "k", detail::with_batch(B, {H, L, hd}), k);
                w.add_f32(p + "v", detail::with_batch(B, {H, L, hd}), v);
            });
        });
    w.set_metadata("hylens.tokens_seen", std::to_string(cache.tokens_seen()));
}

/// Writes `cache` to a safetensors file.
template <LayeredCache Cache>
void save_cache(const Cache& cache, const std::filesystem::path& path, const std::string& prefix = "cache.") {
    io::SafetensorsWriter w;
    add_cache(w, cache, prefix);
    w.write(path);
}

struct LoadCacheOptions {
    /// Leave parts that the file does not hold as they are (e.g. a file with only the
    /// recurrent parts of some layers); by default every part must be present.
    bool allow_missing = false;
};

/// Overwrites the parts of `cache` (made by the model the file belongs to, e.g.
/// model.new_cache(B)) with the tensors <prefix>N.* of `file`. Every shape is checked
/// against the cache: a mismatch is a ShapeError naming the tensor, a missing tensor a
/// FormatError (unless allow_missing; a file with none of the cache's tensors under `prefix` is
/// one always). Returns the number of tensors read.
template <LayeredCache Cache>
std::size_t load_cache(const io::SafetensorsFile& file, Cache& target, const std::string& prefix = "cache.",
                       const LoadCacheOptions& opt = {}) {
    if constexpr (requires { target.check_usable("load_cache"); }) target.check_usable("load_cache");
    // Read into a copy and take it whole at the end: an error part-way (a missing or misshapen
    // tensor of a later layer, a file of a deeper model) leaves `target` as it was, where it
    // left the first layers overwritten and the rest not.
    Cache cache = target;
    const std::size_t B = cache.batch();
    std::size_t read = 0;
    const auto fetch = [&](const std::string& name, const std::vector<std::size_t>& want,
                           std::vector<float>& out) -> bool {
        if (!file.contains(name)) {
            check<FormatError>(opt.allow_missing, "[load_cache] ", file.path().string(), ": missing tensor '", name, "'");
            return false;
        }
        const std::vector<std::size_t> shape = detail::with_batch(B, want);
        check<ShapeError>(file.info(name).shape == shape, "[load_cache] ", file.path().string(), ": tensor '", name,
                          "' has shape ", shape_string(file.info(name).shape), ", the cache needs ", shape_string(shape));
        out = file.read_f32(name);
        ++read;
        return true;
    };
    for (std::size_t i = 0; i < cache.num_layers(); ++i)
        cache.visit(i, [&](auto& c) {
            std::vector<float> buf;
            for_each_named_part<RecurrentCache>(c, prefix + std::to_string(i) + ".", [&](RecurrentCache& r, const std::string& p) {
                const std::size_t nc = r.conv_channels() * r.conv_width(), ns = r.state_size();
                if (fetch(p + "conv", {r.conv_channels(), r.conv_width()}, buf))
                    for (std::size_t b = 0; b < B; ++b) std::copy(buf.data() + b * nc, buf.data() + (b + 1) * nc, r.conv(b));
                if (fetch(p + "state", r.state_shape(), buf))
                    for (std::size_t b = 0; b < B; ++b) std::copy(buf.data() + b * ns, buf.data() + (b + 1) * ns, r.state(b));
            });
            for_each_named_part<KVCache>(c, prefix + std::to_string(i) + ".", [&](KVCache& kv, const std::string& p) {
                const std::string kn = p + "k", vn = p + "v";
                // A KV part is read whole: with allow_missing a .v without its .k was dropped
                // without a word, and a .k without its .v read and thrown away.
                if (opt.allow_missing && !file.contains(kn) && !file.contains(vn)) return;
                const char* whole = opt.allow_missing ? " (allow_missing leaves out whole parts: a KV part is its .k and .v)" : "";
                for (const std::string& n : {kn, vn})
                    check<FormatError>(file.contains(n), "[load_cache] ", file.path().string(), ": missing tensor '", n, "'", whole);
                const auto& s = file.info(kn).shape;
                // The KV length is the one free dimension: (.., Hkv, L, hd).
                check<ShapeError>(s.size() == (B == 1 ? 3u : 4u), "[load_cache] ", file.path().string(), ": tensor '",
                                  kn, "' has shape ", shape_string(s), ", expected (", B == 1 ? "" : "B, ", "Hkv, L, hd)");
                const std::size_t H = kv.kv_heads(), hd = kv.head_dim(), L = s[s.size() - 2], n = L * hd;
                std::vector<float> k, v;
                fetch(kn, {H, L, hd}, k);
                fetch(vn, {H, L, hd}, v);
                kv.clear();
                kv.reserve_more(L);
                for (std::size_t b = 0; b < B; ++b)
                    for (std::size_t j = 0; j < H; ++j) {
                        std::copy(k.data() + (b * H + j) * n, k.data() + (b * H + j + 1) * n, kv.k(b, j));
                        std::copy(v.data() + (b * H + j) * n, v.data() + (b * H + j + 1) * n, kv.v(b, j));
                    }
                kv.commit(L);
            });
        });
    // allow_missing reads part of a cache; none of it is a wrong prefix (or another file), which
    // returned the fresh cache as if it had been read.
    if (read == 0) {
        const std::vector<std::string> names = file.names();
        fail<FormatError>("[load_cache] ", file.path().string(), ": no tensor of this cache under '", prefix, "' (the file holds ",
                          names.size(), " tensors", names.empty() ? std::string() : ", '" + names.front() + "' ...",
                          "): another prefix or another file?");
    }
    if (!opt.allow_missing) {  // a file of a deeper model (more layers) is not this cache
        std::size_t in_file = 0;
        for (const auto& name : file.names()) in_file += name.rfind(prefix, 0) == 0 ? 1 : 0;
        check<FormatError>(in_file == read, "[load_cache] ", file.path().string(), ": ", in_file,
                           " tensors under '", prefix, "' but the cache has ", read, " parts (another model?)");
    }
    const auto& meta = file.metadata();
    if (auto it = meta.find("hylens.tokens_seen"); it != meta.end()) {
        // A position: digits, at most 2^63 - 1 (twenty nines wrapped around; "" read as 0).
        constexpr std::size_t kLast = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
        std::size_t seen = 0;
        bool ok = !it->second.empty();
        for (char ch : it->second) {
            ok = ok && ch >= '0' && ch <= '9' && seen <= (kLast - static_cast<std::size_t>(ch - '0')) / 10;
            if (!ok) break;
            seen = seen * 10 + static_cast<std::size_t>(ch - '0');
        }
        check<FormatError>(ok, "[load_cache] ", file.path().string(), ": metadata hylens.tokens_seen is not a position (0 to 2^63 - 1): '",
                           it->second, "'");
        cache.set_tokens_seen(seen);
    }
    target = std::move(cache);
    return read;
}

/// Reads a cache file into a copy of `like` (a fresh cache of the right model and batch).
template <LayeredCache Cache>
Cache load_cache(const std::filesystem::path& path, const Cache& like, const std::string& prefix = "cache.",
                 const LoadCacheOptions& opt = {}) {
    Cache out = like;
    load_cache(io::SafetensorsFile::open(path), out, prefix, opt);
    return out;
}

}  // namespace hylens
