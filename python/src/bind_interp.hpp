#pragma once
// Sites, positions and interventions (interp/sites.hpp, interp/interventions.hpp) for Python:
// site names as in the C++ API ("mixer_out.13", "layer_write.4", "embed"), positions as
// "all", "last", an int, a list of ints or a slice, and the intervention factories with donor
// rows from NumPy arrays.

#include <hylens/interp/interventions.hpp>
#include <hylens/interp/run.hpp>
#include <hylens/interp/sites.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "arrays.hpp"

namespace hylens::python {

namespace pyb = pybind11;

/// Site by name; "layer_write" sets `write` (the site is then resid_post).
inline Site parse_site(const std::string& name, bool& write) {
    write = name == "layer_write";
    if (write) return Site::resid_post;
    for (std::size_t i = 0; i < detail::kNumSites; ++i)
        if (site_name(static_cast<Site>(i)) == name) return static_cast<Site>(i);
    std::string known = "layer_write";
    for (std::size_t i = 0; i < detail::kNumSites; ++i) known += ", " + std::string(site_name(static_cast<Site>(i)));
    throw pyb::value_error("unknown site '" + name + "' (sites: " + known + ")");
}

inline Positions to_positions(pyb::handle obj) {
    if (obj.is_none()) return Positions::all();
    if (pyb::isinstance<Positions>(obj)) return obj.cast<Positions>();
    if (pyb::isinstance<pyb::str>(obj)) {
        const std::string s = obj.cast<std::string>();
        if (s == "all") return Positions::all();
        if (s == "last") return Positions::last();
        throw pyb::value_error("positions '" + s + "': use 'all', 'last', an int, a list of ints or a slice");
    }
    if (pyb::isinstance<pyb::slice>(obj)) {
        const pyb::object start = obj.attr("start"), stop = obj.attr("stop"), step = obj.attr("step");
        if (!step.is_none() && to_int(step, "positions slice step") != 1)
            throw pyb::value_error("positions: a slice with a step is not supported");
        if (stop.is_none()) {
            if (start.is_none()) return Positions::all();
            throw pyb::value_error("positions: a slice needs an end (e.g. slice(2, -1)); use 'all' for every position");
        }
        return Positions::range(start.is_none() ? 0 : to_int(start, "positions"), to_int(stop, "positions"));
    }
    if (is_int_scalar(obj)) return Positions::at({to_int(obj, "positions")});
    if (!pyb::isinstance<pyb::iterable>(obj)) throw pyb::type_error("positions: use 'all', 'last', an int, a list of ints or a slice");
    std::vector<std::int64_t> idx;
    for (pyb::handle h : pyb::iter(obj)) idx.push_back(to_int(h, "positions"));
    return Positions::at(std::move(idx));
}

/// "mixer_out.13" / "embed" / a SiteRef / (name, layer[, positions]).
inline SiteRef to_siteref(pyb::handle obj) {
    if (pyb::isinstance<SiteRef>(obj)) return obj.cast<SiteRef>();
    SiteRef r;
    if (pyb::isinstance<pyb::str>(obj)) {
        std::string s = obj.cast<std::string>();
        const std::size_t dot = s.rfind('.');
        if (dot != std::string::npos) {
            const std::string num = s.substr(dot + 1);
            if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 6)
                throw pyb::value_error("site '" + s + "': expected <site>.<layer>, e.g. 'mixer_out.13'");
            r.layer = static_cast<LayerIndex>(std::stoul(num));
            s = s.substr(0, dot);
            if (s.find('.') != std::string::npos)  // "mixer_out.3.5" said "unknown site 'mixer_out.3'"
                throw pyb::value_error("site '" + obj.cast<std::string>() + "': expected <site>.<layer>, e.g. 'mixer_out.13'");
        }
        r.site = parse_site(s, r.write);
        return r;
    }
    if (pyb::isinstance<pyb::tuple>(obj)) {
        const pyb::tuple t = obj.cast<pyb::tuple>();
        if (t.size() < 1 || t.size() > 3) throw pyb::value_error("site tuple: (name, layer[, positions])");
        if (!pyb::isinstance<pyb::str>(t[0]))
            throw pyb::type_error("site tuple: (name, layer[, positions]) starts with a site name such as 'mixer_out', not " +
                                  pyb::repr(t[0]).cast<std::string>());
        r.site = parse_site(t[0].cast<std::string>(), r.write);
        if (t.size() > 1) r.layer = site_layer_index(to_int(t[1], "site layer"));
        if (t.size() > 2) r.positions = to_positions(t[2]);
        return r;
    }
    throw pyb::type_error("a site is a name such as 'mixer_out.13', a hylens.site(...) or a (name, layer, positions) tuple");
}

