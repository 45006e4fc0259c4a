// libFuzzer target: arbitrary bytes as a .safetensors file. The parser must either accept the
// file or throw a hylens::Error; every tensor of an accepted file must then be readable through
// every accessor without a crash, a sanitizer report, or an exception outside hylens::Error.
// Run through scripts/fuzz.sh (seeds: fuzz/seeds/fuzz_safetensors_header/, dictionary:
// fuzz/fuzz_safetensors_header.dict).

#include <hylens/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using hylens::io::SafetensorsFile;
    try {
        const auto file = SafetensorsFile::from_memory(std::span(reinterpret_cast<const std::byte*>(data), size), "<fuzz>");
        (void)file.metadata();
        for (const auto& name : file.names()) {
            const auto& info = file.info(name);
            const auto bytes = file.bytes(name);
            // Touch the first and last byte: the span must lie inside the buffer (ASan checks).
            volatile std::byte sink{};
            if (!bytes.empty()) sink = static_cast<std::byte>(static_cast<unsigned>(bytes.front()) ^ static_cast<unsigned>(bytes.back()));
            (void)sink;
            (void)info;
            // Each accessor may refuse a dtype with a hylens::Error; nothing else may escape.
            try {
                (void)file.read_f32(name);
            } catch (const hylens::Error&) {
            }
            try {
                (void)file.read_i64(name);
            } catch (const hylens::Error&) {
            }
            try {
                const auto w = file.weight(name);
                if (w.numel() > 0) (void)(w.at(0) + w.at(w.numel() - 1));
            } catch (const hylens::Error&) {
            }
        }
    } catch (const hylens::Error&) {
        // Rejected input: the expected outcome for almost every mutation.
    }
    return 0;
}
