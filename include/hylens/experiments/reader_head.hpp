#pragma once
// The reader head of a dictionary-lookup study (protocols.md §A.7): the softmax head whose
// attention from the final position is read on the dictionary's entries. A study takes it
// from a circuit file or `--reader L:H`; this header checks it against a model and reads its
// probability row out of a forward.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <string>       // std::string, std::stoul
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "../core/indices.hpp"
#include "../interp/circuit.hpp"  // CircuitRoles
#include "../interp/sites.hpp"
#include "../layers/hooks.hpp"

namespace hylens::experiments {

/// The reader head whose attention from the final position is read (layer no_layer: none).
struct ReaderHead {
    LayerIndex layer = no_layer;
    std::size_t head = 0;
    bool given() const noexcept { return layer != no_layer; }
};

/// "L:H" -> the head (a study's reader or watched head); `option` names the argument in the
/// message ("--reader", "watch").
inline ReaderHead parse_reader_head(std::string_view s, const char* option) {
    const std::size_t c = s.find(':');
    const auto digits = [](std::string_view d) {
        return !d.empty() && d.size() < 7 && d.find_first_not_of("0123456789") == std::string_view::npos;
    };
    check(c != std::string_view::npos && digits(s.substr(0, c)) && digits(s.substr(c + 1)), option, " '", s,
          "' is not LAYER:HEAD (e.g. 3:1)");
    return {static_cast<LayerIndex>(std::stoul(std::string(s.substr(0, c)))),
            static_cast<std::size_t>(std::stoul(std::string(s.substr(c + 1))))};
}

/// Sets a study's roles from a circuit file read: `o.circuit` (checked against the model when
/// the study runs) and, unless a reader head was given (`--reader`, Python's reader=), the
/// reader head the file names.
template <class Options>
void use_circuit_roles(Options& o, const CircuitRoles& roles, bool reader_given) {
    o.circuit = roles;
    if (!reader_given) o.reader = {roles.reader_layer, roles.reader_head};
}

/// Checks a given reader head against the model: its layer has softmax attention and the head
/// is one of that layer's query heads (else it would fail inside the attention capture with a
/// tensor's shape). `study` names the caller in messages.
template <class Stack>
void check_reader_head(const Stack& stack, const ReaderHead& reader, const char* study) {
    if (!reader.given()) return;
    check<ShapeError>(reader.layer < stack.size(), "[", study, "] the reader layer ", reader.layer,
                      " is not a layer of the model (", stack.size(), " layers, 0-", stack.size() - 1, ")");
    check<ShapeError>(find_mixer_site(stack, reader.layer, MixerChannel::attention).has_value(), "[", study,
                      "] the reader layer ", reader.layer, " has no softmax attention");
    const std::size_t heads = attention_heads(stack, reader.layer);
    check<ShapeError>(reader.head < heads, "[", study, "] the reader head ", reader.head, " is not a head of layer ",
                      reader.layer, " (", heads, " query heads)");
}

/// A hook for a forward of T tokens on a fresh cache that copies the reader head's
/// probability row of the final query (over the T keys) into `row` and passes every other
/// site to `inner` when one is given. The attention layer fires attn_probs as rows
/// [B, Hq * T, Tk], head-major; batch row 0 is read. `row`, `inner` and the hook's user must
/// outlive the forward.
inline Hook reader_row_hook(const ReaderHead& reader, std::size_t T, std::vector<float>& row, const Hook* inner = nullptr) {
    Hook h;
    h.wants = [reader, inner](Site s, LayerIndex l) {
        if (s == Site::attn_probs && l == reader.layer) return true;
        return inner && inner->fn && (!inner->wants || inner->wants(s, l));
    };
    h.fn = [reader, T, &row, inner](Site s, LayerIndex l, const ActivationView& v, const std::int64_t* positions) {
        if (s == Site::attn_probs && l == reader.layer) {
            check<ShapeError>(v.T % T == 0 && reader.head < v.T / T, "[reader] attn_probs of layer ", l, " hold ", v.T,
                              " rows for ", T, " queries: no head ", reader.head);
            const float* r = v.row(0, reader.head * T + T - 1);
            row.assign(r, r + v.D);
        }
        if (inner && inner->fn && (!inner->wants || inner->wants(s, l))) inner->fn(s, l, v, positions);
    };
    return h;
}

}  // namespace hylens::experiments
