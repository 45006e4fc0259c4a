#pragma once
// hylens.Tokenizer (text/tokenizer.hpp) with character offsets, and chat wrapping
// (text/chat.hpp): wrap_chat renders one user turn plus the assistant prefill in a family's
// chat format and says where the user message and the prefill are.

#include <hylens/text/chat.hpp>
#include <hylens/text/tokenizer.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>  // str or os.PathLike as a path

#include <string>
#include <utility>
#include <vector>

#include "nogil.hpp"
#include "arrays.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline ChatFamily parse_family(const std::string& f) {
    if (f == "qwen35" || f == "qwen3_5" || f == "qwen3_5_text" || f == "qwen3_5_moe" || f == "qwen3_5_moe_text" ||
        f == "qwen3_next")
        return ChatFamily::qwen35;
    if (f == "granite4" || f == "granite4h" || f == "granitemoehybrid") return ChatFamily::granite4;
    if (f == "falcon_h1") return ChatFamily::falcon_h1;
    throw pyb::value_error("chat family '" + f + "': use 'qwen35', 'granite4' or 'falcon_h1' (or a model_type)");
}

inline std::pair<std::size_t, std::size_t> span_pair(const CharSpan& s) { return {s.begin, s.end}; }

inline void bind_text(pyb::module_& m) {
    pyb::class_<Encoding>(m, "Encoding", "Token ids and the character span [begin, end) of the text each covers.")
        .def_property_readonly("ids", [](const Encoding& e) { return std::vector<std::int64_t>(e.ids.begin(), e.ids.end()); })
        .def_property_readonly("offsets", [](const Encoding& e) {
            std::vector<std::pair<std::size_t, std::size_t>> out;
            for (const auto& o : e.offsets) out.push_back(span_pair(o));
            return out;
        })
        .def("positions", [](const Encoding& e, std::pair<std::size_t, std::size_t> span) {
            return span_to_positions(e, CharSpan{span.first, span.second});
        }, pyb::arg("span"), "Token positions overlapping a character span (begin, end).")
        .def("__len__", &Encoding::size)
        .def("__repr__", [](const Encoding& e) { return "<hylens.Encoding " + std::to_string(e.size()) + " tokens>"; });

    pyb::class_<ChatPrompt>(m, "ChatPrompt", "A rendered chat prompt and the character spans of its parts.")
        .def_readonly("text", &ChatPrompt::text)
        .def_property_readonly("user", [](const ChatPrompt& p) { return span_pair(p.user); })
        .def_property_readonly("prefill", [](const ChatPrompt& p) { return span_pair(p.prefill); })
        .def("__repr__", [](const ChatPrompt& p) { return "<hylens.ChatPrompt " + std::to_string(p.text.size()) + " bytes>"; });

    pyb::class_<Tokenizer>(m, "Tokenizer", "A Hugging Face tokenizer.json (BPE) with character offsets.")
        .def(pyb::init([](const std::filesystem::path& path) { return Tokenizer::from_file(path.string()); }), pyb::arg("path"))
        .def_property_readonly("path", &Tokenizer::source, "The tokenizer.json it was read from.")
        .def("encode", [](const Tokenizer& t, const std::string& text, bool add_special) {
            const NoGil nogil;
            return t.encode(text, {.add_special = add_special});
        }, pyb::arg("text"), pyb::arg("add_special") = false)
        .def("encode_ids", [](const Tokenizer& t, const std::string& text, bool add_special) {
            const std::vector<Tokenizer::TokenId> ids = t.encode_ids(text, {.add_special = add_special});
            return std::vector<std::int64_t>(ids.begin(), ids.end());
        }, pyb::arg("text"), pyb::arg("add_special") = false)
        .def("encode_chat", [](const Tokenizer& t, const ChatPrompt& p) { return encode_chat(t, p); }, pyb::arg("prompt"),
             "Encodes a wrap_chat prompt as a chat template's output (special-token strings become their tokens).")
        .def("decode", [](const Tokenizer& t, pyb::handle ids, bool skip_special) {
            // No ids is the empty text (a generation of max_new=0, an answer cut at its first
            // token); a batch is refused, an empty one too (a [1, 0] array said "no token ids").
            if (!ids.is_none() && !pyb::isinstance<pyb::str>(ids)) {
                pyb::object a;
                try {
                    a = pyb::module_::import("numpy").attr("asarray")(ids);
                } catch (pyb::error_already_set&) {  // ragged lists and the like: to_ids says what
                }
                if (a && a.attr("ndim").cast<int>() == 2) throw pyb::value_error("decode: one sequence (1-D ids) at a time");
                if (a && a.attr("ndim").cast<int>() == 1 && a.attr("size").cast<std::size_t>() == 0) return std::string();
            }
            const Ids in = to_ids(ids, "decode");
            std::vector<Tokenizer::TokenId> v;
            for (auto id : in.batch.ids) {
                if (id < 0 || id > INT32_MAX) throw pyb::value_error("decode: token id " + std::to_string(id) + " is out of range");
                v.push_back(static_cast<Tokenizer::TokenId>(id));
            }
            return t.decode(v, skip_special);
        }, pyb::arg("ids"), pyb::arg("skip_special") = false)
        .def("token_to_id", [](const Tokenizer& t, const std::string& tok) { return t.token_to_id(tok); }, pyb::arg("token"))
        .def("id_to_token", [](const Tokenizer& t, Int id) -> std::optional<std::string> {  // Int: True is not id 1
            if (id.v < 0 || id.v > INT32_MAX) return std::nullopt;
            return t.id_to_token(static_cast<Tokenizer::TokenId>(id.v));
        }, pyb::arg("id"))
        .def_property_readonly("vocab_size", &Tokenizer::vocab_size);

    m.def("wrap_chat", [](const std::string& family, const std::string& user, const std::string& prefill, bool add_bos) {
        return wrap_chat(parse_family(family), user, prefill, ChatOptions{add_bos});
    }, pyb::arg("family"), pyb::arg("user"), pyb::arg("prefill") = "", pyb::arg("add_bos") = true,
       "One user turn plus the assistant prefill in the family's chat format ('qwen35', 'granite4', 'falcon_h1' or a model_type).");
}

}  // namespace hylens::python
