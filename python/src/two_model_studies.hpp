#pragma once
// The studies on two models from Python (module_two_models.cpp): hylens._query_map_study
// (receiver and donor, bind_query_map.hpp) and hylens._stitch_study (host and donor,
// bind_stitch.hpp).

#include <pybind11/pybind11.h>

namespace hylens::python {

void bind_two_model_studies(pybind11::module_& m);

}  // namespace hylens::python