inline std::vector<SiteRef> to_sites(pyb::handle obj) {
    std::vector<SiteRef> out;
    if (obj.is_none()) return out;
    if (pyb::isinstance<pyb::str>(obj) || pyb::isinstance<SiteRef>(obj)) {
        out.push_back(to_siteref(obj));
        return out;
    }
    for (pyb::handle h : pyb::iter(obj)) out.push_back(to_siteref(h));
    return out;
}

/// Layers from Python: -1 names the layer-less sites (embed, final_norm; `no_layer` in C++),
/// other negatives are a ShapeError.
inline std::vector<LayerIndex> to_layer_list(pyb::handle obj, const std::string& what) {
    std::vector<LayerIndex> out;
    if (is_int_scalar(obj)) {
        out.push_back(site_layer_index(to_int(obj, what)));
        return out;
    }
    if (!pyb::isinstance<pyb::iterable>(obj) || pyb::isinstance<pyb::str>(obj))
        throw pyb::type_error(what + ": an int or a list of layer indices is needed");
    for (pyb::handle h : pyb::iter(obj)) out.push_back(site_layer_index(to_int(h, what)));
    return out;
}

/// A layer as Python sees it: -1 for `no_layer`.
inline long long python_layer(LayerIndex l) { return l == no_layer ? -1 : static_cast<long long>(l); }

/// One float vector per layer from an array [D] (one for all), [L, D], or a list of arrays. A
/// list of numbers is one vector [D], as its array is (it was read as D vectors of one value).
inline std::vector<std::vector<float>> to_rows_per_layer(pyb::handle obj, const std::string& what) {
    std::vector<std::vector<float>> out;
    const auto of_numbers = [](pyb::handle seq) {
        const pyb::object ndim = pyb::module_::import("numpy").attr("ndim");
        for (pyb::handle h : pyb::iter(seq))
            if (ndim(h).cast<int>() == 0) return true;
        return false;
    };
    if ((pyb::isinstance<pyb::list>(obj) || pyb::isinstance<pyb::tuple>(obj)) && !of_numbers(obj)) {
        for (pyb::handle h : pyb::iter(obj)) out.push_back(to_floats(h, what));
        return out;
    }
    std::vector<std::size_t> shape;
    std::vector<float> v = to_floats(obj, what, &shape);
    if (shape.size() <= 1) {
        out.push_back(std::move(v));
    } else {
        std::size_t n = 1;
        for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
        for (std::size_t r = 0; r < shape[0]; ++r) out.emplace_back(v.begin() + r * n, v.begin() + (r + 1) * n);
    }
    return out;
}

/// A Surrogate from {token id: row} (one table for every layer) or a list of such dicts.
inline Surrogate to_surrogate(pyb::handle tables, pyb::handle fallback, const std::string& what) {
    Surrogate s;
    const auto one = [&](pyb::handle d) {
        std::map<std::int64_t, std::vector<float>> t;
        for (auto [k, v] : d.cast<pyb::dict>()) t[to_int(k, what + " table key")] = to_floats(v, what + " table row");
        s.tables.push_back(std::move(t));
    };
    const auto refuse = [&](pyb::handle got) {
        throw pyb::type_error(what + ": tables must be a dict {token id: row} (one table for every layer) or a list of "
                                     "such dicts (one per layer), got " + std::string(pyb::str(pyb::type::of(got).attr("__name__"))));
    };
    if (pyb::isinstance<pyb::dict>(tables)) {
        one(tables);
    } else if (pyb::isinstance<pyb::iterable>(tables) && !pyb::isinstance<pyb::str>(tables)) {
        for (pyb::handle h : pyb::iter(tables)) {
            if (!pyb::isinstance<pyb::dict>(h)) refuse(h);
            one(h);
        }
    } else {
        refuse(tables);
    }
    if (fallback.is_none())  // it said "a floating-point array is needed, got dtype object"
        throw pyb::type_error(what + ": fallback is the row (or one per layer) for a token no table lists, such as "
                                     "the global mean: a float array, got None");
    s.fallback = to_rows_per_layer(fallback, what + " fallback");
    return s;
}

inline Intervention make_iv(const std::string& site, pyb::handle layers, pyb::handle positions, Action a) {
    Intervention iv;
    iv.site = parse_site(site, iv.write);
    iv.layers = to_layer_list(layers, "layers");
    iv.positions = to_positions(positions);
    iv.action = std::move(a);
    return iv;
}

