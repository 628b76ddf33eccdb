#include "berth/util/whole_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::Status writeFileWhole(const std::string& path, absl::string_view contents, mode_t mode) {
  std::string temporary = path + ".XXXXXX";
  const int fd = mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", temporary, ": ", strerror(errno)));
  }
  auto fail = [&](absl::string_view what) {
    const std::string message = absl::StrCat(what, " ", temporary, ": ", strerror(errno));
    close(fd);
    unlink(temporary.c_str());
    return absl::UnavailableError(message);
  };
  if (fchmod(fd, mode) != 0) return fail("cannot set the mode of");
  for (size_t written = 0; written < contents.size();) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("cannot sync");
  close(fd);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string message =
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", strerror(errno));
    unlink(temporary.c_str());
    return absl::UnavailableError(message);
  }
  // The rename itself lasts only once the directory's entry is on disk.
  const std::string directory = directoryOf(path);
  const int directory_fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open ", directory, " to sync it: ", strerror(errno)));
  }
  const bool synced = fsync(directory_fd) == 0;
  const int sync_errno = errno;
  close(directory_fd);
  if (!synced) {
    return absl::UnavailableError(
        absl::StrCat("cannot sync ", directory, ": ", strerror(sync_errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> readFileWhole(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int error = errno;
    const std::string why = absl::StrCat("cannot read ", path, ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(why) : absl::UnavailableError(why);
  }
  std::stringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  return contents.str();
}

}  // namespace berth
