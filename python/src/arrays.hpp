#pragma once
// NumPy <-> C++ conversions of the bindings: token ids in (lists or integer arrays, one
// sequence or a batch), float rows in (interventions, cache parts), and float32 arrays out
// that own the C++ buffer they view (a capsule deletes it), so logits and captures are
// handed to Python without a copy.

#include <hylens/core/tensor.hpp>
#include <hylens/stack/tokens.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hylens::python {

namespace pyb = pybind11;

/// A float32 array viewing `data` (C order) that keeps `owner` alive until the array dies.
template <class Owner>
pyb::array_t<float> owning_array(std::unique_ptr<Owner> owner, const float* data, std::vector<pyb::ssize_t> shape) {
    Owner* raw = owner.release();
    pyb::capsule base(raw, [](void* p) { delete static_cast<Owner*>(p); });
    return pyb::array_t<float>(std::move(shape), data, base);
}

/// Moves a vector into a NumPy array (no copy of the values).
inline pyb::array_t<float> to_numpy(std::vector<float>&& v, std::vector<pyb::ssize_t> shape) {
    auto owner = std::make_unique<std::vector<float>>(std::move(v));
    const float* data = owner->data();
    return owning_array(std::move(owner), data, std::move(shape));
}

/// Moves a logits tensor [B, T, V] into a NumPy array; drop_batch gives [T, V] (B = 1).
inline pyb::array_t<float> to_numpy(Tensor3&& t, bool drop_batch) {
    std::vector<pyb::ssize_t> shape;
    for (std::size_t i = drop_batch ? 1 : 0; i < 3; ++i) shape.push_back(static_cast<pyb::ssize_t>(t.shape()[i]));
    auto owner = std::make_unique<Tensor3>(std::move(t));
    const float* data = owner->data();
    return owning_array(std::move(owner), data, std::move(shape));
}

/// Moves a tensor of any rank into a NumPy array of its shape (no copy of the values).
template <std::size_t N>
pyb::array_t<float> to_numpy(Tensor<N>&& t) {
    std::vector<pyb::ssize_t> shape(t.shape().begin(), t.shape().end());
    auto owner = std::make_unique<Tensor<N>>(std::move(t));
    const float* data = owner->data();
    return owning_array(std::move(owner), data, std::move(shape));
}

inline std::string dtype_name(const pyb::array& a) { return pyb::str(a.dtype()).cast<std::string>(); }

/// Token ids from a list, a list of lists or an integer NumPy array: 1-D = one sequence,
/// 2-D = a batch of equal-length sequences. `batched` tells which (to shape the outputs).
struct Ids {
    TokenBatch batch;
    bool batched = false;
};

/// A Python bool or a NumPy bool scalar (np.True_ has __index__, with only a DeprecationWarning,
/// so it passed as the integer 1).
inline bool is_bool(pyb::handle h) {
    if (PyBool_Check(h.ptr())) return true;
    const std::string_view type = Py_TYPE(h.ptr())->tp_name;
    return type == "numpy.bool_" || type == "numpy.bool";
}

/// Whether `obj` is a bool or a list or tuple (nested) holding one: NumPy reads [1, True] as
/// the ints [1, 1]. Arrays are not looked into (their dtype says bool).
inline bool holds_bool(pyb::handle obj) {
    if (!pyb::isinstance<pyb::list>(obj) && !pyb::isinstance<pyb::tuple>(obj)) return is_bool(obj);
    for (pyb::handle h : pyb::iter(obj))
        if (holds_bool(h)) return true;
    return false;
}


inline Ids to_ids(pyb::handle obj, const char* what) {
    if (obj.is_none()) throw pyb::type_error(std::string(what) + ": token ids expected, got None");
    if (holds_bool(obj))
        throw pyb::type_error(std::string(what) + ": token ids must be integers, got a bool in the list");
    pyb::array a;
    try {
        a = pyb::module_::import("numpy").attr("asarray")(obj);
    } catch (pyb::error_already_set& e) {  // ragged lists and the like
        throw pyb::value_error(std::string(what) + ": not a list or array of token ids (" + e.what() + ")");
    }
    if (a.ndim() != 1 && a.ndim() != 2)
        throw pyb::value_error(std::string(what) + ": token ids must be 1-D (one sequence) or 2-D (a batch), got " +
                               std::to_string(a.ndim()) + "-D");
    if (a.size() == 0) throw pyb::value_error(std::string(what) + ": no token ids");
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u')
        throw pyb::type_error(std::string(what) + ": token ids must be integers, got dtype " + dtype_name(a));
    const auto ids = pyb::array_t<std::int64_t, pyb::array::c_style | pyb::array::forcecast>::ensure(a);
    if (!ids) throw pyb::error_already_set();
    if (kind == 'u' && a.itemsize() == 8) {  // uint64 beyond int64 would wrap to a negative id
        const auto u = pyb::array_t<std::uint64_t, pyb::array::c_style>::ensure(a);
        for (pyb::ssize_t i = 0; i < u.size(); ++i)
            if (u.data()[i] > static_cast<std::uint64_t>(INT64_MAX))
                throw pyb::value_error(std::string(what) + ": token id " + std::to_string(u.data()[i]) + " is out of range");
    }
    Ids out;
    out.batched = a.ndim() == 2;
    out.batch.batch = out.batched ? static_cast<std::size_t>(a.shape(0)) : 1;
    out.batch.ids.assign(ids.data(), ids.data() + ids.size());
    return out;
}

