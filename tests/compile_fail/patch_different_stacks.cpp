// Must not compile: patching the recurrent state of one stack type from another's cache.
#include <hylens/cache/surgery.hpp>
#include <hylens/models/common.hpp>

int main() {
    const hylens::GraniteStack::cache_type granite;
    const hylens::FalconH1Stack::cache_type falcon;
    auto patched = hylens::patch_state(granite, falcon, hylens::LayerSet({0}));
    (void)patched;
}
