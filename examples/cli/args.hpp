#pragma once
// What every hylens subcommand shares, all on CLI11: parse() (help is exit 0; an unknown
// option, a missing required one or a bad value is a message plus the usage line, exit 2),
// token input given as text or as ids, the model folder's tokenizer, and JSON output.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <hylens/core/error.hpp>
#include <hylens/experiments/result_folder.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/models/load.hpp>  // LoadOptions
#include <hylens/stack/sampling.hpp>
#include <hylens/text/chat.hpp>
#include <hylens/text/tokenizer.hpp>

#include <charconv>  // std::from_chars
#include <cmath>     // std::isfinite
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <system_error>

#include <unistd.h>  // access
#include <string>
#include <vector>

namespace hylens::cli {

/// The "Usage: ..." line of an app's help, a subcommand's with its parents' names ("Usage:
/// hylens experiment channels [OPTIONS]", where its own help says "Usage: channels ...").
inline std::string usage_line(const CLI::App& app) {
    std::string path = app.get_name();
    for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
    std::istringstream help(app.help());
    std::string line;
    while (std::getline(help, line))
        if (line.rfind("Usage:", 0) == 0) {
            const std::string own = "Usage: " + app.get_name();
            if (path != app.get_name() && line.rfind(own, 0) == 0 && line.rfind("Usage: " + path, 0) != 0)
                line = "Usage: " + path + line.substr(own.size());
            return line;
        }
    return "Usage: " + path + " [OPTIONS]";
}

/// A whole number written in decimal digits that fits in 64 bits. CLI11 2.1 reads "-1" into an
/// unsigned option as 2^64 - 1, a number past 2^64 as 2^64 - 1 and "" as 0, so every unsigned
/// option gets this check (parse() below), and the token-id options too.
inline std::optional<std::uint64_t> whole_value(const std::string& s) {
    std::uint64_t x = 0;
    const char* end = s.data() + s.size();
    const auto [p, ec] = std::from_chars(s.data(), end, x);
    if (s.empty() || ec != std::errc() || p != end) return std::nullopt;
    return x;
}

inline const CLI::Validator& whole_number() {
    static const CLI::Validator v(
        [](std::string& s) -> std::string {
            if (!whole_value(s)) return "'" + s + "' is not a whole number (0 to 2^64 - 1)";
            return {};
        },
        "");
    return v;
}

/// A whole number of at least `least`. CLI11's PositiveNumber names its range, up to the
/// largest double, in 309 digits.
inline CLI::Validator at_least(std::uint64_t least) {
    return CLI::Validator(
        [least](std::string& s) -> std::string {
            if (const auto x = whole_value(s); x && *x < least)
                return "must be at least " + std::to_string(least) + " (got " + s + ")";
            return {};  // not a whole number: whole_number() says so
        },
        "");
}

/// An output file the command can write, checked before any work (a model loaded and run, then
/// nothing written): not a folder, in a folder that exists and is writable (root may write
/// anywhere). "-" is stdout where `stdout_ok` (--json); a safetensors --out refuses it (it
/// wrote a file named '-').
inline CLI::Validator writable_file(bool stdout_ok) {
    return CLI::Validator(
        [stdout_ok](std::string& s) -> std::string {
            namespace fs = std::filesystem;
            if (s == "-") return stdout_ok ? std::string() : "'-' (stdout) is for --json; this output is a file";
            if (s.empty()) return "an empty path";
            std::error_code ec;
            if (fs::is_directory(s, ec)) return "'" + s + "' is a folder, not a file";
            const fs::path parent = fs::path(s).parent_path().empty() ? fs::path(".") : fs::path(s).parent_path();
            if (!fs::is_directory(parent, ec)) return "'" + s + "': the folder " + parent.string() + " does not exist";
            if (::access(parent.c_str(), W_OK | X_OK) != 0)
                return "'" + s + "': the folder " + parent.string() + " is one this user cannot write or enter";
            return {};
        },
        "");
}

/// A result folder the study can make or write in (experiments::result_folder_problem, which
/// Python's studies check too), checked before the model loads.
inline const CLI::Validator& result_folder() {
    static const CLI::Validator v([](std::string& s) { return experiments::result_folder_problem(s); }, "");
    return v;
}

/// A finite number: CLI11's Range lets NaN through (no comparison with NaN is false), and no
/// option of ours means anything at infinity. Every floating-point option gets this check.
inline const CLI::Validator& finite_number() {
    static const CLI::Validator v(
        [](std::string& s) -> std::string {
            double x = 0;
            if (!CLI::detail::lexical_cast(s, x) || !std::isfinite(x)) return "'" + s + "' is not a finite number";
            return {};
        },
        "");
    return v;
}

/// Adds whole_number() to every unsigned option and finite_number() to every floating-point one,
/// of app and its subcommands (CLI11's type names "UINT" and "FLOAT").
inline void check_number_options(CLI::App& app) {
    for (CLI::Option* o : app.get_options()) {
        const std::string type = o->get_type_name();
        if (type.rfind("UINT", 0) == 0) o->check(whole_number());
        else if (type.rfind("FLOAT", 0) == 0) o->check(finite_number());
    }
    for (CLI::App* sub : app.get_subcommands({})) check_number_options(*sub);
}

/// Parses argv[1..] (argv[1] is the subcommand name). Returns -1 to go on, else the exit code:
/// 0 after --help, 2 after a usage error (message and usage line on stderr).
/// The first comma-separated value on the command line with an empty entry ("5,,6", "1,",
/// ",2", "") given to an option of `app` or of its subcommands that splits on commas, as
/// "--ids '5,,6'"; "" when there is none. CLI11 drops empty entries, so --ids 5,,6 ran as 5,6.
/// Reads the command line as CLI11 does: --name=value, -xVALUE, and after --name or -x the
/// option's values (the next token, whatever it looks like, then for a list every token up to
/// the next option); the value of another option (--prompt '--ids=1,,2') is text, not an option.
inline std::string empty_list_entry(CLI::App& app, int argc, char** argv) {
    std::vector<CLI::Option*> options;
    std::vector<CLI::App*> apps{&app};
    for (std::size_t k = 0; k < apps.size(); ++k) {
        for (CLI::Option* o : apps[k]->get_options()) options.push_back(o);
        for (CLI::App* sub : apps[k]->get_subcommands([](CLI::App*) { return true; })) apps.push_back(sub);
    }
    const auto empty_entry = [](const std::string& v) {
        return v.empty() || v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") break;
        if (a.size() < 2 || a[0] != '-') continue;
        const bool is_long = a.rfind("--", 0) == 0;
        std::string name = is_long ? a.substr(2) : a.substr(1, 1), value;
        bool attached = false;
        if (const std::size_t eq = name.find('='); is_long && eq != std::string::npos) {
            value = name.substr(eq + 1);
            name.resize(eq);
            attached = true;
        } else if (!is_long && a.size() > 2) {
            value = a.substr(2);
            attached = true;
        }
        const CLI::Option* o = nullptr;
        for (const CLI::Option* c : options)
            if (is_long ? c->check_lname(name) : c->check_sname(name)) o = c;
        if (o == nullptr || o->get_type_size_max() == 0) continue;  // not ours (CLI11 reports it), or a flag
        const bool list = o->get_delimiter() == ',';
        const std::string shown = (is_long ? "--" : "-") + name;
        if (attached) {
            if (list && empty_entry(value)) return shown + " '" + value + "' has an empty entry";
            continue;
        }
        const int first = i + 1;  // its values: the next token always (CLI11 takes it, whatever it
        for (int j = first; j < argc; ++j) {  // looks like), then up to the next option
            const std::string v = argv[j];
            if (j > first && v.size() > 1 && v[0] == '-' && !(v[1] >= '0' && v[1] <= '9')) break;
            if (list && empty_entry(v)) return shown + " '" + v + "' has an empty entry";
            i = j;
            if (o->get_items_expected_max() <= 1) break;  // one value
        }
    }
    return "";
}

inline int parse(CLI::App& app, int argc, char** argv, std::ostream& out = std::cout, std::ostream& err = std::cerr) {
    check_number_options(app);
    if (const std::string empty = empty_list_entry(app, argc, argv); !empty.empty()) {
        err << app.get_name() << ": " << empty << "\n" << usage_line(app) << "\n(" << app.get_name() << " --help for details)\n";
        return 2;
    }
    try {
        app.parse(argc - 1, argv + 1);
    } catch (const CLI::CallForHelp&) {
        out << app.help();
        return 0;
    } catch (const CLI::ParseError& e) {
        err << app.get_name() << ": " << e.what() << "\n"
                  << usage_line(app) << "\n(" << app.get_name() << " --help for details)\n";
        return 2;
    }
    return -1;
}

/// A token sequence given on the command line as text (--NAME) or as ids (--NAME-ids, or the
/// given ids flag): at most one of the two.
struct TokenInput {
    std::string text;
    std::vector<std::int64_t> ids;
    CLI::Option* text_opt = nullptr;
    CLI::Option* ids_opt = nullptr;

