#include "tools/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "engine/error.h"
#include "models/atomic_file.h"

namespace gs::tools {

namespace fs = std::filesystem;

RunDirectoryLock::RunDirectoryLock(const fs::path& root) : root_(root) {
  GS_CHECK(!root.empty(), "train: expected a run directory (--out or output.dir), got an empty path");
  std::error_code ec;
  fs::create_directories(root, ec);
  GS_CHECK(!ec || fs::is_directory(root), "train: cannot create the run directory '{}': {}", root.string(),
           ec.message());
  GS_CHECK(fs::is_directory(root, ec), "train: the run directory '{}' exists but is not a directory", root.string());
  const fs::path lock = root / ".lock";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  GS_CHECK(fd_ >= 0, "train: cannot open the lock file '{}': {}", lock.string(), models::errno_text(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    GS_CHECK(err != EWOULDBLOCK,
             "train: the run directory '{}' is in use by another run ({}); wait for it to end or choose another --out",
             root.string(), n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("its process is unknown"));
    fail("train: cannot lock '{}': {}", lock.string(), models::errno_text(err));
  }
  char host[128] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("pid {} on {} since {:%Y-%m-%d %H:%M:%S}", ::getpid(), host,
                                     fmt::localtime(std::time(nullptr)));
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    fail("train: cannot write the lock file '{}': {}", lock.string(), models::errno_text(errno));
  struct stat st{};
  GS_CHECK(::stat(root.c_str(), &st) == 0, "train: cannot stat '{}': {}", root.string(), models::errno_text(errno));
  dev_ = st.st_dev;
  ino_ = st.st_ino;
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock; the file stays (removing it would race)
}

void RunDirectoryLock::check_unchanged(const std::string& what) const {
  struct stat st{};
  if (::stat(root_.c_str(), &st) != 0)
    fail("train: the run directory '{}' is gone ({}) while the run was writing {}; the run stops here (the files "
         "it wrote went with the directory)",
         root_.string(), models::errno_text(errno), what);
  GS_CHECK(st.st_dev == dev_ && st.st_ino == ino_,
           "train: the run directory '{}' was removed and replaced by another one while the run was writing {}; the "
           "run stops here rather than write into the new directory",
           root_.string(), what);
}

int RunDirectoryLock::remove_stale_temporaries() const {
  int removed = 0;
  std::error_code ec;
  for (const fs::path& dir : {root_, root_ / "data", root_ / "maps"})
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp-") != std::string::npos && entry.is_regular_file(ec)) {
      fs::remove(entry.path(), ec);
      if (!ec) ++removed;
    }
  }
  return removed;
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::error_code ec;
  GS_CHECK(!fs::is_directory(path, ec), "cannot write '{}': a directory is in the way", path.string());
  models::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace gs::tools
