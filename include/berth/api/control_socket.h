#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/api/client_slots.h"
#include "berth/api/reply_stream.h"
#include "berth/api/request.h"

namespace berth {

// How a control socket is set up.
struct ControlSocketOptions {
  std::string path;
  // The file's mode: 0600 for the full socket. The read-only socket is 0666, or 0660 with
  // `group` as its group, so that berth-announcer and monitoring need no admin rights.
  mode_t mode = 0600;
  std::optional<gid_t> group;
  // The commands this socket serves; empty serves every command. Others are refused with an
  // error that names the socket and what it serves.
  std::vector<std::string> commands;
  // What this socket is called in errors and logs.
  std::string role = "control socket";
  // How long a client has to read its reply. The clock stops while the reply waits on berthd
  // itself (a reload's build, a rendering, the next turn of the loop, a turn's budget spent on
  // other replies): whenever the client has taken all it was given, the time since it was last
  // given more is not the client's.
  absl::Duration reply_patience = absl::Seconds(10);
};

// berthd's control socket: a Unix stream socket that answers one request line per connection
// (request.h) and closes it. Served from the management loop, which it never holds up
// (docs/architecture.md, "The management loop"):
//   - reads and writes never block: each connection has its own buffers;
//   - a reply is produced in pieces (reply_stream.h), at most a piece ahead of what the kernel
//     has taken for the client, and each call of serve() produces and answers a bounded amount;
//   - a client has kRequestPatience to send its request and its reply_patience to read its
//     reply (the time the reply waits on berthd not counted), then it is cut;
//   - at kMaxClients connections, a new one takes the place of the oldest that has not yet sent
//     a request, so idle connections cannot lock out `status` and `announce`; only when every
//     connection is being answered is the new one refused.
class ControlSocket {
 public:
  // The reply to a request: one JSON object, without the newline, in pieces.
  using Handler = std::function<std::unique_ptr<ReplyStream>(const ControlRequest&)>;

  static constexpr absl::Duration kRequestPatience = absl::Seconds(2);
  static constexpr size_t kMaxClients = 256;
  // How much of a reply is produced ahead of the reader, and how much serve() produces and how
  // many requests it starts answering per call.
  static constexpr size_t kPieceBytes = 64 * 1024;
  static constexpr size_t kBytesPerServe = 256 * 1024;
  static constexpr size_t kRequestsPerServe = 32;

  // What happened to connections so far, for berthd's metrics.
  struct ClientCounts {
    uint64_t accepted = 0;
    uint64_t answered = 0;
    uint64_t evicted_idle = 0;  // made room for a newer connection before sending a request
    uint64_t refused_full = 0;  // every place taken by a connection being answered
    uint64_t cut_at_deadline = 0;
  };

  // Listens at `path`, creating its directory if needed. A socket file left by a berthd that is
  // gone is replaced; one that a running berthd answers on is an error, and so is anything at
  // `path` that is not a socket (a regular file, a link, a folder), which is left as it is.
  static absl::StatusOr<std::unique_ptr<ControlSocket>> open(const ControlSocketOptions& options);
  static absl::StatusOr<std::unique_ptr<ControlSocket>> open(const std::string& path) {
    ControlSocketOptions options;
    options.path = path;
    return open(options);
  }
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  // Accepts, reads, answers and writes what is ready; never waits.
  void serve(const Handler& handler);
  const std::string& path() const { return options_.path; }
  const ClientCounts& counts() const { return counts_; }
  size_t connections() const { return clients_.size(); }

 private:
  struct Client : ClientConnection {
    bool request_complete = false;
    std::unique_ptr<ReplyStream> reply;  // while pieces remain to be produced
    bool replying = false;
    std::string out;  // produced, not yet sent from `sent` on
    size_t sent = 0;
    uint64_t visited_ms = 0;  // when serve() last wrote to it, or answered it
  };
  ControlSocket(int fd, ControlSocketOptions options) : fd_(fd), options_(std::move(options)) {}
  // Reads what the client sent; false when it closed or failed without a request.
  bool readRequest(Client& client);
  std::unique_ptr<ReplyStream> answer(const Client& client, const Handler& handler) const;
  // Produces and sends what the budgets allow; true once the whole reply is sent or the
  // client is gone. `caught_up`: whether the client had taken all it had been given before
  // this call (nothing was left unsent, or the first send took all that was).
  bool writeReply(Client& client, size_t& produced, bool& caught_up);

  int fd_;
  ControlSocketOptions options_;
  std::vector<Client> clients_;
  size_t first_served_ = 0;  // turns round, so that no client always comes first
  ClientCounts counts_;
};

// The commands the read-only socket serves: what berth-announcer and monitoring need, none that
// changes what berthd forwards.
inline const std::vector<std::string>& readOnlyCommands() {
  static const auto* commands = new std::vector<std::string>{"status", "stats", "announce"};
  return *commands;
}

// The read-only socket's default path beside the control socket: "/run/berth/berth.sock" gives
// "/run/berth/berth-ro.sock"; a path not ending in ".sock" gets "-ro" appended.
std::string defaultReadOnlySocketPath(absl::string_view control_socket);

// The reply for a request that failed: {"ok": false, "error": message}.
std::string errorReply(absl::string_view message);

}  // namespace berth
