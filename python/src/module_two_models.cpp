// The second translation unit of hylens._core: the studies on two models, whose nested visits of
// the model types are compiled here, beside module.cpp (the same flags: python/CMakeLists.txt).

#include "two_model_studies.hpp"

#include "bind_query_map.hpp"
#include "bind_stitch.hpp"

namespace hylens::python {

void bind_two_model_studies(pybind11::module_& m) {
    bind_query_map(m);
    bind_stitch(m);
}

}  // namespace hylens::python
