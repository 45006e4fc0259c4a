#pragma once
// Workspace: the per-thread scratch that the layers, the feed-forward blocks and the LM head
// take their per-call buffers from (docs/kernels.md, "Per-call buffers"). A decode step needs the
// same buffers, of the same sizes, at every token; taken from here they are allocated during
// the first steps and reused afterwards, so a warm single-token step allocates nothing.
//
// Use: open a Frame in a function, take its buffers from it; they live until the frame closes.
// Frames nest (a layer inside the stack inside the model, a hook that runs a second forward in
// the middle of a layer): each buffer is its own slot of a per-thread stack of slots, a nested
// frame takes the slots above its parent's, and a slot is reallocated only when a call needs
// more than it holds (capacities are powers of two bytes, so a buffer that grows by a row a
// token is reallocated only at doublings). Buffers of more than kKeepBytes (a long prefill's
// activations) are kept while an enclosing frame is open, so the next layer of the same forward
// takes them again, and freed when the outermost frame closes instead of being kept for the
// thread's life. (Freed at their own frame's close, a prefill of 512 tokens mapped and faulted in
// its largest buffers afresh at every layer: with zeros()'s memset, 1.9-3.0 % of an F32 prefill
// spent zeroing memory; docs/performance-log.md, "Prefill's buffers kept across layers".)
//
// One workspace per thread (thread_local): a const model may run on several threads at once.
// The pool's worker threads never use it (the kernels' parts take no layer buffers).

#include <bit>          // std::bit_ceil
#include <cstddef>      // std::size_t, std::byte
#include <memory>       // std::uninitialized_value_construct_n, std::uninitialized_default_construct_n
#include <new>          // ::operator new, std::align_val_t
#include <span>         // std::span
#include <type_traits>  // std::is_trivially_destructible_v
#include <vector>       // std::vector

namespace hylens {

class Workspace {
public:
    /// Buffers larger than this are freed when the outermost frame closes; smaller ones are kept.
    static constexpr std::size_t kKeepBytes = std::size_t{8} << 20;
    /// Alignment of every buffer (a cache line; also covers every vector width).
    static constexpr std::size_t kAlign = 64;

    /// This thread's workspace.
    static Workspace& local() noexcept {
        thread_local Workspace ws;
        return ws;
    }

    Workspace() = default;
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    ~Workspace() {
        for (Slot& s : slots_) free_slot(s);
    }

    /// Slots in use (open buffers of every open frame) and bytes held by all slots (tests).
    std::size_t depth() const noexcept { return top_; }
    std::size_t bytes_held() const noexcept {
        std::size_t n = 0;
        for (const Slot& s : slots_) n += s.bytes;
        return n;
    }

    /// A scope whose buffers are released (and kept for reuse) when it closes.
    class Frame {
    public:
        Frame() noexcept : ws_(Workspace::local()), mark_(ws_.top_) {}
        ~Frame() { ws_.release(mark_); }
        Frame(const Frame&) = delete;
        Frame& operator=(const Frame&) = delete;

        /// n value-initialised T (zeros for arithmetic types), as std::vector<T>(n) would hold.
        template <class T>
        std::span<T> zeros(std::size_t n) {
            const std::span<T> s = take<T>(n);
            std::uninitialized_value_construct_n(s.data(), n);
            return s;
        }
        /// n T with indeterminate values, for buffers the caller writes in full before reading.
        template <class T>
        std::span<T> uninitialized(std::size_t n) {
            const std::span<T> s = take<T>(n);
            std::uninitialized_default_construct_n(s.data(), n);
            return s;
        }

    private:
        template <class T>
        std::span<T> take(std::size_t n) {
            static_assert(std::is_trivially_destructible_v<T>, "hylens: workspace buffers are never destroyed");
            return {static_cast<T*>(ws_.acquire(n * sizeof(T))), n};
        }

        Workspace& ws_;
        std::size_t mark_;
    };

private:
    struct Slot {
        void* p = nullptr;
        std::size_t bytes = 0;
    };

    static void free_slot(Slot& s) noexcept {
        if (s.p) ::operator delete(s.p, std::align_val_t{kAlign});
        s.p = nullptr;
        s.bytes = 0;
    }

    void* acquire(std::size_t bytes) {
        if (top_ == slots_.size()) slots_.emplace_back();
        Slot& s = slots_[top_];
        if (s.bytes < bytes) {
            free_slot(s);
            const std::size_t want = bytes > kKeepBytes ? bytes : std::bit_ceil(bytes < kAlign ? kAlign : bytes);
            s.p = ::operator new(want, std::align_val_t{kAlign});
            s.bytes = want;
        }
        ++top_;
        return s.p;
    }

    void release(std::size_t mark) noexcept {
        if (mark == 0)  // the outermost frame: no later sibling will take the large slots again
            for (Slot& s : slots_)
                if (s.bytes > kKeepBytes) free_slot(s);
        top_ = mark;
    }

    std::vector<Slot> slots_;
    std::size_t top_ = 0;
};

}  // namespace hylens
