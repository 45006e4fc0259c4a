// Must not compile: a type that is not a layer kind in HybridStack's pack.
#include <hylens/stack/hybrid_stack.hpp>

int main() {
    hylens::HybridStack<int> stack;
    (void)stack;
}
