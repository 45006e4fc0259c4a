#pragma once
// MappedFile: a whole file as read-only memory, owned through std::shared_ptr so that weights
// borrowed from it keep it alive. Two storages (Storage):
//   - mapped (the default): the file itself memory-mapped (POSIX mmap, MAP_PRIVATE). Pages are
//     read from the page cache on first touch, so opening a 16 GB checkpoint costs nothing until
//     a tensor is used. Caveat (POSIX, not ours to fix): if another process truncates the file
//     while it is mapped, touching the lost pages raises SIGBUS.
//   - in_memory: the file read whole into anonymous memory (an anonymous mapping advised for
//     transparent huge pages), llama.cpp's --no-mmap. Opening costs one read of the file and
//     the model's size in private memory, but the weights no longer live in the page cache:
//     a decode reads every weight once per token, and on some machines (measured on a
//     virtual machine, docs/performance.md) page-cache pages read at a quarter of the rate of
//     anonymous ones, intermittently. The bytes are the same in both; in memory the file's
//     first byte may sit `shift` bytes past a page boundary, which SafetensorsFile chooses so
//     that the tensors start on cache lines (a tensor's alignment within a mapping is its
//     offset in the file's, since a mapping starts on a page).

#include <fcntl.h>     // ::open, O_RDONLY, O_CLOEXEC, O_NONBLOCK
#include <sys/mman.h>  // ::mmap, ::munmap, ::madvise
#include <sys/stat.h>  // ::fstat, S_ISREG
#include <unistd.h>    // ::close, ::pread, ::sysconf

#include <algorithm>    // std::min
#include <cerrno>       // errno
#include <cstddef>      // std::byte, std::size_t
#include <cstdint>      // std::uintptr_t
#include <cstring>      // std::strerror
#include <filesystem>   // std::filesystem::path
#include <memory>       // std::shared_ptr, std::make_shared
#include <span>         // std::span
#include <utility>      // std::exchange

#include "../core/error.hpp"

namespace hylens::io {

/// What the kernel should expect of a byte range (madvise hints).
enum class Advice {
    normal,      ///< default readahead
    sequential,  ///< read once front to back: aggressive readahead, pages dropped early
    random,      ///< no readahead (sparse lookups, e.g. a few rows of an embedding)
    willneed,    ///< start reading the range now, asynchronously (a tensor about to be used)
    populate,    ///< read the range now and map it (MADV_POPULATE_READ, Linux >= 5.14): no page faults later
};

/// Where a file's bytes live once opened (see the header comment).
enum class Storage {
    mapped,     ///< the file memory-mapped: nothing read until touched, pages shared through the page cache
    in_memory,  ///< the file read whole into private anonymous memory (huge pages where the kernel allows)
};

/// A read-only mapping of a whole regular file. Movable, not copyable; normally held through
/// the std::shared_ptr that open() returns.
class MappedFile {
public:
    /// Opens `path` with shared ownership (what SafetensorsFile and borrowed Weights hold).
    /// Storage::in_memory places the file's byte 0 `shift` bytes past a page boundary (shift <
    /// 4096; ignored when mapped).
    static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path, Storage storage = Storage::mapped,
                                                  std::size_t shift = 0) {
        return std::make_shared<const MappedFile>(map(path, storage, shift));
    }

