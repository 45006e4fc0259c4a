#pragma once
// hylens::Error and its subclasses as Python exceptions with the same message. The Python
// classes keep the C++ hierarchy; hylens.Error is both a RuntimeError and a ValueError (the
// library throws it for input it rejects: bad arguments, shapes, channels, files), so
// `except ValueError` catches every bad input.

#include <hylens/core/error.hpp>
#include <hylens/stack/finite_check.hpp>  // NonFiniteError

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include <exception>
#include <filesystem>
#include <string>

namespace hylens::python {

namespace pyb = pybind11;

struct ErrorTypes {
    PyObject* base = nullptr;
    PyObject* shape = nullptr;
    PyObject* format = nullptr;
    PyObject* config = nullptr;
    PyObject* unsupported = nullptr;
    PyObject* non_finite = nullptr;
};

inline ErrorTypes& error_types() {
    static ErrorTypes t;
    return t;
}

/// A new exception class hylens.<name> deriving from `bases` (a tuple of classes).
inline PyObject* new_exception(pyb::module_& m, const char* name, const char* doc, pyb::tuple bases) {
    const std::string full = std::string("hylens.") + name;
    PyObject* cls = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases.ptr(), nullptr);
    if (!cls) throw pyb::error_already_set();
    m.add_object(name, pyb::handle(cls));
    return cls;
}

inline void register_errors(pyb::module_& m) {
    ErrorTypes& t = error_types();
    const pyb::handle value_error(PyExc_ValueError);
    t.base = new_exception(m, "Error", "Base of every error hylens raises (a RuntimeError and a ValueError).",
                           pyb::make_tuple(pyb::handle(PyExc_RuntimeError), value_error));
    const pyb::tuple base = pyb::make_tuple(pyb::handle(t.base));
    t.shape = new_exception(m, "ShapeError", "A tensor, cache, id or argument has the wrong shape, length or range.", base);
    t.format = new_exception(m, "FormatError", "A file is missing, malformed, truncated or inconsistent.", base);
    t.config = new_exception(m, "ConfigError", "config.json is missing a field or describes an impossible model.", base);
    t.unsupported = new_exception(m, "UnsupportedError", "Well-formed input asking for something hylens does not do.", base);
    t.non_finite = new_exception(m, "NonFiniteError",
                                 "A forward produced a NaN or an infinity (Model.check_finite): the model, layer, site and token.",
                                 base);
    pyb::register_exception_translator([](std::exception_ptr p) {
        const ErrorTypes& e = error_types();
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ShapeError& x) {
            PyErr_SetString(e.shape, x.what());
        } catch (const FormatError& x) {
            PyErr_SetString(e.format, x.what());
        } catch (const ConfigError& x) {
            PyErr_SetString(e.config, x.what());
        } catch (const UnsupportedError& x) {
            PyErr_SetString(e.unsupported, x.what());
        } catch (const NonFiniteError& x) {
            PyErr_SetString(e.non_finite, x.what());
        } catch (const Error& x) {
            PyErr_SetString(e.base, x.what());
        } catch (const nlohmann::json::exception& x) {
            // A study file of the wrong shape (a run.json field of another type, a record's
            // value that is not a number) that no check named: it was a bare RuntimeError.
            PyErr_SetString(e.format, (std::string("[json] a file holds a value of another type or shape: ") + x.what()).c_str());
        } catch (const std::filesystem::filesystem_error& x) {
            // A folder or file the call could not make or read (it was a bare RuntimeError):
            // OSError(errno, message, path), which Python makes its subclass (FileNotFoundError,
            // PermissionError, ...), as open() raises.
            const pyb::object err = pyb::handle(PyExc_OSError)(x.code().value(), x.what(), x.path1().string());
            PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
        }
    });
}

}  // namespace hylens::python
