#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/control/request.h"

namespace berth {

// berthd's control socket: a Unix stream socket, mode 0600, that answers one request line per
// connection (request.h) and closes it. Served from the management loop without blocking it:
// serve() accepts and reads what is ready and answers complete requests; a client that sends
// nothing for five seconds is dropped.
class ControlSocket {
 public:
  // The reply to a request: one JSON object, without the newline.
  using Handler = std::function<std::string(const ControlRequest&)>;

  // Listens at `path`, creating its directory if needed. A socket file left by a berthd that is
  // gone is replaced; one that a running berthd answers on is an error, and so is anything at
  // `path` that is not a socket (a regular file, a link, a folder), which is left as it is.
  static absl::StatusOr<std::unique_ptr<ControlSocket>> open(const std::string& path);
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  void serve(const Handler& handler);
  const std::string& path() const { return path_; }

 private:
  struct Client {
    int fd = -1;
    std::string received;
    uint64_t deadline_ms = 0;
  };
  ControlSocket(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void answer(Client& client, const Handler& handler);

  int fd_;
  std::string path_;
  std::vector<Client> clients_;
};

// The reply for a request that failed: {"ok": false, "error": message}.
std::string errorReply(absl::string_view message);

}  // namespace berth