    void add(CLI::App& app, const std::string& text_flag, const std::string& ids_flag, const std::string& what) {
        text_opt = app.add_option(text_flag, text, what + " as text (encoded with the tokenizer)");
        ids_opt = app.add_option(ids_flag, ids, what + " as token ids (space- or comma-separated)")
                      ->delimiter(',')
                      ->check(whole_number());
        text_opt->excludes(ids_opt);
    }
    /// Makes the input required: parsing fails (exit 2) when neither form is given. Sets the
    /// app's callback, so only for apps with no other required-one-of rule.
    void require_in(CLI::App& app) const {
        app.callback([this] {
            if (!given()) throw CLI::RequiredError(flags());
        });
    }
    bool given() const { return (text_opt && text_opt->count() > 0) || (ids_opt && ids_opt->count() > 0); }
    bool is_text() const { return text_opt && text_opt->count() > 0; }
    /// "--prompt or --ids" for messages.
    std::string flags() const { return text_opt->get_name() + " or " + ids_opt->get_name(); }
};

namespace detail {
/// One row of integers from a safetensors input file: the tensor `name`, of shape [n] or
/// [1, n], not BOOL. Another shape is a FormatError naming the file, the tensor and its shape,
/// where reading its values flat would run the rows as one list; read_i64 widens BOOL, which
/// ran as the values 0 and 1.
inline std::vector<std::int64_t> read_i64_row(const io::SafetensorsFile& f, const std::string& name, const char* what) {
    const std::vector<std::size_t>& shape = f.info(name).shape;
    const bool one_row = shape.size() == 1 || (shape.size() == 2 && shape[0] == 1);
    if (!one_row) {
        std::string dims;
        for (const std::size_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
        fail<FormatError>("[input] ", f.path().string(), ": tensor '", name, "' has shape [", dims, "]; ", what,
                          " is [n] or [1, n]");
    }
    check<FormatError>(f.info(name).dtype != DType::BOOL, "[input] ", f.path().string(), ": tensor '", name, "' is BOOL; ",
                       what, " is an integer tensor");
    return f.read_i64(name);
}
}  // namespace detail

/// One sequence of token ids from a safetensors input file: the integer tensor `name`, of shape
/// [T] or [1, T] (a batch [B, T] with B > 1 is refused: its rows ran as one sequence).
inline std::vector<std::int64_t> read_token_ids(const io::SafetensorsFile& f, const std::string& name) {
    return detail::read_i64_row(f, name, "one sequence of token ids");
}

/// A list of layer indices from a safetensors input file (patch.layers, kv_only_layers.layers):
/// an integer tensor [n] or [1, n], n >= 0 (an empty list is no layer). A layer mask (BOOL) or
/// a table of lists is refused: read flat, [true, false, true] was the layers {0, 1}.
inline std::vector<std::int64_t> read_layer_list(const io::SafetensorsFile& f, const std::string& name) {
    return detail::read_i64_row(f, name, "a list of layer indices");
}

/// The chat family of a model_type (Qwen3.5 / Qwen3-Next, Granite 4.0 H, Falcon-H1).
inline ChatFamily chat_family_of(const std::string& model_type) {
    if (model_type.rfind("qwen", 0) == 0) return ChatFamily::qwen35;
    if (model_type.rfind("granite", 0) == 0) return ChatFamily::granite4;
    check<UnsupportedError>(model_type == "falcon_h1", "[cli] no chat format for model_type '", model_type, "'");
    return ChatFamily::falcon_h1;
}

/// --no-mmap, for every command that loads a model: the weights read into private memory
/// instead of mapped (io::Storage::in_memory).
inline void add_no_mmap(CLI::App& app, bool& no_mmap) {
    app.add_flag("--no-mmap", no_mmap,
                 "read the weights into private memory instead of mapping the files (llama.cpp's --no-mmap; the "
                 "same values, a slower open; docs/performance-log.md, \"Weights in the page cache\")");
}
/// load(dir, options), with a warning on stderr when the checkpoint holds tensors the model does
/// not use (AnyModel::unused_tensors: a config.json describing less than the weights).
inline AnyModel load_model(const std::filesystem::path& dir, const LoadOptions& options = {}) {
    AnyModel m = load(dir, options);
    if (const std::string w = m.unused_tensors_warning(dir.string()); !w.empty()) std::cerr << "hylens: warning: " << w << "\n";
    return m;
}

inline LoadOptions load_options(bool no_mmap) {
    return LoadOptions{no_mmap ? io::Storage::in_memory : io::Storage::mapped};
}

/// The model folder and how text becomes tokens: --model, --tokenizer, --chat, --no-mmap.
struct ModelInput {
    std::string dir;
    std::string tokenizer_path;  // default: DIR/tokenizer.json
    bool chat = false;
    bool no_finite_check = false;
    bool no_mmap = false;

