// The run directory of `gradsphere train` as a resource one run owns: an exclusive lock for the
// run's lifetime (a second run on the same --out gets an error naming the first run's process), a
// check before each write that the directory is still the one the run started in (removed or
// replaced mid-run is an error naming the path, not metrics written into a deleted inode), and the
// clean-up of temporary files a killed run left behind.
#pragma once
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace gs::tools {

class RunDirectoryLock {
 public:
  // Creates `root` (and its parents) when missing, then takes the lock on root/.lock, which records
  // "pid <P> on <host> since <time>" for the message another run gets. Throws gs::Error naming the
  // path and the cause when root cannot be created, is not a directory, or is held by another run.
  explicit RunDirectoryLock(const std::filesystem::path& root);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

  // Throws when root no longer exists or is another directory than at lock time (removed and
  // recreated), naming it and `what` was about to be written.
  void check_unchanged(const std::string& what) const;
  // write() between two such checks: when it fails because the directory went away while it ran
  // (a rename into a removed directory), the error says so rather than naming the lost file.
  template <typename F>
  void write_checked(const std::string& what, F&& write) const {
    check_unchanged(what);
    try {
      write();
    } catch (...) {
      check_unchanged(what);
      throw;
    }
  }
  // Removes the temporary files of interrupted atomic writes (".NAME.tmp-*", models/atomic_file.h) in
  // root and its data/ and maps/: with the lock held, no other run can be writing them. Returns how
  // many were removed.
  int remove_stale_temporaries() const;
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Writes `text` to `path` atomically, or throws naming the path and the cause (a directory in the
// way, a read-only file system, a full disk).
void write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace gs::tools
