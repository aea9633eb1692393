#include "models/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "engine/error.h"

namespace gs::models {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }


AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  GS_CHECK(!target_.empty() && target_.has_filename(), "atomic write: expected a file path, got '{}'",
           target_.string());
  fs::path dir = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
  // A unique name beside the target: rename() is atomic only within one file system. O_EXCL makes a
  // clash with a concurrent writer impossible; the mode lets the umask decide, as for a plain create.
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path candidate =
        dir / fmt::format(".{}.tmp-{}-{}-{:08x}", target_.filename().string(), ::getpid(), counter.fetch_add(1), rd());
    fd_ = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      temp_ = candidate;
      return;
    }
    if (errno != EEXIST) break;
  }
  fail("cannot write '{}': creating a temporary file in '{}' failed: {}", target_.string(), dir.string(),
       errno_text(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t nbytes) {
  GS_CHECK(fd_ >= 0, "atomic write of '{}': the temporary file is closed", target_.string());
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    ssize_t w = ::write(fd_, p, nbytes);
    if (w < 0 && errno == EINTR) continue;
    GS_CHECK(w > 0, "cannot write '{}': writing to the temporary file '{}' failed: {}", target_.string(),
             temp_.string(), errno_text(errno));
    p += w;
    nbytes -= static_cast<size_t>(w);
  }
}

void AtomicFile::close_descriptor() {
  if (fd_ < 0) return;
  int rc = ::close(fd_);
  fd_ = -1;
  GS_CHECK(rc == 0, "cannot write '{}': closing the temporary file failed: {}", target_.string(), errno_text(errno));
}

void AtomicFile::commit() {
  GS_CHECK(!committed_, "atomic write of '{}': already committed", target_.string());
  if (fd_ < 0) {
    fd_ = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
    GS_CHECK(fd_ >= 0, "cannot write '{}': reopening the temporary file '{}' failed: {}", target_.string(),
             temp_.string(), errno_text(errno));
  }
  // The data must be on disk before the rename makes it visible, or a crash could leave the new name
  // pointing at a file with missing blocks.
  GS_CHECK(::fsync(fd_) == 0, "cannot write '{}': fsync of the temporary file failed: {}", target_.string(),
           errno_text(errno));
  close_descriptor();
  GS_CHECK(::rename(temp_.c_str(), target_.c_str()) == 0,
           "cannot write '{}': renaming the temporary file '{}' onto it failed: {}", target_.string(), temp_.string(),
           errno_text(errno));
  committed_ = true;
  // The rename itself lives in the directory; sync it so the new name survives a crash. Some file
  // systems cannot sync a directory (EINVAL); the file is in place either way.
  fs::path dir = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    int rc = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    GS_CHECK(rc == 0 || err == EINVAL || err == EROFS, "wrote '{}' but syncing its directory failed: {}",
             target_.string(), errno_text(err));
  }
}

}  // namespace gs::models