/// float32 values from a float array or a nested list of numbers (cast from float64 etc.);
/// integer, complex, bool or object input is a TypeError. The shape is returned in `shape`.
inline std::vector<float> to_floats(pyb::handle obj, const std::string& what, std::vector<std::size_t>* shape = nullptr) {
    pyb::array a;
    try {
        a = pyb::module_::import("numpy").attr("asarray")(obj);
    } catch (pyb::error_already_set& e) {
        throw pyb::value_error(what + ": not an array of numbers (" + e.what() + ")");
    }
    if (a.dtype().kind() != 'f')
        throw pyb::type_error(what + ": a floating-point array is needed, got dtype " + dtype_name(a));
    const auto f = pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast>::ensure(a);
    if (!f) throw pyb::error_already_set();
    if (shape) {
        shape->clear();
        for (pyb::ssize_t i = 0; i < f.ndim(); ++i) shape->push_back(static_cast<std::size_t>(f.shape(i)));
    }
    // Every use writes the values into a run or a cache: a NaN or an infinity (or a float64
    // past float32's range) would give NaN logits with no error.
    const float* d = f.data();
    for (pyb::ssize_t i = 0; i < f.size(); ++i)
        if (!std::isfinite(d[i]))
            throw pyb::value_error(what + ": value " + std::to_string(i) + " is " + std::to_string(d[i]) +
                                   " as float32 (only finite values can be written)");
    return std::vector<float>(d, d + f.size());
}

/// One integer (a Python int or a NumPy integer scalar), not a bool, not an array: NumPy
/// arrays have __index__ too, so np.array([0, 1]) was read as one integer (and rejected).
inline bool is_int_scalar(pyb::handle obj) {
    if (!PyIndex_Check(obj.ptr()) || is_bool(obj)) return false;
    return !pyb::isinstance<pyb::array>(obj) || pyb::reinterpret_borrow<pyb::array>(obj).ndim() == 0;
}

/// An integer from a Python int or NumPy integer (a bool, NumPy's too, is rejected).
inline long long to_int(pyb::handle h, const std::string& what) {
    PyObject* r = is_bool(h) ? nullptr : PyNumber_Index(h.ptr());
    if (!r) {
        PyErr_Clear();
        throw pyb::type_error(what + ": an integer is needed, got " + std::string(Py_TYPE(h.ptr())->tp_name));
    }
    const long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        throw pyb::value_error(what + ": integer out of range");
    }
    return v;
}

/// Non-negative integers from an int or an iterable of ints (layer, head, channel indices).
inline std::vector<std::size_t> to_indices(pyb::handle obj, const std::string& what) {
    std::vector<std::size_t> out;
    const auto one = [&](pyb::handle h) {
        const long long v = to_int(h, what);
        if (v < 0) throw pyb::value_error(what + ": negative index " + std::to_string(v));
        out.push_back(static_cast<std::size_t>(v));
    };
    if (is_int_scalar(obj)) {
        one(obj);
        return out;
    }
    if (!pyb::isinstance<pyb::iterable>(obj) || pyb::isinstance<pyb::str>(obj))
        throw pyb::type_error(what + ": an int or an iterable of ints is needed");
    for (pyb::handle h : pyb::iter(obj)) one(h);
    return out;
}

/// An integer argument (a layer, a head count) that refuses bool: pybind11's integer caster
/// takes True as 1, so cache.k(True) read layer 1. A bool, a float or a str is pybind11's
/// TypeError listing the signature.
struct Int {
    long long v = 0;
    operator long long() const noexcept { return v; }  // NOLINT(google-explicit-constructor)
};

/// A count argument (max_new, batch, a position count) that refuses bool, as Int does: pybind11's
/// std::size_t caster took True as 1. A negative value, a bool, a float or a str is pybind11's
/// TypeError listing the signature.
struct Count {
    std::size_t v = 0;
    operator std::size_t() const noexcept { return v; }  // NOLINT(google-explicit-constructor)
};

/// The integer of an index-like Python object that is not a bool or a float (NumPy integers
/// included); false with no Python error set otherwise.
template <class T, class Read>
bool load_integer(pyb::handle src, T& out, Read read) {
    if (!src || is_bool(src) || PyFloat_Check(src.ptr()) || !PyIndex_Check(src.ptr())) return false;
    PyObject* r = PyNumber_Index(src.ptr());
    if (!r) {
        PyErr_Clear();
        return false;
    }
    const T v = static_cast<T>(read(r));
    const bool failed = PyErr_Occurred() != nullptr;
    Py_DECREF(r);
    if (failed) {
        PyErr_Clear();
        return false;
    }
    out = v;
    return true;
}

}  // namespace hylens::python

namespace pybind11::detail {
template <>
struct type_caster<hylens::python::Int> {
    PYBIND11_TYPE_CASTER(hylens::python::Int, const_name("int"));
    bool load(handle src, bool) { return hylens::python::load_integer(src, value.v, PyLong_AsLongLong); }
    static handle cast(hylens::python::Int i, return_value_policy, handle) { return PyLong_FromLongLong(i.v); }
};
template <>
struct type_caster<hylens::python::Count> {
    PYBIND11_TYPE_CASTER(hylens::python::Count, const_name("int"));
    bool load(handle src, bool) { return hylens::python::load_integer(src, value.v, PyLong_AsUnsignedLongLong); }
    static handle cast(hylens::python::Count c, return_value_policy, handle) {
        return PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(c.v));
    }
};
}  // namespace pybind11::detail
