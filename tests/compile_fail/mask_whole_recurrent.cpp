// Must not compile: mask_state on channel::recurrent (ambiguous: conv window or state heads).
#include <hylens/cache/surgery.hpp>
#include <hylens/models/common.hpp>

int main() {
    const hylens::QwenStack::cache_type qwen;
    auto masked = hylens::mask_state<hylens::channel::recurrent>(qwen, hylens::LayerSet({0}), {0});
    (void)masked;
}
