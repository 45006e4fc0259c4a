#pragma once
// Python class hylens.Model: an AnyModel (models/load.hpp) whose methods visit the typed model.
// forward / prefill / generate / split_prefill / run release the GIL while the model runs;
// logits and captures come back as NumPy arrays owning the C++ buffers (no copy). Outputs keep
// the rank of the input ids: 1-D ids give [T, V] logits, 2-D ids [B, T, V].

#include <hylens/core/precision.hpp>
#include <hylens/core/simd.hpp>
#include <hylens/interp/lens.hpp>
#include <hylens/interp/transplant.hpp>
#include <hylens/stack/finite_check.hpp>
#include <hylens/stack/generate.hpp>
#include <hylens/stack/split_prefill.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>  // str or os.PathLike as a path

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "nogil.hpp"
#include "bind_cache.hpp"
#include "bind_interp.hpp"
#include "results.hpp"

namespace hylens::python {

namespace pyb = pybind11;

class PyModel {
public:
    PyModel(AnyModel m, std::string path, bool check_finite = true)
        : m_(std::make_shared<AnyModel>(std::move(m))), path_(std::move(path)),
          check_finite_(std::make_shared<std::atomic<bool>>(check_finite)) {}

    /// Runs f on the typed model; with check_finite() every forward f makes on this thread
    /// stops at the first NaN or infinity (CheckFiniteScope), as the tool's do.
    template <class F>
    decltype(auto) visit(F&& f) const {
        if (check_finite()) {
            const CheckFiniteScope checked;
            return std::as_const(*m_).visit(std::forward<F>(f));
        }
        return std::as_const(*m_).visit(std::forward<F>(f));
    }
    bool check_finite() const noexcept { return check_finite_->load(std::memory_order_relaxed); }
    void set_check_finite(bool on) const noexcept { check_finite_->store(on, std::memory_order_relaxed); }
    /// The model itself, for the library calls that take an AnyModel (the persona judge);
    /// its forwards are not checked for NaN unless the caller does so.
    const AnyModel& any() const noexcept { return *m_; }
    const LMConfig& config() const { return m_->config(); }
    const std::string& model_type() const { return m_->config().model_type; }
    const std::string& path() const noexcept { return path_; }
    const std::vector<std::string>& unused_tensors() const noexcept { return m_->unused_tensors(); }
    std::string unused_tensors_warning() const { return m_->unused_tensors_warning(path_); }
    std::size_t family_index() const {
        return visit([](const auto& m) {
            using M = std::remove_cvref_t<decltype(m)>;
            return CacheVariant(typename M::cache_type{}).index();
        });
    }

private:
    std::shared_ptr<const AnyModel> m_;
    std::string path_;
    std::shared_ptr<std::atomic<bool>> check_finite_;  ///< shared by copies; read by threads running the model
};

/// The model's typed cache inside a PyCache (ValueError for another model type).
template <class M>
typename M::cache_type& typed_cache(PyCache& c, const M& m, const char* op) {
    return c.as<typename M::cache_type>(op, "it was handed to a " + m.config().model_type + " model");
}

inline CachePtr optional_cache(pyb::handle obj, const char* op) {
    if (obj.is_none()) return nullptr;
    if (!pyb::isinstance<PyCache>(obj))
        throw pyb::type_error(std::string(op) + ": cache must be a hylens.Cache or None, got " +
                              std::string(Py_TYPE(obj.ptr())->tp_name));
    return obj.cast<CachePtr>();
}

inline std::vector<std::int64_t> to_i64s(pyb::handle obj, const char* what) {
    std::vector<std::int64_t> out;
    if (obj.is_none()) return out;
    if (is_int_scalar(obj)) {
        out.push_back(to_int(obj, what));
        return out;
    }
    for (pyb::handle h : pyb::iter(obj)) out.push_back(to_int(h, what));
    return out;
}

/// Runs f(typed model, typed cache) without the GIL on the given cache (leased, so no other
/// thread uses it meanwhile) or, when there is none, on a fresh cache for `batch` sequences.
template <class F>
decltype(auto) on_cache(const PyModel& s, const CachePtr& cache, std::size_t batch, const char* op, F&& f) {
    return s.visit([&](const auto& x) -> decltype(auto) {
        using Cache = typename std::remove_cvref_t<decltype(x)>::cache_type;
        Cache fresh;
        Cache* c = cache ? &typed_cache(*cache, x, op) : nullptr;
        const PyCache::Lease lease(cache.get(), op);
        const NoGil nogil;
        if (!c) {
            fresh = x.new_cache(batch);
            c = &fresh;
        }
        return f(x, *c);
    });
}

inline std::vector<std::string> layer_kind_names(const PyModel& pm) {
    return pm.visit([](const auto& m) {
        std::vector<std::string> out;
        for (std::size_t l = 0; l < m.num_layers(); ++l)
            m.stack().visit(l, [&](const auto& layer) {
                std::string name;
                detail::for_each_mixer(layer.mixer(), [&](const auto& mx) {
                    const auto& c = mx.config();
                    std::string one;
                    if constexpr (requires { c.head_dim; c.Hkv; }) one = "attention";
                    else if constexpr (requires { c.dv; c.Hv; }) one = "gated_deltanet";
                    else if constexpr (requires { c.P; c.N; }) one = "mamba2";
                    else one = "?";
                    name += (name.empty() ? "" : "+") + one;
                });
                out.push_back(name);
            });
        return out;
    });
}

inline void bind_model(pyb::module_& m) {
    pyb::class_<PyGenerate>(m, "GenerateResult", "Greedy generation: ids, prompt logits, logits after each fed token, positions, cache.")
        .def_readonly("ids", &PyGenerate::ids)
        .def_readonly("lengths", &PyGenerate::lengths,
                      "Per sequence: its ids up to and including its first stop id (all of them without one).")
        .def_readonly("prompt_logits", &PyGenerate::prompt_logits)
        .def_readonly("step_logits", &PyGenerate::step_logits)
        .def_readonly("positions", &PyGenerate::positions)
        .def_readonly("cache", &PyGenerate::cache);
    pyb::class_<PySplit>(m, "SplitResult", "split_prefill: the query run (a GenerateResult), the cache after it, the query start.")
        .def_readonly("run", &PySplit::run)
        .def_readonly("cache", &PySplit::cache)
        .def_readonly("position", &PySplit::position);
    pyb::class_<PyRun>(m, "RunResult", "run(): logits, captures {name: array}, coverage per intervention.")
        .def_readonly("logits", &PyRun::logits)
        .def_readonly("captures", &PyRun::captures)
        .def_readonly("coverage", &PyRun::coverage);

    pyb::class_<PyModel, std::shared_ptr<PyModel>> c(m, "Model", "A loaded model (hylens.load); the typed C++ model inside.");
    c.def_property_readonly("model_type", &PyModel::model_type)
        .def_property_readonly("family", [](const PyModel& s) { return std::string(family_name(s.family_index())); })
        .def_property_readonly("path", &PyModel::path)
        .def_property_readonly("unused_tensors", &PyModel::unused_tensors,
                               "The checkpoint's tensors the model does not use (config.json describes less than "
                               "the file holds); empty for a matching checkpoint.")
        .def_property_readonly("unused_tensors_warning",
                               &PyModel::unused_tensors_warning,
                               "The warning hylens.load gives for unused_tensors (the tool's text); empty for a "
                               "matching checkpoint.")
        .def_property("check_finite", [](const PyModel& s) { return s.check_finite(); },
                      [](const PyModel& s, bool on) { s.set_check_finite(on); },
                      "Every forward of this model (forward, prefill, generate, split_prefill, run, transplants) stops at the "
                      "first NaN or infinity with a NonFiniteError naming the model, layer, site and token, as the tool's do; "
                      "the studies always check. True unless loaded with check_finite=False.")
        .def_property_readonly("num_layers", [](const PyModel& s) { return s.visit([](const auto& x) { return x.num_layers(); }); })
        .def_property_readonly("vocab", [](const PyModel& s) { return s.config().vocab; })
        .def_property_readonly("hidden", [](const PyModel& s) { return s.config().hidden; })
        .def_property_readonly("config", [](const PyModel& s) {
            const LMConfig& c = s.config();
            pyb::dict d;
            d["model_type"] = c.model_type;
            d["vocab"] = c.vocab;
            d["hidden"] = c.hidden;
            d["num_layers"] = s.visit([](const auto& x) { return x.num_layers(); });
            d["eps"] = c.eps;
            d["norm_one_plus"] = c.norm_one_plus;
            d["embed_multiplier"] = c.embed_multiplier;
            d["logits_multiplier"] = c.logits_multiplier;
            d["tied_embeddings"] = s.visit([](const auto& x) { return x.tied_embeddings(); });
            return d;
        }, "The LM-level configuration (config.json as the loader read it).")
        .def_property_readonly("layer_kinds", &layer_kind_names,
            "Per layer: 'gated_deltanet', 'mamba2', 'attention', or 'attention+mamba2' (Falcon-H1 parallel).")
        .def_property_readonly("channels", [](const PyModel& s) {
            return s.visit([](const auto& x) {
                const auto cache = x.new_cache(1);
                std::vector<std::vector<std::string>> out(cache.num_layers());
                for (std::size_t i = 0; i < cache.num_layers(); ++i)
                    cache.visit(i, [&](const auto& lc) {
                        if (kv_part(lc)) out[i].push_back("kv");
                        if (recurrent_part(lc)) out[i].push_back("recurrent");
                    });
                return out;
            });
        }, "Per layer, the cache channels it holds ('kv', 'recurrent').")
        .def_property_readonly("attention_layers", [](const PyModel& s) { return s.visit([](const auto& x) { return attention_layers(x.stack()); }); })
        .def_property_readonly("recurrent_layers", [](const PyModel& s) { return s.visit([](const auto& x) { return recurrent_layers(x.stack()); }); })
        .def("mixer_site", [](const PyModel& s, Int signed_layer, const std::string& ch) {
            const LayerIndex layer = layer_index(signed_layer.v);
            if (ch != "recurrent" && ch != "attention") throw pyb::value_error("mixer_site: channel is 'recurrent' or 'attention'");
            const MixerChannel mc = ch == "attention" ? MixerChannel::attention : MixerChannel::recurrent;
            return s.visit([&](const auto& x) { return SiteRef{mixer_site(x.stack(), layer, mc), layer, Positions::all(), false}.name(); });
        }, pyb::arg("layer"), pyb::arg("channel") = "recurrent",
           "Name of layer l's mixer-output site for a channel ('mixer_out.l', or 'ssm_out.l' / 'attn_out.l' on Falcon-H1).")
        .def("new_cache", [](const PyModel& s, Count batch) {
            if (batch == 0) throw pyb::value_error("new_cache: batch must be at least 1");
            return make_cache(s.visit([&](const auto& x) -> CacheVariant { return x.new_cache(batch); }), s.model_type());
        }, pyb::arg("batch") = 1)
        .def("load_cache", [](const PyModel& s, const std::filesystem::path& path, Count batch, const std::string& prefix, bool allow_missing) {
            if (batch == 0) throw pyb::value_error("load_cache: batch must be at least 1");
            return make_cache(s.visit([&](const auto& x) -> CacheVariant {
                return load_cache(path, x.new_cache(batch), prefix, LoadCacheOptions{allow_missing});
            }), s.model_type());
        }, pyb::arg("path"), pyb::arg("batch") = 1, pyb::arg("prefix") = "cache.", pyb::arg("allow_missing") = false,
           "Reads a cache written by Cache.save (or a golden cache file) for this model.")
        .def("forward", [](const PyModel& s, pyb::handle ids, pyb::handle cache_obj, pyb::handle positions, bool last_only) {
            const Ids in = to_ids(ids, "forward");
            const CachePtr cache = optional_cache(cache_obj, "forward");
            const std::vector<std::int64_t> pos = to_i64s(positions, "forward: positions");
            Tensor3 out = on_cache(s, cache, in.batch.batch, "forward", [&](const auto& x, auto& c) {
                ForwardOptions fo;
                fo.positions = pos;
                fo.last_only = last_only;
                return x.forward(in.batch, c, fo);
            });
            return to_numpy(std::move(out), !in.batched);
        }, pyb::arg("ids"), pyb::arg("cache") = pyb::none(), pyb::arg("positions") = pyb::none(), pyb::arg("last_only") = false,
           "Logits of ids run on top of cache (updated in place; None = a fresh cache): [T, V] or [B, T, V].")
        .def("prefill", [](const PyModel& s, pyb::handle ids) {
            const Ids in = to_ids(ids, "prefill");
            CacheVariant out = s.visit([&](const auto& x) -> CacheVariant {
                const NoGil nogil;
                return x.prefill(in.batch);
            });
            return make_cache(std::move(out), s.model_type());
        }, pyb::arg("ids"), "A fresh cache filled with ids (logits not computed).")
        .def("generate", [](const PyModel& s, pyb::handle ids, pyb::handle cache_obj, Count max_new, pyb::handle stop,
                            bool feed_last, pyb::handle start_position) {
            const Ids in = to_ids(ids, "generate");
            CachePtr cache = optional_cache(cache_obj, "generate");
            GenerateOptions g;
            g.max_new = max_new;
            g.stop_ids = to_i64s(stop, "generate: stop");
            g.feed_last = feed_last;
            if (!start_position.is_none()) {
                g.start_position = to_int(start_position, "generate: start_position");
                if (g.start_position < 0) throw pyb::value_error("generate: start_position must be >= 0");
            }
            if (!cache) cache = make_cache(s.visit([&](const auto& x) -> CacheVariant { return x.new_cache(in.batch.batch); }), s.model_type());
            GenerateResult r = on_cache(s, cache, in.batch.batch, "generate", [&](const auto& x, auto& c) {
                return generate(x, c, in.batch, g);
            });
            return to_python(std::move(r), in.batched, s.config().vocab, cache);
        }, pyb::arg("ids"), pyb::arg("cache") = pyb::none(), pyb::arg("max_new") = 16, pyb::arg("stop") = pyb::none(),
           pyb::arg("feed_last") = false, pyb::arg("start_position") = pyb::none(),
           "Feeds ids on the cache, then max_new greedy tokens (stop: ids that end it). Returns a GenerateResult.")
        .def("split_prefill", [](const PyModel& s, pyb::handle context, pyb::handle query, const std::string& mode,
                                 pyb::handle layers, bool conv_with_state, Count max_new, bool feed_last, pyb::handle stop,
                                 pyb::handle position, pyb::handle prefilled_obj) {
            const Ids q = to_ids(query, "split_prefill: query");
            const CachePtr prefilled = optional_cache(prefilled_obj, "split_prefill");
            Ids ctx;
            if (!prefilled) ctx = to_ids(context, "split_prefill: context");
            else if (!context.is_none()) throw pyb::value_error("split_prefill: give a context or a prefilled cache, not both");
            SplitOptions o;
            o.layers = to_layers(layers, "split_prefill: layers");
            o.conv_with_state = conv_with_state;
            o.max_new = max_new;
            o.feed_last = feed_last;
            o.stop_ids = to_i64s(stop, "split_prefill: stop");
            if (!position.is_none()) {
                o.position = to_int(position, "split_prefill: position");
                if (o.position < 0) throw pyb::value_error("split_prefill: position must be >= 0");
            }
            const SplitMode md = parse_mode(mode);
            PySplit out;
            GenerateResult run;
            CacheVariant after = s.visit([&](const auto& x) -> CacheVariant {
                using M = std::remove_cvref_t<decltype(x)>;
                const typename M::cache_type* pc = prefilled ? &typed_cache(*prefilled, x, "split_prefill") : nullptr;
                const PyCache::Lease lease(prefilled.get(), "split_prefill");
                const NoGil nogil;
                auto r = pc ? run_split(x, *pc, q.batch, md, o) : split_prefill(x, ctx.batch, q.batch, md, o);
                run = std::move(r.run);
                out.position = r.position;
                return std::move(r.cache);
            });
            out.cache = make_cache(std::move(after), s.model_type());
            out.run = to_python(std::move(run), q.batched, s.config().vocab, out.cache);
            return out;
        }, pyb::arg("context"), pyb::arg("query"), pyb::arg("mode"), pyb::arg("layers") = pyb::none(),
           pyb::arg("conv_with_state") = true, pyb::arg("max_new") = 0, pyb::arg("feed_last") = false,
           pyb::arg("stop") = pyb::none(), pyb::arg("position") = pyb::none(), pyb::arg("prefilled") = pyb::none(),
           "Prefill context (or use prefilled=cache, context=None), apply FULL / KV_ONLY / REC_ONLY / NONE to `layers`, "
           "run query and max_new greedy tokens. Returns a SplitResult.")
        .def("run", [](const PyModel& s, pyb::handle ids, pyb::handle capture, pyb::handle interventions, pyb::handle cache_obj,
                       pyb::handle positions, bool last_only, bool skip_logits) {
            const Ids in = to_ids(ids, "run");
            const CachePtr cache = optional_cache(cache_obj, "run");
            const std::vector<Intervention> iv = to_interventions(interventions);
            const std::vector<std::int64_t> pos = to_i64s(positions, "run: positions");
            RunOptions o;
            o.capture = to_sites(capture);
            o.positions = pos;
            o.last_only = last_only;
            o.skip_logits = skip_logits;
            RunResult r = on_cache(s, cache, in.batch.batch, "run", [&](const auto& x, auto& c) {
                return run(x, c, in.batch, iv, o);
            });
            PyRun out;
            out.logits = skip_logits ? pyb::object(pyb::none()) : pyb::object(to_numpy(std::move(r.logits), !in.batched));
            out.captures = to_python(r.captures);
            out.coverage = std::move(r.coverage);
            return out;
        }, pyb::arg("ids"), pyb::arg("capture") = pyb::tuple(), pyb::arg("interventions") = pyb::tuple(),
           pyb::arg("cache") = pyb::none(), pyb::arg("positions") = pyb::none(), pyb::arg("last_only") = false,
           pyb::arg("skip_logits") = false,
           "One forward with interventions applied and sites captured ([B, |P|, D] each, named like 'mixer_out.13').")
        .def("transplant_state", [](const PyModel& s, pyb::handle donor, pyb::handle host, pyb::handle layers, bool include_conv) {
            const Ids d = to_ids(donor, "transplant_state: donor"), h = to_ids(host, "transplant_state: host");
            std::vector<LayerIndex> ls = to_layer_list(layers, "transplant_state: layers");
            Tensor3 out = s.visit([&](const auto& x) {
                const NoGil nogil;
                return transplant_state(x, d.batch, h.batch, ls, include_conv);
            });
            return to_numpy(std::move(out), !h.batched);
        }, pyb::arg("donor"), pyb::arg("host"), pyb::arg("layers"), pyb::arg("include_conv") = true,
           "exp32-B: final logits of the host after taking the donor's recurrent state in `layers` ([1, V] or [B, 1, V]).")
        .def("transplant_mixer", [](const PyModel& s, pyb::handle donor, pyb::handle host, pyb::handle layers,
                                    pyb::handle positions, const std::string& ch) {
            const Ids d = to_ids(donor, "transplant_mixer: donor"), h = to_ids(host, "transplant_mixer: host");
            std::vector<LayerIndex> ls = to_layer_list(layers, "transplant_mixer: layers");
            const Positions p = to_positions(positions);
            if (ch != "recurrent" && ch != "attention") throw pyb::value_error("transplant_mixer: channel is 'recurrent' or 'attention'");
            MixerTransplant t = s.visit([&](const auto& x) {
                const NoGil nogil;
                return transplant_mixer(x, d.batch, h.batch, ls, p, ch == "attention" ? MixerChannel::attention : MixerChannel::recurrent);
            });
            PyRun host_run;
            host_run.logits = to_numpy(std::move(t.host.logits), !h.batched);
            host_run.coverage = std::move(t.host.coverage);
            return std::make_pair(to_python(t.donor), std::move(host_run));
        }, pyb::arg("donor"), pyb::arg("host"), pyb::arg("layers"), pyb::arg("positions") = "last", pyb::arg("channel") = "recurrent",
           "exp22: mixer outputs of `layers` at `positions` copied from the donor run into the host run; (donor rows, host RunResult).")
        .def("logit_lens", [](const PyModel& s, pyb::handle ids, pyb::handle layers, pyb::handle positions) {
            const Ids in = to_ids(ids, "logit_lens");
            const std::vector<LayerIndex> ls = to_layer_list(layers, "logit_lens: layers");
            if (ls.empty()) throw pyb::value_error("logit_lens: no layers given");  // it returned a shape (0,) array
            const Positions p = to_positions(positions);
            std::vector<Tensor3> per = s.visit([&](const auto& x) {
                const NoGil nogil;
                return logit_lens(x, in.batch, ls, p);
            });
            const std::size_t n = per.empty() ? 0 : per[0].size();
            std::vector<float> all(per.size() * n);
            for (std::size_t i = 0; i < per.size(); ++i) std::copy(per[i].data(), per[i].data() + n, all.data() + i * n);
            std::vector<pyb::ssize_t> shape{static_cast<pyb::ssize_t>(per.size())};
            for (std::size_t d = in.batched ? 0 : 1; d < 3 && !per.empty(); ++d) shape.push_back(static_cast<pyb::ssize_t>(per[0].shape()[d]));
            return to_numpy(std::move(all), std::move(shape));
        }, pyb::arg("ids"), pyb::arg("layers"), pyb::arg("positions") = "last",
           "Logit lens: unembed(final_norm(resid_post(l))) per listed layer, [len(layers), (B,) |P|, V].")
        .def("head", [](const PyModel& s, pyb::handle h) {
            std::vector<std::size_t> shape;
            const std::vector<float> v = to_floats(h, "head: residual rows", &shape);
            const std::size_t H = s.config().hidden;
            check<ShapeError>((shape.size() == 2 || shape.size() == 3) && shape.back() == H, "[head] residual rows must be [T, ",
                              H, "] or [B, T, ", H, "], got ", shape_string(shape));
            const std::size_t B = shape.size() == 3 ? shape[0] : 1, T = shape[shape.size() - 2];
            check<ShapeError>(B >= 1 && T >= 1, "[head] no rows");
            Tensor3 out = s.visit([&](const auto& x) {
                const NoGil nogil;
                return x.head(v.data(), B, T);
            });
            return to_numpy(std::move(out), shape.size() == 2);
        }, pyb::arg("h"), "Final norm + LM head of residual rows [T, H] or [B, T, H] (what the logit lens applies).")
        .def("state_after", [](const PyModel& s, pyb::handle ids, Count t) {
            const Ids in = to_ids(ids, "state_after");
            return make_cache(s.visit([&](const auto& x) -> CacheVariant {
                const NoGil nogil;
                return state_after(x, in.batch, t);
            }), s.model_type());
        }, pyb::arg("ids"), pyb::arg("t"), "The cache after ids[0..t] (inclusive).")
        .def("_time_forward", [](const PyModel& s, pyb::handle ids, pyb::handle cache_obj, Count reps) {
            // Benchmark support (benchmarks/bench_python.py): the same forward as Model.forward,
            // timed in C++ (a copy of the cache per repetition, outside the timed region).
            const Ids in = to_ids(ids, "_time_forward");
            const CachePtr cache = optional_cache(cache_obj, "_time_forward");
            if (!cache) throw pyb::value_error("_time_forward: a cache is needed");
            std::vector<double> secs;
            on_cache(s, cache, 1, "_time_forward", [&](const auto& x, auto& c0) {
                for (std::size_t r = 0; r < reps; ++r) {
                    auto c = c0;
                    const auto t0 = std::chrono::steady_clock::now();
                    Tensor3 lg = x.forward(in.batch, c, {});
                    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                }
            });
            return secs;
        }, pyb::arg("ids"), pyb::arg("cache"), pyb::arg("reps"))
        .def("__repr__", [](const PyModel& s) {
            return "<hylens.Model " + s.model_type() + ", " + std::to_string(s.visit([](const auto& x) { return x.num_layers(); })) +
                   " layers, hidden " + std::to_string(s.config().hidden) + ", vocab " + std::to_string(s.config().vocab) + ">";
        });

    m.def("load", [](const std::filesystem::path& path, bool mmap, bool check_finite) {
        AnyModel am = [&] {
            const NoGil nogil;
            return load(path, LoadOptions{.weights = mmap ? io::Storage::mapped : io::Storage::in_memory,
                                          .check_finite = check_finite});
        }();
        // Absolute now: a study's run.json names the folder loaded, whatever the working
        // directory is when the study runs. A checkpoint named by one of its files (a
        // .safetensors or its index) is its folder: the studies look for tokenizer.json there.
        std::filesystem::path folder = std::filesystem::absolute(path);
        if (!std::filesystem::is_directory(folder)) folder = folder.parent_path();
        return std::make_shared<PyModel>(std::move(am), folder.string(), check_finite);
    }, pyb::arg("path"), pyb::kw_only(), pyb::arg("mmap") = true, pyb::arg("check_finite") = true,
          "Loads a model folder (config.json + safetensors, F32 or BF16) of any supported family. mmap=False reads "
          "the weights into private memory instead of mapping the files (the CLI's --no-mmap; the same values; "
          "faster decode where page-cache pages read slowly, docs/io.md). check_finite=False loads a checkpoint "
          "whose norms, biases or per-head parameters hold NaN or infinity (an error by default; docs/models.md, "
          "\"Damaged weights\") and sets Model.check_finite False.");

    m.def("set_bf16_activations", [](bool on) { precision::set_round_activations(on); }, pyb::arg("on"),
          "Rounds the input of every product with a bf16 weight to bf16 (True) or keeps it float32 (False, the "
          "default), for every model of the process (core/precision.hpp, docs/performance.md).");
    m.def("bf16_activations", [] { return precision::round_activations(); },
          "Whether products with bf16 weights round their input to bf16 now.");
    m.def("simd_level", [] { return std::string(simd::level_name(simd::active())); },
          "The instruction-set level the dispatched kernels run at: baseline, avx2, avx512 or avx512bf16.");
}

}  // namespace hylens::python
