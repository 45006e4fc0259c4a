// Must not compile: channel::kv on a stack whose only layer kind is Mamba-2 (no attention).
#include <hylens/cache/surgery.hpp>
#include <hylens/layers/mamba2.hpp>
#include <hylens/stack/hybrid_stack.hpp>

int main() {
    const hylens::HybridStack<hylens::Mamba2Layer<>>::cache_type all_mamba;
    auto kv_only = hylens::keep_only<hylens::channel::kv>(all_mamba);
    (void)kv_only;
}
