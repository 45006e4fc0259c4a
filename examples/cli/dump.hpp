#pragma once
// hylens dump: prefill input_ids, decode decode.input_ids one at a time, write every tensor
// of the golden format (tests/golden/README.md) to a safetensors file.

#include <hylens/interp/dump.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/io/safetensors_writer.hpp>
#include <hylens/models/load.hpp>

#include <iostream>

#include "args.hpp"

namespace hylens::cli {

inline constexpr const char* kDumpHelp =
    "usage: hylens dump --model DIR --input IN.safetensors --out OUT.safetensors\n"
    "\n"
    "Loads the model folder DIR (config.json + *.safetensors, F32 or BF16, any supported family),\n"
    "prefills the I64 tensor 'input_ids' of IN, then feeds the tokens of 'decode.input_ids' (if\n"
    "present) one at a time, and writes to OUT: logits, hidden.embed, hidden.layer.N,\n"
    "hidden.final_norm, cache.N.{conv,state,k,v}, and decode.logits, decode.hidden.layer.N,\n"
    "decode.hidden.final_norm, decode.cache.N.* (float32, batch axis dropped).\n";

inline void write_named(const NamedTensors& t, const std::filesystem::path& out) {
    io::SafetensorsWriter w;
    for (const auto& [name, tensor] : t.all()) w.add_f32(name, tensor.shape, tensor.values);
    w.write(out);
}

inline int run_dump(int argc, char** argv) {
    const Args a(argc, argv, 2);
    if (a.help()) {
        std::cout << kDumpHelp;
        return 0;
    }
    const AnyModel model = load(a.get("--model"));
    const io::SafetensorsFile in = io::SafetensorsFile::open(a.get("--input"));
    const std::vector<std::int64_t> prompt = in.read_i64("input_ids");
    const std::vector<std::int64_t> decode =
        in.contains("decode.input_ids") ? in.read_i64("decode.input_ids") : std::vector<std::int64_t>{};
    const NamedTensors out = model.visit([&](const auto& m) { return dump_run(m, prompt, decode); });
    write_named(out, a.get("--out"));
    std::cerr << "hylens dump: " << model.config().model_type << ", " << prompt.size() << " prompt tokens, "
              << decode.size() << " decode steps, " << out.size() << " tensors -> " << a.get("--out") << "\n";
    return 0;
}

}  // namespace hylens::cli
