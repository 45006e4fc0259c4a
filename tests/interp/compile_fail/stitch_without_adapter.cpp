// Must NOT compile: a Granite-type receiver given a Qwen-type donor block with NoAdapter (the
// hidden sizes of models of different stack types are not known to agree). The control build
// (-DHYLENS_COMPILE_FAIL_CONTROL) uses LinearAdapter and must compile.

#include <hylens/interp/stitch.hpp>
#include <hylens/models/common.hpp>

#include <vector>

void stitch_granite_with_qwen_block(const hylens::GraniteModel& recv, const hylens::Qwen35Model& donor) {
    hylens::StitchPlan plan{{{1, 2, {0, 1, 2}, false}}};
#ifdef HYLENS_COMPILE_FAIL_CONTROL
    auto m = hylens::stitch<hylens::LinearAdapter>(recv, plan, donor, {hylens::LinearAdapter{}});
#else
    auto m = hylens::stitch<hylens::NoAdapter>(recv, plan, donor, {hylens::NoAdapter{}});
#endif
    (void)m;
}
