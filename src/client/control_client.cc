#include "berth/client/control_client.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/util/json_writer.h"

namespace berth {

std::string controlRequestJson(const std::string& command, const ControlFields& fields) {
  JsonWriter json;
  json.beginObject().key("command").value(command);
  for (const auto& [key, value] : fields) {
    if (!value.empty()) json.key(key).value(value);
  }
  json.endObject();
  return json.str();
}

absl::StatusOr<std::string> sendControlRequest(const std::string& socket_path,
                                               const std::string& request_json,
                                               absl::Duration timeout) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("--socket ", socket_path, " is too long"));
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  const timeval wait = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd);
    switch (error) {
      case ENOENT:
        return absl::NotFoundError(absl::StrCat("no control socket at ", socket_path,
                                                ": is berthd running? (or give --socket PATH)"));
      case EACCES:
        return absl::PermissionDeniedError(absl::StrCat("permission denied on ", socket_path,
                                                        ": run as root or as berthd's user"));
      case ECONNREFUSED:
        return absl::UnavailableError(absl::StrCat("berthd is not running: nothing answers on ",
                                                   socket_path, " (a stale socket file)"));
      default:
        return absl::UnavailableError(absl::StrCat("connect ", socket_path, ": ", strerror(error)));
    }
  }
  const std::string line = request_json + "\n";
  if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("send to ", socket_path, ": ", strerror(errno)));
  }
  std::string reply;
  char buffer[4096];
  for (;;) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    reply.append(buffer, static_cast<size_t>(got));
    if (reply.back() == '\n') break;
  }
  close(fd);
  if (reply.empty()) {
    return absl::UnavailableError(absl::StrCat("berthd closed ", socket_path, " without a reply"));
  }
  if (reply.back() == '\n') reply.pop_back();
  return reply;
}

}  // namespace berth