inline std::vector<Intervention> to_interventions(pyb::handle obj) {
    std::vector<Intervention> out;
    if (obj.is_none()) return out;
    if (pyb::isinstance<Intervention>(obj)) {
        out.push_back(obj.cast<Intervention>());
        return out;
    }
    if (!pyb::isinstance<pyb::iterable>(obj) || pyb::isinstance<pyb::str>(obj))  // 5 said "'int' object is not iterable"
        throw pyb::type_error("interventions: a hylens.Intervention or a list of them (from hylens.patch, zero, head_zero, ...), got " +
                              std::string(pyb::str(pyb::type::of(obj).attr("__name__"))));
    for (pyb::handle h : pyb::iter(obj)) {
        if (!pyb::isinstance<Intervention>(h))
            throw pyb::type_error("interventions: a list of hylens.Intervention (from hylens.patch, zero, head_zero, ...)");
        out.push_back(h.cast<Intervention>());
    }
    return out;
}

inline void bind_interp(pyb::module_& m) {
    pyb::class_<Positions>(m, "Positions", "Positions of a run's tokens (0 = first fed, -1 = last).")
        .def_static("all", &Positions::all)
        .def_static("last", &Positions::last)
        .def_static("at", [](pyb::handle indices) {  // pybind11's int caster took True as 1
            if (!pyb::isinstance<pyb::iterable>(indices) || pyb::isinstance<pyb::str>(indices))
                throw pyb::type_error("Positions.at: a list of ints is needed");
            std::vector<std::int64_t> idx;
            for (pyb::handle h : pyb::iter(indices)) idx.push_back(to_int(h, "Positions.at"));
            return Positions::at(std::move(idx));
        }, pyb::arg("indices"))
        .def_static("range", [](Int begin, Int end) { return Positions::range(begin, end); }, pyb::arg("begin"), pyb::arg("end"))
        .def("resolve", &Positions::resolve, pyb::arg("T"))
        .def("__repr__", [](const Positions& p) { return "Positions(" + p.describe() + ")"; });

    pyb::class_<SiteRef>(m, "SiteRef", "One tensor of a forward: a site at a layer over some positions.")
        .def_property_readonly("name", &SiteRef::name)
        .def_property_readonly("site", [](const SiteRef& s) { return s.write ? std::string("layer_write") : std::string(site_name(s.site)); })
        .def_property_readonly("layer", [](const SiteRef& s) { return python_layer(s.layer); })
        .def_readonly("positions", &SiteRef::positions)
        .def("__repr__", [](const SiteRef& s) { return "site('" + s.name() + "', positions=" + s.positions.describe() + ")"; });
    m.def("site", [](const std::string& name, Int layer, pyb::object positions) {
        SiteRef r;
        r.site = parse_site(name, r.write);
        r.layer = site_layer_index(layer.v);
        r.positions = to_positions(positions);
        return r;
    }, pyb::arg("name"), pyb::arg("layer") = -1, pyb::arg("positions") = pyb::none(),
       "site('mixer_out', 13, 'last'): a capture or patch target; layer -1 for embed and final_norm.");
    m.def("site_names", [] {
        std::vector<std::string> out{"layer_write"};
        for (std::size_t i = 0; i < detail::kNumSites; ++i) out.emplace_back(site_name(static_cast<Site>(i)));
        return out;
    });

    pyb::class_<Intervention>(m, "Intervention", "An action at a site of some layers and positions (interp/interventions.hpp).")
        .def("describe", &Intervention::describe)
        .def_property_readonly("action", [](const Intervention& v) { return std::string(action_name(v.action)); })
        .def_property_readonly("site", [](const Intervention& v) { return v.write ? std::string("layer_write") : std::string(site_name(v.site)); })
        .def_property_readonly("layers", [](const Intervention& v) {
            std::vector<long long> out;
            for (LayerIndex l : v.layers) out.push_back(python_layer(l));
            return out;
        })
        .def("__repr__", [](const Intervention& v) { return "<hylens.Intervention " + v.describe() + ">"; });

    m.def("patch", [](pyb::object site, pyb::object rows) {
        const SiteRef s = to_siteref(site);
        if (pyb::isinstance<pyb::dict>(rows)) {  // a captures dict of another run
            const pyb::dict d = rows.cast<pyb::dict>();
            if (!d.contains(s.name())) throw pyb::value_error("patch: the captures hold no '" + s.name() + "'");
            rows = d[pyb::str(s.name())];
        }
        std::vector<std::size_t> shape;
        Intervention iv = patch(s, to_floats(rows, "patch(" + s.name() + ") rows", &shape));
        std::get<Set>(iv.action).shape = std::move(shape);  // the run checks it against [B or 1, |P|, D]
        return iv;
    }, pyb::arg("site"), pyb::arg("rows"),
       "Overwrite the site's rows with donor rows [B or 1, |P|, D] (an array, or a captures dict holding the site).");
    m.def("zero", [](const std::string& site, pyb::object layers, pyb::object positions) {
        return make_iv(site, layers, positions, Zero{});
    }, pyb::arg("site"), pyb::arg("layers"), pyb::arg("positions") = pyb::none());
    m.def("mean_ablate", [](const std::string& site, pyb::object layers, pyb::object mu, pyb::object positions) {
        return make_iv(site, layers, positions, Mean{to_rows_per_layer(mu, "mean_ablate mu")});
    }, pyb::arg("site"), pyb::arg("layers"), pyb::arg("mu"), pyb::arg("positions") = pyb::none(),
       "Replace by a constant vector per layer: mu [D] (every layer) or [L, D].");
    m.def("head_zero", [](Int layer, pyb::object heads, const std::string& site, pyb::object positions) {
        return make_iv(site, pyb::int_(layer_index(layer.v)), positions, HeadZero{to_indices(heads, "head_zero heads")});
    }, pyb::arg("layer"), pyb::arg("heads"), pyb::arg("site") = "head_out", pyb::arg("positions") = pyb::none());
    m.def("proj_patch", [](Int layer, const std::string& which, pyb::object positions, pyb::object rows, pyb::object heads) {
        std::vector<std::size_t> h = heads.is_none() ? std::vector<std::size_t>{} : to_indices(heads, "proj_patch heads");
        bool write = false;
        std::vector<std::size_t> shape;
        Intervention iv = proj_patch(layer_index(layer.v), parse_site(which, write), to_positions(positions),
                                     to_floats(rows, "proj_patch rows", &shape), std::move(h));
        std::get<ProjPatch>(iv.action).shape = std::move(shape);
        return iv;
    }, pyb::arg("layer"), pyb::arg("which"), pyb::arg("positions"), pyb::arg("rows"), pyb::arg("heads") = pyb::none());
    m.def("skip_layers", [](pyb::object layers) { return skip_layers(to_layer_list(layers, "skip_layers")); }, pyb::arg("layers"));
    m.def("truncate_after", [](Int cut) { return truncate_after(layer_index(cut.v)); }, pyb::arg("cut"));
    m.def("conv_taps", [](pyb::object layers) { return conv_taps(to_layer_list(layers, "conv_taps")); }, pyb::arg("layers"));
    m.def("state_reset_every", [](pyb::object layers, Int every) {
        if (every.v < 1) throw pyb::value_error("state_reset_every: every is a chunk length of at least 1, got " + std::to_string(every.v));
        return state_reset_every(to_layer_list(layers, "state_reset_every"), static_cast<std::size_t>(every.v));
    }, pyb::arg("layers"), pyb::arg("every"));
    m.def("surrogate", [](const std::string& site, pyb::object layers, pyb::object tables, pyb::object fallback, pyb::object positions) {
        return make_iv(site, layers, positions, to_surrogate(tables, fallback, "surrogate"));
    }, pyb::arg("site"), pyb::arg("layers"), pyb::arg("tables"), pyb::arg("fallback"), pyb::arg("positions") = pyb::none(),
       "Replace each row by a per-token-id vector ({id: row} per layer), else the fallback.");
    m.def("channel_mask", [](const std::string& site, pyb::object layers, pyb::object channels, const std::string& fill,
                             pyb::object mean, pyb::object tables, pyb::object fallback, pyb::object positions) {
        ChannelMask cm;
        cm.channels = to_indices(channels, "channel_mask channels");
        // An argument the fill does not read was dropped without a word (mean= with the
        // default fill='zero' masked with zeros).
        const auto unused = [&](const char* name, const pyb::object& o) {
            if (!o.is_none())
                throw pyb::value_error("channel_mask: fill='" + fill + "' does not use " + name +
                                       "= (mean= goes with fill='mean', tables= and fallback= with fill='token_mean')");
        };
        if (fill != "mean") unused("mean", mean);
        if (fill != "token_mean") {
            unused("tables", tables);
            unused("fallback", fallback);
        }
        if (fill == "zero") {
            cm.fill = MaskFill::zero;
        } else if (fill == "mean") {
            cm.fill = MaskFill::mean;
            if (mean.is_none()) throw pyb::value_error("channel_mask: fill='mean' needs mean=");
            cm.mean = Mean{to_rows_per_layer(mean, "channel_mask mean")};
        } else if (fill == "token_mean") {
            cm.fill = MaskFill::token_mean;
            if (tables.is_none() || fallback.is_none()) throw pyb::value_error("channel_mask: fill='token_mean' needs tables= and fallback=");
            cm.table = to_surrogate(tables, fallback, "channel_mask");
        } else {
            throw pyb::value_error("channel_mask: fill is 'zero', 'mean' or 'token_mean', got '" + fill + "'");
        }
        return make_iv(site, layers, positions, std::move(cm));
    }, pyb::arg("site"), pyb::arg("layers"), pyb::arg("channels"), pyb::arg("fill") = "zero", pyb::arg("mean") = pyb::none(),
       pyb::arg("tables") = pyb::none(), pyb::arg("fallback") = pyb::none(), pyb::arg("positions") = pyb::none());
}

}  // namespace hylens::python
