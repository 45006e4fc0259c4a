#pragma once
// hylens verify: scans every floating-point weight of a model folder for NaN and infinity.

#include <hylens/io/checkpoint.hpp>
#include <hylens/stack/finite_check.hpp>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

/// "[3, 17]" : the multi-index of flat index i in `shape`.
inline std::string multi_index(std::size_t i, const std::vector<std::size_t>& shape) {
    std::vector<std::size_t> idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
    return shape_string(idx);
}

inline int run_verify(int argc, char** argv) {
    CLI::App app{"Reads every floating-point tensor of the checkpoint (every shard) and reports each one holding a "
                 "NaN or an infinity: its name, shape, how many values, and the first one's index; names a tensor a "
                 "shard holds and the index does not list (the loader ignores it). Exit status 1 when any tensor "
                 "holds a non-finite value, 0 when every one is finite.",
                 "hylens verify"};
    std::string dir;
    app.add_option("--model", dir, "model folder, .safetensors file or index")->required();
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    const io::Checkpoint ck = io::Checkpoint::open(dir);
    std::size_t tensors = 0, values = 0, bad_tensors = 0, skipped = 0, unlisted = 0;
    // Every tensor of every shard: the loader reads those the index lists; one a shard holds and
    // the index omits is ignored by the loader (as by transformers), and named and scanned here.
    for (const io::SafetensorsFile& shard : ck.shards())
        for (const std::string& name : shard.names()) {
            if (!ck.contains(name)) {
                ++unlisted;
                std::cout << "not in the index: " << name << " (in " << shard.path().filename().string()
                          << "; the loader ignores it)\n";
            }
            const io::TensorInfo& t = shard.info(name);
            const bool is_float = t.dtype == DType::F64 || t.dtype == DType::F32 || t.dtype == DType::F16 ||
                                  t.dtype == DType::BF16 || t.dtype == DType::F8_E4M3 || t.dtype == DType::F8_E5M2;
            if (!is_float) {
                ++skipped;
                continue;
            }
            const std::vector<float> v = shard.read_f32(name);
            ++tensors;
            values += v.size();
            const std::size_t first = hylens::detail::first_non_finite(v.data(), v.size());
            if (first == v.size()) continue;
            std::size_t count = 0;
            for (float x : v) count += !std::isfinite(x);
            ++bad_tensors;
            std::cout << "non-finite: " << name << " " << shape_string(t.shape) << " " << dtype_name(t.dtype) << ": "
                      << count << " of " << v.size() << " values, first " << v[first] << " at index "
                      << multi_index(first, t.shape) << " (flat " << first << ")\n";
        }
    std::cout << "hylens verify: " << dir << ": " << tensors << " tensors, " << values << " values"
              << (skipped ? ", " + std::to_string(skipped) + " integer tensors skipped" : std::string())
              << (unlisted ? ", " + std::to_string(unlisted) + " not in the index" : std::string()) << ": "
              << (bad_tensors ? std::to_string(bad_tensors) + " tensor(s) hold non-finite values" : "all finite")
              << "\n";
    return bad_tensors ? 1 : 0;
}

}  // namespace hylens::cli
