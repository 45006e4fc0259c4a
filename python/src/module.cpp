// The hylens Python module (hylens._core): the one translation unit of the bindings. The
// package python/hylens/__init__.py re-exports it and adds the pure-Python helpers.

#include <pybind11/pybind11.h>

#include "bind_cache.hpp"
#include "bind_circuit.hpp"
#include "bind_encode_swap.hpp"
#include "bind_experiment.hpp"
#include "bind_interp.hpp"
#include "bind_model.hpp"
#include "bind_text.hpp"
#include "bind_transplant.hpp"
#include "errors.hpp"

PYBIND11_MODULE(_core, m) {
    m.doc() = "hylens: interpretability of hybrid language models (C++ core)";
    hylens::python::register_errors(m);
    hylens::python::bind_cache(m);
    hylens::python::bind_interp(m);
    hylens::python::bind_text(m);
    hylens::python::bind_model(m);
    hylens::python::bind_experiment(m);
    hylens::python::bind_circuit(m);
    hylens::python::bind_encode_swap(m);
    hylens::python::bind_transplant(m);
}
