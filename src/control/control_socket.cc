#include "berth/control/control_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

constexpr uint64_t kClientPatienceMs = 5000;
constexpr size_t kMaxClients = 64;

uint64_t nowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

bool addressFor(const std::string& path, sockaddr_un& address) {
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return false;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Whether something answers at `path`: another berthd.
bool someoneListens(const sockaddr_un& address) {
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return false;
  const bool answered =
      connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  close(probe);
  return answered;
}

}  // namespace

std::string errorReply(absl::string_view message) {
  JsonWriter json;
  json.beginObject().key("ok").value(false).key("error").value(message).endObject();
  return json.str();
}

absl::StatusOr<std::unique_ptr<ControlSocket>> ControlSocket::open(const std::string& path) {
  sockaddr_un address;
  if (!addressFor(path, address)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path '", path,
                                                   "' is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  if (someoneListens(address)) {
    return absl::AlreadyExistsError(
        absl::StrCat("control socket ", path, ": another berthd answers there"));
  }
  // Only a socket file that a berthd that is gone left behind is replaced: a mistyped
  // --control_socket must not delete a config file, nor follow a link somewhere else.
  struct stat existing;
  if (lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "control socket ", path, ": ",
          S_ISLNK(existing.st_mode)   ? "a symbolic link"
          : S_ISDIR(existing.st_mode) ? "a folder"
                                      : "a file",
          " that is not a socket is there; berthd replaces only a stale socket (remove it, or "
          "give --control_socket another path)"));
    }
    unlink(path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("control socket: ", strerror(errno)));
  // Owner-only from the start: the mode is set before anyone can connect.
  const mode_t previous = umask(0177);
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  umask(previous);
  if (bound != 0 || listen(fd, 16) != 0) {
    const int saved = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("control socket ", path, ": ", strerror(saved)));
  }
  chmod(path.c_str(), 0600);
  return std::unique_ptr<ControlSocket>(new ControlSocket(fd, path));
}

ControlSocket::~ControlSocket() {
  for (Client& client : clients_) close(client.fd);
  close(fd_);
  unlink(path_.c_str());
}

void ControlSocket::answer(Client& client, const Handler& handler) {
  const size_t end = client.received.find('\n');
  absl::StatusOr<ControlRequest> request =
      parseControlRequest(absl::string_view(client.received).substr(0, end));
  std::string reply = request.ok() ? handler(*request) : errorReply(request.status().message());
  reply.push_back('\n');
  // Replies are small; a blocking write with a timeout keeps this simple and bounded.
  fcntl(client.fd, F_SETFL, fcntl(client.fd, F_GETFL) & ~O_NONBLOCK);
  timeval timeout{1, 0};
  setsockopt(client.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  size_t sent = 0;
  while (sent < reply.size()) {
    const ssize_t written = send(client.fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
    if (written <= 0) break;
    sent += static_cast<size_t>(written);
  }
}

void ControlSocket::serve(const Handler& handler) {
  for (;;) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (clients_.size() >= kMaxClients) {
      close(fd);
      continue;
    }
    clients_.push_back(Client{fd, {}, nowMs() + kClientPatienceMs});
  }
  const uint64_t now = nowMs();
  for (size_t i = 0; i < clients_.size();) {
    Client& client = clients_[i];
    bool done = false;
    char buffer[1024];
    for (;;) {
      const ssize_t got = recv(client.fd, buffer, sizeof(buffer), 0);
      if (got > 0) {
        client.received.append(buffer, static_cast<size_t>(got));
        if (client.received.find('\n') != std::string::npos ||
            client.received.size() > kMaxControlRequestBytes) {
          answer(client, handler);
          done = true;
          break;
        }
        continue;
      }
      if (got == 0) {
        // The client closed its side: answer what it sent, if anything.
        if (!client.received.empty()) answer(client, handler);
        done = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        done = true;
      }
      break;
    }
    if (done || now >= client.deadline_ms) {
      close(client.fd);
      clients_[i] = clients_.back();
      clients_.pop_back();
    } else {
      ++i;
    }
  }
}

}  // namespace berth