    /// How to hold the weights (--no-mmap) and whether to scan the small ones (--no-finite-check).
    LoadOptions load_options() const {
        LoadOptions o = cli::load_options(no_mmap);
        o.check_finite = !no_finite_check;
        return o;
    }

    void add(CLI::App& app, bool with_chat = true) {
        app.add_option("--model", dir, "model folder (config.json + *.safetensors)")->required();
        app.add_option("--tokenizer", tokenizer_path, "tokenizer.json (default: the one in the model folder)")
            ->check(CLI::ExistingFile);
        if (with_chat) app.add_flag("--chat", chat, "wrap text input in the family's chat format (one user turn)");
        app.add_flag("--no-finite-check", no_finite_check,
                     "do not stop at the first NaN / infinity in activations or logits, nor at one in a "
                     "small parameter (norm, bias, A_log...) as the model loads");
        add_no_mmap(app, no_mmap);
    }

    /// The tokenizer, loaded once; nullptr when there is none and `required` is false.
    const Tokenizer* tokenizer(bool required, const std::string& why = "text input") const {
        if (!loaded_) {
            loaded_ = true;
            const std::filesystem::path p =
                tokenizer_path.empty() ? std::filesystem::path(dir) / "tokenizer.json" : std::filesystem::path(tokenizer_path);
            if (std::filesystem::exists(p)) tok_.emplace(Tokenizer::from_file(p.string()));
        }
        check(!required || tok_.has_value(), "[cli] ", why, " needs a tokenizer, and ",
              tokenizer_path.empty() ? (std::filesystem::path(dir) / "tokenizer.json").string() : tokenizer_path,
              " does not exist; pass --tokenizer FILE, or give token ids instead of text");
        return tok_ ? &*tok_ : nullptr;
    }

