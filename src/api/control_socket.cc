#include "berth/api/control_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "berth/api/client_slots.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

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

std::string defaultReadOnlySocketPath(absl::string_view control_socket) {
  if (absl::EndsWith(control_socket, ".sock")) {
    return absl::StrCat(control_socket.substr(0, control_socket.size() - 5), "-ro.sock");
  }
  return absl::StrCat(control_socket, "-ro");
}

absl::StatusOr<std::unique_ptr<ControlSocket>> ControlSocket::open(
    const ControlSocketOptions& options) {
  const std::string& path = options.path;
  const std::string& role = options.role;
  sockaddr_un address;
  if (!addressFor(path, address)) {
    return absl::InvalidArgumentError(absl::StrCat(role, " path '", path, "' is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  if (someoneListens(address)) {
    return absl::AlreadyExistsError(
        absl::StrCat(role, " ", path, ": another berthd answers there"));
  }
  // Only a socket file that a berthd that is gone left behind is replaced: a mistyped path must
  // not delete a config file, nor follow a link somewhere else.
  struct stat existing;
  if (lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return absl::AlreadyExistsError(absl::StrCat(
          role, " ", path, ": ",
          S_ISLNK(existing.st_mode)   ? "a symbolic link"
          : S_ISDIR(existing.st_mode) ? "a folder"
                                      : "a file",
          " that is not a socket is there; berthd replaces only a stale socket (remove it, or "
          "give berthd another path)"));
    }
    unlink(path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat(role, ": ", strerror(errno)));
  // Owner-only from the start: the mode is widened, if at all, once the group is set.
  const mode_t previous = umask(0177);
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  umask(previous);
  if (bound != 0 || listen(fd, SOMAXCONN) != 0) {
    const int saved = errno;
    close(fd);
    return absl::InternalError(absl::StrCat(role, " ", path, ": ", strerror(saved)));
  }
  if (options.group && chown(path.c_str(), static_cast<uid_t>(-1), *options.group) != 0) {
    const int saved = errno;
    close(fd);
    unlink(path.c_str());
    return absl::PermissionDeniedError(absl::StrCat(role, " ", path, ": cannot give it group ",
                                                    *options.group, ": ", strerror(saved)));
  }
  chmod(path.c_str(), options.mode);
  return std::unique_ptr<ControlSocket>(new ControlSocket(fd, options));
}

ControlSocket::~ControlSocket() {
  for (Client& client : clients_) close(client.fd);
  close(fd_);
  unlink(options_.path.c_str());
}

bool ControlSocket::readRequest(Client& client) {
  char buffer[1024];
  for (;;) {
    const ssize_t got = recv(client.fd, buffer, sizeof(buffer), 0);
    if (got > 0) {
      client.received.append(buffer, static_cast<size_t>(got));
      if (client.received.find('\n') != std::string::npos ||
          client.received.size() > kMaxControlRequestBytes) {
        client.request_complete = true;
        return true;
      }
      continue;
    }
    if (got == 0) {
      // The client closed its side: answer what it sent, if anything.
      client.request_complete = !client.received.empty();
      return client.request_complete;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

std::unique_ptr<ReplyStream> ControlSocket::answer(const Client& client,
                                                   const Handler& handler) const {
  const size_t end = client.received.find('\n');
  absl::StatusOr<ControlRequest> request =
      parseControlRequest(absl::string_view(client.received).substr(0, end));
  if (!request.ok()) return wholeReply(errorReply(request.status().message()));
  const std::vector<std::string>& served = options_.commands;
  if (!served.empty() &&
      std::find(served.begin(), served.end(), request->command) == served.end()) {
    return wholeReply(errorReply(absl::StrCat(
        "the ", options_.role, " ", options_.path, " serves only ", absl::StrJoin(served, ", "),
        "; '", request->command, "' needs berthd's control socket")));
  }
  return handler(*request);
}

bool ControlSocket::writeReply(Client& client, size_t& produced, bool& caught_up) {
  caught_up = client.out.size() == client.sent;
  for (bool first_send = true;; first_send = false) {
    while (client.reply != nullptr && client.out.size() - client.sent < kPieceBytes &&
           produced < kBytesPerServe) {
      const size_t before = client.out.size();
      const ReplyStream::Progress progress = client.reply->next(client.out, kPieceBytes);
      produced += client.out.size() - before;
      if (progress == ReplyStream::Progress::kDone) {
        client.out.push_back('\n');
        client.reply.reset();
      } else if (progress == ReplyStream::Progress::kWaiting) {
        break;
      }
    }
    const size_t unsent = client.out.size() - client.sent;
    // The client has taken all there is: the rest waits on berthd.
    if (unsent == 0) return client.reply == nullptr;
    const ssize_t written =
        send(client.fd, client.out.data() + client.sent, unsent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    if (first_send && !caught_up) caught_up = static_cast<size_t>(written) == unsent;
    client.sent += static_cast<size_t>(written);
    if (client.sent == client.out.size()) {
      client.out.clear();
      client.sent = 0;
    } else if (client.sent >= kPieceBytes) {
      client.out.erase(0, client.sent);
      client.sent = 0;
    }
    // The client's buffer is full: the rest waits for a later call.
    if (static_cast<size_t>(written) < unsent) return false;
  }
}

void ControlSocket::serve(const Handler& handler) {
  const uint64_t now = nowMs();
  acceptClients(
      fd_, clients_, kMaxClients, now + absl::ToInt64Milliseconds(kRequestPatience), counts_,
      [](const Client& client) { return !client.request_complete; },
      [this](Client& client) { return readRequest(client); });
  size_t produced = 0;
  size_t started = 0;
  serveEach(clients_, first_served_, [&](Client& client) {
    bool done = false;
    if (!client.request_complete) done = !readRequest(client);
    if (!done && client.request_complete && !client.replying && started < kRequestsPerServe) {
      ++started;
      ++counts_.answered;
      client.replying = true;
      client.reply = answer(client, handler);
      client.deadline_ms = now + absl::ToInt64Milliseconds(options_.reply_patience);
      client.visited_ms = now;
    }
    if (!done && client.replying) {
      bool caught_up = false;
      done = writeReply(client, produced, caught_up);
      // A client that took all it was given since the last visit waited on berthd (a rendering,
      // this loop's turns, a turn's budget spent on other replies): that time is not its own.
      // One whose socket still held some of it was slower than berthd, and pays for the wait.
      if (caught_up) client.deadline_ms += now - client.visited_ms;
      client.visited_ms = now;
    }
    if (!done && now >= client.deadline_ms) {
      ++counts_.cut_at_deadline;
      done = true;
    }
    return done;
  });
}

}  // namespace berth
