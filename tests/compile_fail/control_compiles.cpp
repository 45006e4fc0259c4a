// Must compile: the valid counterparts of the compile-fail cases (so that a failure of those
// is the intended static_assert, not a broken command line).
#include <hylens/cache/surgery.hpp>
#include <hylens/models/common.hpp>
#include <hylens/stack/split_prefill.hpp>

int main() {
    const hylens::QwenStack::cache_type a, b;
    auto swapped = hylens::state_swap(a, b);
    auto patched = hylens::patch_state(a, b, hylens::LayerSet({0}));
    auto kv_only = hylens::keep_only<hylens::channel::kv>(a);
    auto masked = hylens::mask_state<hylens::channel::ssm>(a, hylens::LayerSet({0}), {0});
    const hylens::HybridStack<hylens::Mamba2Layer<>>::cache_type all_mamba;
    auto rec = hylens::keep_only<hylens::channel::recurrent>(all_mamba);
    auto edited = hylens::apply_split_mode(all_mamba, hylens::SplitMode::NONE);
    hylens::HybridStack<hylens::Mamba2Layer<>, hylens::AttentionLayer<>> stack;
    (void)stack;
    return swapped == patched && kv_only == masked && rec == edited.cache ? 0 : 0;
}