    /// The ids of `in`: its ids, or its text encoded (in the chat format with --chat; else with
    /// the tokenizer's special tokens, as Hugging Face's encode does by default).
    /// --chat with ids is an error: it wraps text only, so it would be ignored.
    std::vector<std::int64_t> ids(const TokenInput& in, const std::string& model_type) const {
        check(in.is_text() || !in.given() || !chat, "[cli] --chat wraps text input, and ", in.ids_opt->get_name(),
              " gives token ids: pass the text instead, or the ids already in the chat format without --chat");
        if (!in.is_text()) return in.ids;
        const Tokenizer& tok = *tokenizer(true, in.text_opt->get_name());
        const Encoding enc = chat ? encode_chat(tok, wrap_chat(chat_family_of(model_type), in.text))
                                  : tok.encode(in.text, {.add_special = true});
        check<ShapeError>(!enc.ids.empty(), "[cli] ", in.text_opt->get_name(), " encodes to no tokens");
        return {enc.ids.begin(), enc.ids.end()};
    }

    /// Decoded text of ids, or nullopt without a tokenizer.
    std::optional<std::string> text(const std::vector<std::int64_t>& ids) const {
        const Tokenizer* tok = tokenizer(false);
        if (!tok) return std::nullopt;
        std::vector<Tokenizer::TokenId> v;
        for (auto id : ids) v.push_back(static_cast<Tokenizer::TokenId>(id));
        return tok->decode(v);
    }

private:
    mutable bool loaded_ = false;
    mutable std::optional<Tokenizer> tok_;
};

/// JSON of one token: {"id": 12, "text": "Hello"} ("text" only with a tokenizer; null for an id
/// the tokenizer has no token for, such as a model's padding rows past its vocabulary).
inline nlohmann::json token_json(const ModelInput& mi, std::int64_t id) {
    nlohmann::json j = {{"id", id}};
    if (const Tokenizer* tok = mi.tokenizer(false)) {
        const auto tid = static_cast<Tokenizer::TokenId>(id);
        j["text"] = tok->id_to_token(tid) ? nlohmann::json(tok->decode({tid})) : nlohmann::json(nullptr);
    }
    return j;
}

/// The k most likely next tokens of a row of logits [V]: id, text, probability, logit.
inline nlohmann::json top_k_json(const ModelInput& mi, const float* row, std::size_t V, std::size_t k) {
    const std::vector<double> p = softmax(row, V);
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t id : top_ids(row, V, k)) {
        nlohmann::json t = token_json(mi, static_cast<std::int64_t>(id));
        t["prob"] = p[id];
        t["logit"] = row[id];
        out.push_back(std::move(t));
    }
    return out;
}

/// A token sequence: {"ids": [...], "text": "..."}.
inline nlohmann::json tokens_json(const ModelInput& mi, const std::vector<std::int64_t>& ids) {
    nlohmann::json j = {{"ids", ids}};
    if (auto t = mi.text(ids)) j["text"] = *t;
    return j;
}

/// Writes j (indented; invalid UTF-8 of partial tokens as U+FFFD) to `path`, or to stdout for "-".
inline void write_json(const nlohmann::json& j, const std::string& path) {
    if (path == "-") {
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return;
    }
    std::ofstream f(path);
    check(static_cast<bool>(f), "[cli] cannot write ", path);
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    check(static_cast<bool>(f), "[cli] writing ", path, " failed");
}

}  // namespace hylens::cli
