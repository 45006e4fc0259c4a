// Must not compile: adding a layer of a kind the stack was not declared with.
#include <hylens/layers/attention.hpp>
#include <hylens/layers/mamba2.hpp>
#include <hylens/stack/hybrid_stack.hpp>

int main() {
    hylens::HybridStack<hylens::Mamba2Layer<>> stack;
    stack.push_back(hylens::DecoderLayer<hylens::AttentionLayer<>>{});
}
