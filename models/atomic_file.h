// Atomic file replacement, shared by every writer of run outputs (checkpoints, NetCDF, pictures).
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>

namespace gs::models {

// Replaces a file atomically. The content is written to temp_path() (a fresh file beside the target,
// so the final rename stays within one file system); commit() flushes it to disk, renames it over
// the target and syncs the directory, so the target is either the old file or the complete new one.
// Destroying an uncommitted AtomicFile removes the temporary file. Used by the NetCDF writer too.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& temp_path() const { return temp_; }
  const std::filesystem::path& target() const { return target_; }
  // Writes all bytes at the current end of the temporary file.
  void write(const void* data, size_t nbytes);
  // Closes the descriptor opened by the constructor, so another library (NetCDF) can write the
  // temporary file by its path; commit() reopens it to sync it.
  void close_descriptor();
  void commit();

 private:
  std::filesystem::path target_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// strerror(err), for messages.
std::string errno_text(int err);

}  // namespace gs::models
