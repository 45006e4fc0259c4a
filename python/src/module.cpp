// The hylens Python module (hylens._core). The bindings of the studies on two models are in
// module_two_models.cpp, a translation unit of their own (their nested model visits are the
// heaviest part to compile). The package python/hylens/__init__.py re-exports the module and
// adds the pure-Python helpers.

#include <hylens/version.hpp>

#include <pybind11/pybind11.h>

#include "bind_cache.hpp"
#include "bind_circuit.hpp"
#include "bind_encode_swap.hpp"
#include "bind_experiment.hpp"
#include "bind_interp.hpp"
#include "bind_merge.hpp"
#include "bind_model.hpp"
#include "bind_tasks.hpp"
#include "bind_text.hpp"
#include "bind_transplant.hpp"
#include "errors.hpp"
#include "interrupt.hpp"
#include "two_model_studies.hpp"

PYBIND11_MODULE(_core, m) {
    m.doc() = "hylens: interpretability of hybrid language models (C++ core)";
    m.attr("__version__") = hylens::version;
    hylens::python::register_errors(m);
    hylens::python::install_interrupt_check();
    hylens::python::bind_cache(m);
    hylens::python::bind_interp(m);
    hylens::python::bind_text(m);
    hylens::python::bind_tasks(m);
    hylens::python::bind_model(m);
    hylens::python::bind_experiment(m);
    hylens::python::bind_circuit(m);
    hylens::python::bind_encode_swap(m);
    hylens::python::bind_transplant(m);
    hylens::python::bind_merge(m);
    hylens::python::bind_two_model_studies(m);
}
