// config_file.cpp — see config_file.h.
#include "config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "error.h"

namespace rtce {
namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every exit path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

ConfigFileText read_config_file(const std::string& path, std::string_view what, size_t max_bytes) {
  const std::string where = std::string(what) + " '" + path + "'";
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) throw ConfigError(where + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw ConfigError(where + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw ConfigError(where + ": is " + file_type_name(st.st_mode) + "; expected a regular file");
  const std::string limit = " (the limit is " + std::to_string(max_bytes) + " bytes)";
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw ConfigError(where + ": is " + std::to_string(st.st_size) + " bytes, too large" + limit);
  ConfigFileText out;
  out.mode = st.st_mode;
  // Read at most one byte past the limit: a file that grows while being read is refused too.
  out.text.resize(max_bytes + 1);
  size_t got = 0;
  while (got < out.text.size()) {
    const ssize_t n = ::read(fd.get(), out.text.data() + got, out.text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(where + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) throw ConfigError(where + ": grew past the size limit while being read" + limit);
  out.text.resize(got);
  out.text.shrink_to_fit();
  return out;
}

std::optional<std::string> secret_file_mode_warning(const std::string& path, std::string_view what,
                                                    mode_t mode) {
  const bool world_readable = mode & S_IROTH;
  const bool writable_by_others = mode & (S_IWOTH | S_IWGRP);
  if (!world_readable && !writable_by_others) return std::nullopt;
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode & 07777));
  std::string problem = world_readable && writable_by_others ? "readable by every user and writable by others"
                        : world_readable                     ? "readable by every user"
                                                             : "writable by other users";
  return std::string(what) + " '" + path + "' is " + problem + " (mode " + octal +
         "); it holds a secret: chmod 600 (or 640 for a group of services)";
}

}  // namespace rtce
