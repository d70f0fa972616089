// Untrusted input and output paths (see file_io.h). POSIX calls rather than iostreams: the
// type of a file must be taken from the descriptor that is read (fstat), and a device must be
// opened without O_CREAT/rename so that it is never replaced.
#include "isa/file_io.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace tilus {
namespace {

Status ioError(const std::string &path, const std::string &message) {
  Location loc;
  loc.file = path;
  return Status::error(ErrorCode::Io, message, loc);
}

std::string errnoText() { return std::strerror(errno); }

/// What a file of mode `mode` is, for messages.
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const { return fd_; }
  /// close() and report its failure (a full disk can surface only here).
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

private:
  int fd_;
};

bool writeAll(int fd, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

/// `path` with symbolic links followed to the file they name (which may not exist yet).
/// A link loop or a chain longer than 40 is an error, as for the kernel.
Expected<std::string> followLinks(const std::string &path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return p.string();
    std::error_code ec;
    fs::path target = fs::read_symlink(p, ec);
    if (ec)
      return ioError(path, "cannot read the symbolic link " + p.string() + ": " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return ioError(path, "too many levels of symbolic links");
}

Status writeInPlace(const std::string &shown, const std::string &path,
                    std::span<const uint8_t> data) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0)
    return ioError(shown, "cannot open for writing: " + errnoText());
  if (!writeAll(fd.get(), data) || !fd.close())
    return ioError(shown, "write failed: " + errnoText());
  return Status::success();
}

Status writeAtomically(const std::string &shown, const std::string &path,
                       std::span<const uint8_t> data, mode_t mode, bool keepMode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0)
    return ioError(shown, "cannot create " + tmp + ": " + errnoText());
  if (keepMode)
    (void)::fchmod(fd.get(), mode); // the replaced file's permissions, not the umask's
  if (!writeAll(fd.get(), data) || !fd.close()) {
    std::string why = errnoText();
    ::unlink(tmp.c_str());
    return ioError(shown, "cannot write " + tmp + ": " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errnoText();
    ::unlink(tmp.c_str());
    return ioError(shown, "cannot rename " + tmp + " to " + path + ": " + why);
  }
  return Status::success();
}

/// The file an output path names, its links followed (an empty path is an error).
Expected<std::string> outputTarget(const std::string &path) {
  if (path.empty())
    return ioError(path, "empty output file name");
  return followLinks(path);
}

} // namespace

Expected<std::vector<uint8_t>> readRegularFile(const std::string &path, uint64_t maxBytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0)
    return ioError(path, "cannot open file: " + errnoText());
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return ioError(path, "cannot stat file: " + errnoText());
  if (!S_ISREG(st.st_mode))
    return ioError(path, std::string("is ") + kindOf(st.st_mode) + ", not a regular file");
  uint64_t size = uint64_t(st.st_size);
  if (size > maxBytes)
    return ioError(path, "file of " + std::to_string(size) + " bytes exceeds the limit of " +
                             std::to_string(maxBytes) + " bytes");
  std::vector<uint8_t> bytes(size_t(size) + 1); // one more: a file that grew is detected
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return ioError(path, "read failed: " + errnoText());
    if (n == 0)
      break;
    done += size_t(n);
  }
  if (done > size)
    return ioError(path, "file grew while it was read");
  bytes.resize(done);
  return bytes;
}

Status checkOutputPath(const std::string &path) {
  namespace fs = std::filesystem;
  auto target = outputTarget(path);
  if (!target.ok())
    return target.status();
  struct stat st;
  if (::stat(target->c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return ioError(path, "is a directory");
    return Status::success();
  }
  fs::path dir = fs::path(*target).parent_path();
  if (dir.empty())
    dir = ".";
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return ioError(path, "directory " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    return ioError(path, "directory " + dir.string() + " is not writable");
  return Status::success();
}

Status writeOutputFile(const std::string &path, std::span<const uint8_t> data) {
  auto target = outputTarget(path);
  if (!target.ok())
    return target.status();
  struct stat st;
  if (::stat(target->c_str(), &st) != 0)
    return writeAtomically(path, *target, data, 0666, false); // new: umask applies
  if (S_ISDIR(st.st_mode))
    return ioError(path, "is a directory");
  if (!S_ISREG(st.st_mode))
    return writeInPlace(path, *target, data);
  return writeAtomically(path, *target, data, st.st_mode & 07777, true);
}

} // namespace tilus
