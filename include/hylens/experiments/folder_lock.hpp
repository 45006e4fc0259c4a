#pragma once
// One writer per result folder. A study or a merge holds an exclusive flock(2) on the folder's
// `.hylens.lock` while it writes there: a second run into the same folder at the same time (two
// processes, or two threads of one Python process) is refused with an error instead of
// interleaving its records and run.json with the first's. The kernel drops the lock when its
// holder exits, killed or not, so a killed run resumes without a stale lock; the file itself
// stays (removing it would let a third run lock a new file while the second holds the old).
// On a file system without a working flock (a Lustre client mounted without -o flock answers
// ENOSYS; ENOLCK, EOPNOTSUPP) the folder is used unlocked, with a note on stderr.

#include <fcntl.h>     // ::open, O_RDWR, O_CREAT, O_CLOEXEC
#include <sys/file.h>  // ::flock, LOCK_EX, LOCK_NB
#include <unistd.h>    // ::close

#include <cerrno>       // errno, EWOULDBLOCK, EINTR
#include <cstdio>       // std::fprintf
#include <cstring>      // std::strerror
#include <filesystem>   // std::filesystem
#include <string_view>  // std::string_view

#include "../core/error.hpp"

namespace hylens::experiments {

/// Makes `dir` (if missing) and holds the lock on it until destroyed; `who` names the study
/// or merge in the error.
class FolderLock {
public:
    FolderLock(const std::filesystem::path& dir, std::string_view who) {
        std::filesystem::create_directories(dir);
        const std::filesystem::path file = dir / ".hylens.lock";
        fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        check(fd_ >= 0, "[", who, "] cannot open ", file.string(), ": ", std::strerror(errno));
        int rc = 0;
        do rc = ::flock(fd_, LOCK_EX | LOCK_NB);
        while (rc != 0 && errno == EINTR);
        if (rc == 0) return;
        const int e = errno;
        if (e != EWOULDBLOCK) {  // no working flock here: unlocked
            std::fprintf(stderr, "[%.*s] note: cannot lock %s (%s): the folder is used unlocked; run one study or merge "
                         "into it at a time\n", static_cast<int>(who.size()), who.data(), file.c_str(), std::strerror(e));
            return;
        }
        ::close(fd_);
        fd_ = -1;
        fail("[", who, "] ", dir.string(), " is in use: another study or merge is writing there now (it holds ",
             file.string(), "); wait for it to finish or choose another output folder");
    }
    ~FolderLock() {
        if (fd_ >= 0) ::close(fd_);  // releases the lock
    }
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace hylens::experiments