    /// Opens `path` as a plain value. Throws FormatError naming the path if it cannot be opened,
    /// is not a regular file (directory, FIFO, device), is empty (a zero-length mapping is
    /// invalid) or, for Storage::in_memory, cannot be read whole.
    static MappedFile map(const std::filesystem::path& path, Storage storage = Storage::mapped, std::size_t shift = 0) {
        // O_NONBLOCK: opening a FIFO for reading would otherwise block until a writer appears.
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) fail<FormatError>("[mmap] ", path.string(), ": cannot open: ", std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            const int err = errno;
            ::close(fd);
            fail<FormatError>("[mmap] ", path.string(), ": cannot stat: ", std::strerror(err));
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            fail<FormatError>("[mmap] ", path.string(), ": not a regular file");
        }
        if (st.st_size <= 0) {
            ::close(fd);
            fail<FormatError>("[mmap] ", path.string(), ": empty file (0 bytes)");
        }
        const auto size = static_cast<std::size_t>(st.st_size);
        if (storage == Storage::in_memory) return read_whole(path, fd, size, shift % 4096);
        void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        const int err = errno;
        ::close(fd);  // the mapping holds its own reference to the file
        if (p == MAP_FAILED) fail<FormatError>("[mmap] ", path.string(), ": mmap of ", size, " bytes failed: ", std::strerror(err));
        return MappedFile(path, static_cast<const std::byte*>(p), size, 0);
    }

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& o) noexcept
        : path_(std::move(o.path_)),
          data_(std::exchange(o.data_, nullptr)),
          size_(std::exchange(o.size_, 0)),
          shift_(std::exchange(o.shift_, 0)) {}
    MappedFile& operator=(MappedFile&& o) noexcept {
        if (this != &o) {
            unmap();
            path_ = std::move(o.path_);
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            shift_ = std::exchange(o.shift_, 0);
        }
        return *this;
    }
    ~MappedFile() { unmap(); }

    const std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
    const std::filesystem::path& path() const noexcept { return path_; }

    /// Hints the kernel about [offset, offset + length) (clipped to the file, widened to whole
    /// pages). Advice is only a hint: failures are ignored.
    void advise(std::size_t offset, std::size_t length, Advice advice) const noexcept {
        if (data_ == nullptr || offset >= size_ || length == 0) return;
        if (length > size_ - offset) length = size_ - offset;
        static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        const auto begin = reinterpret_cast<std::uintptr_t>(data_ + offset) / page * page;
        const auto end = reinterpret_cast<std::uintptr_t>(data_ + offset + length);
        int flag = MADV_NORMAL;
        switch (advice) {
            case Advice::normal: flag = MADV_NORMAL; break;
            case Advice::sequential: flag = MADV_SEQUENTIAL; break;
            case Advice::random: flag = MADV_RANDOM; break;
            case Advice::willneed: flag = MADV_WILLNEED; break;
            case Advice::populate:
#ifdef MADV_POPULATE_READ
                flag = MADV_POPULATE_READ;
#else
                flag = MADV_WILLNEED;
#endif
                break;
        }
        // madvise wants a page-aligned start; the mapping itself starts on a page boundary.
        (void)::madvise(reinterpret_cast<void*>(begin), end - begin, flag);
    }

    /// True when p lies inside the mapping (tests use it to check zero-copy views).
    bool contains(const void* p) const noexcept {
        // Compared as integers: relational operators on unrelated pointers are unspecified.
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        const auto lo = reinterpret_cast<std::uintptr_t>(data_);
        return data_ != nullptr && a >= lo && a - lo < size_;
    }

private:
    /// Storage::in_memory: an anonymous mapping of shift + `size` bytes, advised for huge pages
    /// before the first touch, filled by pread from byte `shift` on and then made read-only.
    /// Closes fd.
    static MappedFile read_whole(const std::filesystem::path& path, int fd, std::size_t size, std::size_t shift) {
        void* p = ::mmap(nullptr, shift + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            fail<FormatError>("[mmap] ", path.string(), ": cannot allocate ", size, " bytes to read the file into: ",
                              std::strerror(err));
        }
#ifdef MADV_HUGEPAGE
        (void)::madvise(p, shift + size, MADV_HUGEPAGE);  // a hint: fewer TLB misses on a stream of weights
#endif
        MappedFile out(path, static_cast<const std::byte*>(p) + shift, size, shift);  // unmaps on a throw below
        auto* dst = static_cast<char*>(p) + shift;
        std::size_t done = 0;
        while (done < size) {
            const std::size_t want = std::min<std::size_t>(size - done, std::size_t{1} << 30);
            const ::ssize_t got = ::pread(fd, dst + done, want, static_cast<::off_t>(done));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                const int err = errno;
                ::close(fd);
                if (got == 0)
                    fail<FormatError>("[mmap] ", path.string(), ": the file ended at byte ", done, " of ", size,
                                      " while it was read (truncated by another process?)");
                fail<FormatError>("[mmap] ", path.string(), ": read failed at byte ", done, " of ", size, ": ",
                                  std::strerror(err));
            }
            done += static_cast<std::size_t>(got);
        }
        ::close(fd);
        (void)::mprotect(p, shift + size, PROT_READ);  // read-only like a file mapping: a stray write faults
        return out;
    }

    MappedFile(std::filesystem::path path, const std::byte* data, std::size_t size, std::size_t shift)
        : path_(std::move(path)), data_(data), size_(size), shift_(shift) {}

    void unmap() noexcept {
        if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_ - shift_), shift_ + size_);
        data_ = nullptr;
        size_ = 0;
        shift_ = 0;
    }

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t shift_ = 0;  // data_ is this far past the start of the mapping (in_memory)
};

}  // namespace hylens::io
