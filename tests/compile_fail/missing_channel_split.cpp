// Must not compile: dropping the recurrent channel of a pure-attention stack.
#include <hylens/cache/surgery.hpp>
#include <hylens/layers/attention.hpp>
#include <hylens/stack/hybrid_stack.hpp>

int main() {
    const hylens::HybridStack<hylens::AttentionLayer<>>::cache_type attention_only;
    auto reset = hylens::drop<hylens::channel::recurrent>(attention_only);
    (void)reset;
}
