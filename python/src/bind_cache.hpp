#pragma once
// Python class hylens.Cache and the surgery functions on caches (cache/surgery.hpp,
// cache/mask_state.hpp, cache/cache_io.hpp, stack/split_prefill.hpp). Every op returns a new
// Cache; the inputs are never modified. K/V, conv windows and states are read as NumPy
// copies (the cache keeps changing under forward(), a view would change with it).

#include <hylens/cache/cache_io.hpp>
#include <hylens/stack/split_prefill.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>  // str or os.PathLike as a path

#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cache.hpp"

namespace hylens::python {

namespace pyb = pybind11;

inline CachePtr make_cache(CacheVariant c, const std::string& model_type) {
    return std::make_shared<PyCache>(std::move(c), model_type);
}

/// f(typed a, typed b) for two caches of one type; ValueError otherwise.
template <class F>
decltype(auto) with_pair(PyCache& a, PyCache& b, const char* op, F&& f) {
    b.check_open(op);
    return a.visit(op, [&](auto& ca) -> decltype(auto) {
        using C = std::remove_cvref_t<decltype(ca)>;
        return f(ca, b.as<C>(op, "it was paired with a cache of a " + a.model_type() + " model (" + a.family() +
                                     " stack type)"));
    });
}

inline SplitMode parse_mode(const std::string& s) {
    std::string u;
    for (char ch : s) u += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (u == "FULL") return SplitMode::FULL;
    if (u == "KV_ONLY") return SplitMode::KV_ONLY;
    if (u == "REC_ONLY") return SplitMode::REC_ONLY;
    if (u == "NONE") return SplitMode::NONE;
    throw pyb::value_error("split mode '" + s + "' is not one of FULL, KV_ONLY, REC_ONLY, NONE");
}

/// Layer `layer` of `c` as (KV part, recurrent part) pointers; ShapeError past the last layer.
template <class Cache>
std::pair<const KVCache*, const RecurrentCache*> layer_parts(const Cache& c, long long layer) {
    check<ShapeError>(layer >= 0 && static_cast<std::size_t>(layer) < c.num_layers(), "[Cache] layer ", layer,
                      " is out of range: the cache has ", c.num_layers(), " layers");
    std::pair<const KVCache*, const RecurrentCache*> out{nullptr, nullptr};
    c.visit(static_cast<std::size_t>(layer), [&](const auto& lc) { out = {kv_part(lc), recurrent_part(lc)}; });
    return out;
}

/// K or V of one layer as [B, Hkv, L, hd].
template <class Cache>
pyb::array_t<float> read_kv(const Cache& c, long long layer, bool keys) {
    const KVCache* kv = layer_parts(c, layer).first;
    if (!kv) throw pyb::value_error("Cache." + std::string(keys ? "k" : "v") + ": layer " + std::to_string(layer) +
                                    " has no attention, so no K/V");
    // The cache's [B, Hkv, L, hd] view (strided over its capacity), evaluated into one owning copy.
    return to_numpy(Tensor4(keys ? kv->k_view() : kv->v_view()));
}

inline const RecurrentCache& need_recurrent(const RecurrentCache* r, long long layer, const char* what) {
    if (!r) throw pyb::value_error(std::string("Cache.") + what + ": layer " + std::to_string(layer) +
                                   " has no recurrent mixer, so no conv window or state");
    return *r;
}

/// Conv window [B, C, K] or state [B, state_shape...] of one layer.
template <class Cache>
pyb::array_t<float> read_recurrent(const Cache& c, long long layer, bool conv) {
    const RecurrentCache& r = need_recurrent(layer_parts(c, layer).second, layer, conv ? "conv" : "state");
    const std::size_t B = r.batch(), n = conv ? r.conv_channels() * r.conv_width() : r.state_size();
    std::vector<float> out(B * n);
    for (std::size_t b = 0; b < B; ++b) {
        const float* src = conv ? r.conv(b) : r.state(b);
        std::copy(src, src + n, out.data() + b * n);
    }
    std::vector<pyb::ssize_t> shape{static_cast<pyb::ssize_t>(B)};
    if (conv) {
        shape.push_back(static_cast<pyb::ssize_t>(r.conv_channels()));
        shape.push_back(static_cast<pyb::ssize_t>(r.conv_width()));
    } else {
        for (auto d : r.state_shape()) shape.push_back(static_cast<pyb::ssize_t>(d));
    }
    return to_numpy(std::move(out), std::move(shape));
}

/// Overwrites the conv window or state of one layer from an array of exactly its shape.
template <class Cache>
void write_recurrent(Cache& c, long long layer, pyb::handle values, bool conv) {
    const char* what = conv ? "set_conv" : "set_state";
    const RecurrentCache& rc = need_recurrent(layer_parts(std::as_const(c), layer).second, layer, what);
    std::vector<std::size_t> want{rc.batch()};
    if (conv) {
        want.push_back(rc.conv_channels());
        want.push_back(rc.conv_width());
    } else {
        want.insert(want.end(), rc.state_shape().begin(), rc.state_shape().end());
    }
    std::vector<std::size_t> shape;
    const std::vector<float> v = to_floats(values, std::string("Cache.") + what, &shape);
    check<ShapeError>(shape == want, "[Cache.", what, "] layer ", layer, ": got shape ", shape_string(shape),
                      ", the cache needs ", shape_string(want));
    c.visit(static_cast<std::size_t>(layer), [&](auto& lc) {
        RecurrentCache* r = recurrent_part(lc);
        const std::size_t n = conv ? r->conv_channels() * r->conv_width() : r->state_size();
        for (std::size_t b = 0; b < r->batch(); ++b)
            std::copy(v.data() + b * n, v.data() + (b + 1) * n, conv ? r->conv(b) : r->state(b));
    });
}

inline void bind_cache(pyb::module_& m) {
    pyb::class_<PyCache, CachePtr> c(m, "Cache",
        "The cache of one model for B sequences: the K/V of the attention layers and the conv window and state "
        "of the recurrent layers. Made by Model.prefill / new_cache / load_cache; surgery ops return new caches.");
    c.def_property_readonly("model_type", &PyCache::model_type)
        .def_property_readonly("family", &PyCache::family)
        .def_property_readonly("closed", &PyCache::closed)
        .def_property_readonly("torn", [](PyCache& s) {
            return s.visit("Cache.torn", [](auto& x) { return x.torn().empty() ? pyb::object(pyb::none()) : pyb::object(pyb::str(x.torn())); });
        }, "None, or why the cache can no longer be used: a forward that failed inside the layers left some layers "
           "with the tokens and others without; reset() clears it.")
        .def_property_readonly("batch", [](PyCache& s) { return s.visit("Cache.batch", [](auto& x) { return x.batch(); }); })
        .def_property_readonly("num_layers", [](PyCache& s) { return s.visit("Cache.num_layers", [](auto& x) { return x.num_layers(); }); })
        .def_property_readonly("next_position", [](PyCache& s) {
            return s.visit("Cache.next_position", [](auto& x) { return x.next_position(); }); },
            "Where the next token goes: the KV length of the first attention layer, or the tokens seen without one.")
        .def_property_readonly("kv_len", [](PyCache& s) { return s.visit("Cache.kv_len", [](auto& x) { return x.kv_len(); }); })
        .def_property("tokens_seen",
            [](PyCache& s) { return s.visit("Cache.tokens_seen", [](auto& x) { return x.tokens_seen(); }); },
            [](PyCache& s, Count n) {
                // Positions are int64: a count past 2^63 - 1 made the next position negative.
                if (n > static_cast<std::size_t>(INT64_MAX))
                    throw pyb::value_error("Cache.tokens_seen: " + std::to_string(n) + " is past the largest position, 2^63 - 1");
                s.visit("Cache.tokens_seen", [&](auto& x) { x.set_tokens_seen(n); });
            })
        .def("layers_with", [](PyCache& s, const std::string& ch) {
            const Chan k = parse_channel(ch, "Cache.layers_with");
            return s.visit("Cache.layers_with", [&](auto& x) { return layers_holding(x, k); });
        }, pyb::arg("channel"), "Layers holding the channel ('kv', or 'recurrent' / 'conv' / 'ssm').")
        .def("keep_only", [](PyCache& s, const std::string& ch, pyb::object layers) {
            const Chan k = parse_channel(ch, "keep_only");
            const LayerSet ls = to_layers(layers, "keep_only: layers");
            return make_cache(s.visit("keep_only", [&](auto& x) -> CacheVariant {
                require_channel(x, k, "keep_only", s.model_type());
                return with_channel(k, [&](auto tag) { return keep_only<decltype(tag)>(x, ls); });
            }), s.model_type());
        }, pyb::arg("channel"), pyb::arg("layers") = pyb::none(),
           "keep_only('kv') = KV-ONLY (recurrent parts reset), 'recurrent' = REC-ONLY (K/V emptied), 'ssm', 'conv'.")
        .def("drop", [](PyCache& s, const std::string& ch, pyb::object layers, bool ssm_only) {
            const Chan k = parse_channel(ch, "drop");
            const LayerSet ls = to_layers(layers, "drop: layers");
            if (ssm_only && k != Chan::recurrent) throw pyb::value_error("drop: ssm_only applies to channel 'recurrent'");
            return make_cache(s.visit("drop", [&](auto& x) -> CacheVariant {
                require_channel(x, k, "drop", s.model_type());
                return with_channel(k, [&](auto tag) { return drop<decltype(tag)>(x, ls, DropOptions{ssm_only}); });
            }), s.model_type());
        }, pyb::arg("channel"), pyb::arg("layers") = pyb::none(), pyb::arg("ssm_only") = false)
        .def("mask_state", [](PyCache& s, const std::string& part, pyb::object layers, pyb::object units, float value) {
            const Chan k = parse_channel(part, "mask_state");
            if (k == Chan::recurrent) throw pyb::value_error("mask_state: name the part, 'ssm' (state heads) or 'conv' (conv channels), or 'kv' (KV heads)");
            const LayerSet ls = to_layers(layers, "mask_state: layers");
            const auto u = to_indices(units, "mask_state: units");
            return make_cache(s.visit("mask_state", [&](auto& x) -> CacheVariant {
                require_channel(x, k, "mask_state", s.model_type());
                if (k == Chan::kv) return mask_state<channel::kv>(x, ls, u, value);
                if (k == Chan::conv) return mask_state<channel::conv>(x, ls, u, value);
                return mask_state<channel::ssm>(x, ls, u, value);
            }), s.model_type());
        }, pyb::arg("part"), pyb::arg("layers"), pyb::arg("units"), pyb::arg("value") = 0.0f,
           "Sets units of a part to value: 'ssm' state heads, 'conv' conv channels, 'kv' KV heads.")
        .def("clone", [](PyCache& s) { return make_cache(s.visit("clone", [](auto& x) -> CacheVariant { return clone(x); }), s.model_type()); })
        .def("__copy__", [](PyCache& s) { return make_cache(s.visit("copy", [](auto& x) -> CacheVariant { return x; }), s.model_type()); })
        .def("__deepcopy__", [](PyCache& s, pyb::object) { return make_cache(s.visit("deepcopy", [](auto& x) -> CacheVariant { return x; }), s.model_type()); })
        .def("reset", [](PyCache& s) { s.visit("reset", [](auto& x) { x.reset(); }); }, "Back to a fresh cache, in place.")
        .def("save", [](PyCache& s, const std::filesystem::path& path, const std::string& prefix) {
            s.visit("save", [&](auto& x) { save_cache(x, path, prefix); });
        }, pyb::arg("path"), pyb::arg("prefix") = "cache.",
           "Writes <prefix>N.conv / .state / .k / .v (float32 safetensors, the golden names).")
        .def("k", [](PyCache& s, Int l) { return s.visit("Cache.k", [&](auto& x) { return read_kv(x, l, true); }); },
             pyb::arg("layer"), "K of a layer, [B, kv_heads, length, head_dim] (post-norm, post-RoPE).")
        .def("v", [](PyCache& s, Int l) { return s.visit("Cache.v", [&](auto& x) { return read_kv(x, l, false); }); },
             pyb::arg("layer"), "V of a layer, [B, kv_heads, length, head_dim].")
        .def("conv", [](PyCache& s, Int l) { return s.visit("Cache.conv", [&](auto& x) { return read_recurrent(x, l, true); }); },
             pyb::arg("layer"), "Conv window of a recurrent layer, [B, channels, width], oldest column first.")
        .def("state", [](PyCache& s, Int l) { return s.visit("Cache.state", [&](auto& x) { return read_recurrent(x, l, false); }); },
             pyb::arg("layer"), "State of a recurrent layer, [B, Hv, dk, dv] (DeltaNet) or [B, H, P, N] (Mamba-2).")
        .def("set_conv", [](PyCache& s, Int l, pyb::object v) { s.visit("set_conv", [&](auto& x) { write_recurrent(x, l, v, true); }); },
             pyb::arg("layer"), pyb::arg("values"))
        .def("set_state", [](PyCache& s, Int l, pyb::object v) { s.visit("set_state", [&](auto& x) { write_recurrent(x, l, v, false); }); },
             pyb::arg("layer"), pyb::arg("values"))
        .def("diff", [](PyCache& a, PyCache& b, pyb::object layers) {
            const LayerSet ls = to_layers(layers, "diff: layers");
            const CacheDiff d = with_pair(a, b, "diff", [&](auto& x, auto& y) { return diff(x, y, ls); });
            pyb::dict out;
            out["kv"] = d.kv;
            out["conv"] = d.conv;
            out["state"] = d.state;
            out["same_layout"] = d.same_layout;
            out["max"] = d.max();
            return out;
        }, pyb::arg("other"), pyb::arg("layers") = pyb::none(), "max |a - b| per part.")
        .def("__eq__", [](PyCache& a, pyb::object other) -> pyb::object {
            if (!pyb::isinstance<PyCache>(other)) return pyb::reinterpret_borrow<pyb::object>(Py_NotImplemented);
            PyCache& b = other.cast<PyCache&>();
            a.check_open("==");
            b.check_open("==");
            if (a.family_index() != b.family_index()) return pyb::bool_(false);
            return pyb::bool_(with_pair(a, b, "==", [](auto& x, auto& y) { return x == y; }));
        })
        .def("close", &PyCache::close, "Frees the cache; using it afterwards raises ValueError (closing it again does nothing).")
        .def("__enter__", [](CachePtr s) { return s; })
        .def("__exit__", [](PyCache& s, pyb::args) { s.close(); })
        .def("__repr__", [](PyCache& s) {
            if (s.closed()) return std::string("<hylens.Cache (closed)>");
            // repr must not raise (a debugger or a traceback prints it): a cache a forward is
            // changing has no state to show.
            if (s.busy()) return "<hylens.Cache " + s.model_type() + " (in use by another thread)>";
            return s.visit("repr", [&](auto& x) {
                return "<hylens.Cache " + s.model_type() + ", batch " + std::to_string(x.batch()) + ", " +
                       std::to_string(x.num_layers()) + " layers, next position " + std::to_string(x.next_position()) + ">";
            });
        });
    c.attr("__hash__") = pyb::none();

    m.def("state_swap", [](PyCache& kv_from, PyCache& rec_from, pyb::object layers_kv, pyb::object layers_rec, bool conv_with_state) {
        const LayerSet lk = to_layers(layers_kv, "state_swap: layers_kv"), lr = to_layers(layers_rec, "state_swap: layers_rec");
        return make_cache(with_pair(kv_from, rec_from, "state_swap", [&](auto& a, auto& b) -> CacheVariant {
            require_channel(a, Chan::recurrent, "state_swap", kv_from.model_type());
            return state_swap(a, b, lk, lr, conv_with_state);
        }), kv_from.model_type());
    }, pyb::arg("kv_from"), pyb::arg("rec_from"), pyb::arg("layers_kv") = pyb::none(), pyb::arg("layers_rec") = pyb::none(),
       pyb::arg("conv_with_state") = true,
       "KV part of kv_from, recurrent part of rec_from (per layer sets); continues at kv_from's position.");
    m.def("patch_state", [](PyCache& host, PyCache& donor, pyb::object layers, bool include_conv) {
        const LayerSet ls = to_layers(layers, "patch_state: layers");
        return make_cache(with_pair(host, donor, "patch_state", [&](auto& a, auto& b) -> CacheVariant {
            require_channel(a, Chan::recurrent, "patch_state", host.model_type());
            return patch_state(a, b, ls, include_conv);
        }), host.model_type());
    }, pyb::arg("host"), pyb::arg("donor"), pyb::arg("layers"), pyb::arg("include_conv") = true,
       "The host with the donor's state (and conv window) in the given layers; host K/V and position kept.");
    m.def("patch_heads", [](const std::string& part, PyCache& host, PyCache& donor, pyb::object layers, pyb::object units) {
        const Chan k = parse_channel(part, "patch_heads");
        if (k == Chan::recurrent) throw pyb::value_error("patch_heads: name the part, 'ssm', 'conv' or 'kv'");
        const LayerSet ls = to_layers(layers, "patch_heads: layers");
        const auto u = to_indices(units, "patch_heads: units");
        return make_cache(with_pair(host, donor, "patch_heads", [&](auto& a, auto& b) -> CacheVariant {
            require_channel(a, k, "patch_heads", host.model_type());
            if (k == Chan::kv) return patch_heads<channel::kv>(a, b, ls, u);
            if (k == Chan::conv) return patch_heads<channel::conv>(a, b, ls, u);
            return patch_heads<channel::ssm>(a, b, ls, u);
        }), host.model_type());
    }, pyb::arg("part"), pyb::arg("host"), pyb::arg("donor"), pyb::arg("layers"), pyb::arg("units"));
    m.def("apply_split_mode", [](PyCache& cache, const std::string& mode, pyb::object layers, bool conv_with_state) {
        const SplitMode md = parse_mode(mode);
        const LayerSet ls = to_layers(layers, "apply_split_mode: layers");
        std::int64_t pos = 0;
        CacheVariant out = cache.visit("apply_split_mode", [&](auto& x) -> CacheVariant {
            auto e = apply_split_mode(x, md, ls, conv_with_state);
            pos = e.position;
            return std::move(e.cache);
        });
        return std::make_tuple(make_cache(std::move(out), cache.model_type()), pos);
    }, pyb::arg("cache"), pyb::arg("mode"), pyb::arg("layers") = pyb::none(), pyb::arg("conv_with_state") = true,
       "(edited cache, query start position) for FULL / KV_ONLY / REC_ONLY / NONE on a copy of a prefilled cache.");
}

}  // namespace hylens::python
