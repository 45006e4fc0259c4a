// Must not compile: a state swap between the caches of two different stack types.
#include <hylens/cache/surgery.hpp>
#include <hylens/models/common.hpp>

int main() {
    const hylens::QwenStack::cache_type qwen;
    const hylens::GraniteStack::cache_type granite;
    auto mixed = hylens::state_swap(qwen, granite);
    (void)mixed;
}
