#pragma once
// hylens::Error and its subclasses as Python exceptions with the same message. The Python
// classes keep the C++ hierarchy (hylens.Error is a RuntimeError); the argument errors
// (ShapeError, FormatError, ConfigError, UnsupportedError) are also ValueErrors, so
// `except ValueError` catches every bad input.

#include <hylens/core/error.hpp>

#include <pybind11/pybind11.h>

#include <exception>
#include <string>

namespace hylens::python {

namespace pyb = pybind11;

struct ErrorTypes {
    PyObject* base = nullptr;
    PyObject* shape = nullptr;
    PyObject* format = nullptr;
    PyObject* config = nullptr;
    PyObject* unsupported = nullptr;
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
    t.base = new_exception(m, "Error", "Base of every error hylens raises (a RuntimeError).",
                           pyb::make_tuple(pyb::handle(PyExc_RuntimeError)));
    const pyb::handle base(t.base);
    t.shape = new_exception(m, "ShapeError", "A tensor, cache, id or argument has the wrong shape, length or range.",
                            pyb::make_tuple(base, value_error));
    t.format = new_exception(m, "FormatError", "A file is missing, malformed, truncated or inconsistent.",
                             pyb::make_tuple(base, value_error));
    t.config = new_exception(m, "ConfigError", "config.json is missing a field or describes an impossible model.",
                             pyb::make_tuple(base, value_error));
    t.unsupported = new_exception(m, "UnsupportedError", "Well-formed input asking for something hylens does not do.",
                                  pyb::make_tuple(base, value_error));
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
        } catch (const Error& x) {
            PyErr_SetString(e.base, x.what());
        }
    });
}

}  // namespace hylens::python
