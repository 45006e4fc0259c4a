#pragma once
// hylens::load(dir): reads config.json, picks the family from model_type and returns the
// model. AnyModel holds one of the three typed models; visit() hands the typed model to a
// generic lambda, so everything type-checked (caches, surgery) stays typed.
//
//   auto model = hylens::load("Qwen3.5-0.8B/");
//   model.visit([&](auto& m) { auto cache = m.prefill(ids); ... });

#include <filesystem>  // std::filesystem::path
#include <string>      // std::string
#include <string_view> // std::string_view
#include <utility>     // std::move
#include <variant>     // std::variant, std::visit
#include <vector>      // std::vector

#include "common.hpp"
#include "falcon_h1.hpp"
#include "granite4h.hpp"
#include "qwen3_5.hpp"

namespace hylens {

class AnyModel {
public:
    using variant_type = std::variant<Qwen35Model, GraniteModel, FalconH1Model>;

    explicit AnyModel(variant_type m) : m_(std::move(m)) {}

    template <class F>
    decltype(auto) visit(F&& f) {
        return std::visit(std::forward<F>(f), m_);
    }
    template <class F>
    decltype(auto) visit(F&& f) const {
        return std::visit(std::forward<F>(f), m_);
    }
    const LMConfig& config() const {
        return std::visit([](const auto& m) -> const LMConfig& { return m.config(); }, m_);
    }
    std::size_t num_layers() const {
        return std::visit([](const auto& m) { return m.num_layers(); }, m_);
    }
    template <class M>
    const M* get_if() const noexcept { return std::get_if<M>(&m_); }
    template <class M>
    M* get_if() noexcept { return std::get_if<M>(&m_); }

    /// The checkpoint's tensors the model does not use (load() sets them), in file order, less
    /// those a family's checkpoints hold beside the language model (detail::expected_unused:
    /// Qwen3.5's model.visual.* and mtp.*, Falcon-H1's mup_vector, lm_head.weight beside tied
    /// embeddings). Not empty: config.json describes less than the file holds (fewer layers, no
    /// experts) or the file holds tensors no family has; the model runs without them, which is
    /// rarely what was meant (the tool warns).
    const std::vector<std::string>& unused_tensors() const noexcept { return unused_; }
    /// The warning the tool and hylens.load give for unused_tensors(), naming `where` (the model
    /// folder) and up to five of them; empty when there are none.
    std::string unused_tensors_warning(std::string_view where) const {
        if (unused_.empty()) return {};
        std::string s = std::string(where) + ": " + std::to_string(unused_.size()) +
                        " tensor(s) of the checkpoint are not used by its config.json (is it the checkpoint's?): ";
        for (std::size_t i = 0; i < unused_.size() && i < 5; ++i) s += (i ? ", " : "") + unused_[i];
        return unused_.size() > 5 ? s + ", ..." : s;
    }
    void set_unused_tensors(std::vector<std::string> names) { unused_ = std::move(names); }

private:
    variant_type m_;
    std::vector<std::string> unused_;
};

namespace detail {
/// Tensors a checkpoint of a supported family may hold beside the language model: Qwen3.5's
/// vision tower and multi-token prediction, Falcon-H1's mup_vector (folded into the
/// multipliers), and lm_head.weight beside tied embeddings (released checkpoints ship it; the
/// reference ties it to the embedding too).
inline bool expected_unused(const std::string& name, bool tied) {
    for (const char* p : {"model.visual.", "visual.", "mtp.", "model.mtp."})
        if (name.rfind(p, 0) == 0) return true;
    const std::string_view mup = ".mamba.mup_vector";
    if (name.size() >= mup.size() && name.compare(name.size() - mup.size(), mup.size(), mup) == 0) return true;
    return tied && name == "lm_head.weight";
}
}  // namespace detail

/// How load() holds a checkpoint's weights.
struct LoadOptions {
    /// io::Storage::mapped (the default): the files memory-mapped, weights used in place from
    /// the page cache. io::Storage::in_memory: every shard read into private anonymous memory
    /// first (llama.cpp's --no-mmap): the same values, a slower open, and on some machines a
    /// faster decode (docs/performance-log.md, "Weights in the page cache").
    io::Storage weights = io::Storage::mapped;
    /// Scan the small parameters (norms, biases, conv kernels, per-head scalars such as A_log
    /// and dt_bias) for NaN and infinity as they are read: a FormatError naming the tensor.
    /// Off only to study a damaged checkpoint (the CLI's --no-finite-check).
    bool check_finite = true;
};

/// Loads a model folder (config.json + model.safetensors or shards). Unknown model types
/// are an UnsupportedError that names them.
inline AnyModel load(const std::filesystem::path& dir, const LoadOptions& options = {}) {
    check<FormatError>(std::filesystem::exists(dir), "[load] ", dir.string(), ": no such model folder");
    // A file is a checkpoint's own (its weights or their index); config.json said its safetensors
    // header ran past the end.
    const std::string name = dir.filename().string();
    check<FormatError>(std::filesystem::is_directory(dir) || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json"),
                       "[load] ", dir.string(), " is not a model folder, a .safetensors file or a .safetensors.index.json: "
                       "give the folder holding config.json and the weights");
    const std::filesystem::path cfg_path = std::filesystem::is_directory(dir) ? dir / "config.json" : dir.parent_path() / "config.json";
    check<FormatError>(std::filesystem::exists(cfg_path), "[load] ", cfg_path.string(), ": no config.json");
    const io::Config cfg = io::Config::from_file(cfg_path);
    const std::string type = cfg.get_string("model_type");
    const io::Checkpoint ckpt = io::Checkpoint::open(dir, options.weights);
    const auto with_unused = [&](AnyModel m) {
        std::vector<std::string> unused;
        const bool tied = m.visit([](const auto& x) { return x.tied_embeddings(); });
        for (std::string& n : ckpt.unread())
            if (!detail::expected_unused(n, tied)) unused.push_back(std::move(n));
        m.set_unused_tensors(std::move(unused));
        return m;
    };
    if (models::is_qwen_type(type)) return with_unused(AnyModel(models::load_qwen3_5(ckpt, cfg, options.check_finite)));
    if (type == "granitemoehybrid") return with_unused(AnyModel(models::load_granite4h(ckpt, cfg, options.check_finite)));
    if (type == "falcon_h1") return with_unused(AnyModel(models::load_falcon_h1(ckpt, cfg, options.check_finite)));
    fail<UnsupportedError>("[load] ", cfg_path.string(), ": unsupported model_type '", type,
                           "' (supported: qwen3_5, qwen3_5_text, qwen3_5_moe, qwen3_5_moe_text, qwen3_next, "
                           "granitemoehybrid, falcon_h1)");
}

/// Loads a model folder as a specific family type (UnsupportedError if it is another family).
template <class Model>
Model load_as(const std::filesystem::path& dir, const LoadOptions& options = {}) {
    AnyModel m = load(dir, options);
    Model* p = m.get_if<Model>();
    check<UnsupportedError>(p != nullptr, "[load] ", dir.string(), ": model_type '", m.config().model_type,
                            "' is not the requested family");
    return std::move(*p);
}

}  // namespace hylens
