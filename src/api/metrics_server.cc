#include "berth/api/metrics_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "berth/api/client_slots.h"
#include "berth/net/socket_address.h"

namespace berth {
namespace {

constexpr uint64_t kRequestPatienceMs = 2000;
constexpr uint64_t kReplyPatienceMs = 5000;
constexpr size_t kMaxRequestBytes = 8192;

uint64_t nowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string httpHead(absl::string_view status, absl::string_view content_type,
                     size_t content_length) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", content_length, "\r\nConnection: close\r\n\r\n");
}

std::string httpReply(absl::string_view status, absl::string_view content_type,
                      absl::string_view body) {
  return absl::StrCat(httpHead(status, content_type, body.size()), body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::open(const Endpoint& listen,
                                                                   absl::Duration render_interval) {
  SocketAddress address = socketAddressOf(listen);
  sockaddr_storage& storage = address.storage;
  socklen_t& length = address.length;
  const int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("metrics: socket: ", strerror(errno)));
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&storage), length) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    const int saved = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("metrics.listen ", listen.toString(), ": ", strerror(saved)));
  }
  Endpoint bound = listen;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) == 0) {
    bound.port =
        ntohs(storage.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&storage)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(fd, bound, render_interval));
}

MetricsServer::~MetricsServer() {
  for (Client& client : clients_) close(client.fd);
  close(fd_);
}

void MetricsServer::takeRendered() {
  if (rendering_ == nullptr || !rendering_->ready()) return;
  if (rendering_->result().ok()) {
    text_ = *rendering_->result();
    render_failure_.clear();
  } else {
    render_failure_ = std::string(rendering_->result().status().message());
  }
  rendered_ms_ = render_started_ms_;
  ++renders_done_;
  ++counts_.renders;
  rendering_ = nullptr;
}

void MetricsServer::askForText(Client& client, const Renderer& render, uint64_t now_ms) {
  client.awaiting_text = true;
  client.renders_done_before = renders_done_;
  settle(client, render, now_ms);
}

void MetricsServer::settle(Client& client, const Renderer& render, uint64_t now_ms) {
  if (rendering_ != nullptr) return;  // it waits for the rendering under way
  // A text rendered recently, or a rendering done since the client asked (which may have
  // failed: the client is told so), answers it.
  const bool fresh =
      text_ != nullptr && now_ms < rendered_ms_ + static_cast<uint64_t>(render_interval_ms_);
  const bool rendered_since = renders_done_ > client.renders_done_before;
  if (!fresh && !rendered_since) {
    rendering_ = render();
    if (rendering_ == nullptr) return;  // not on this turn: asked again on the next
    render_started_ms_ = now_ms;
    takeRendered();
    if (rendering_ != nullptr) return;
  }
  answerWithText(client);
}

void MetricsServer::answerWithText(Client& client) {
  client.awaiting_text = false;
  if (!render_failure_.empty()) {
    client.head = httpReply("503 Service Unavailable", "text/plain", render_failure_ + "\n");
    if (client.head_only) client.head.resize(client.head.find("\r\n\r\n") + 4);
    return;
  }
  client.head = httpHead("200 OK", "text/plain; version=0.0.4; charset=utf-8", text_->size());
  if (!client.head_only) client.body = text_;
}

void MetricsServer::answer(Client& client, const Renderer& render, uint64_t now_ms) {
  client.answered = true;
  client.deadline_ms = now_ms + kReplyPatienceMs;
  ++counts_.answered;
  const std::string& head = client.received;
  const std::string request_line = head.substr(0, head.find("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    client.head = httpReply("400 Bad Request", "text/plain", "expected an HTTP/1.x request line\n");
    return;
  }
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    client.head = httpReply("405 Method Not Allowed", "text/plain", "only GET\n");
    return;
  }
  const bool head_only = parts[0] == "HEAD";
  client.head_only = head_only;
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path == "/metrics") {
    askForText(client, render, now_ms);
    return;
  }
  client.head = path == "/"
                    ? httpReply("200 OK", "text/plain", "berthd: metrics at /metrics\n")
                    : httpReply("404 Not Found", "text/plain", "berthd serves /metrics only\n");
  // HEAD: the headers alone.
  if (head_only) client.head.resize(client.head.find("\r\n\r\n") + 4);
}

bool MetricsServer::readRequest(Client& client, const Renderer& render, uint64_t now_ms) {
  char buffer[2048];
  for (;;) {
    const ssize_t got = recv(client.fd, buffer, sizeof(buffer), 0);
    if (got > 0) {
      client.received.append(buffer, static_cast<size_t>(got));
      if (client.received.find("\r\n\r\n") != std::string::npos) {
        answer(client, render, now_ms);
        return true;
      }
      if (client.received.size() > kMaxRequestBytes) {
        client.answered = true;
        client.deadline_ms = now_ms + kReplyPatienceMs;
        client.head =
            httpReply("431 Request Header Fields Too Large", "text/plain", "request over 8 KiB\n");
        return true;
      }
      continue;
    }
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

bool MetricsServer::send(Client& client, size_t& budget) {
  const size_t body_size = client.body == nullptr ? 0 : client.body->size();
  while (budget > 0 && client.sent < client.head.size() + body_size) {
    const bool in_head = client.sent < client.head.size();
    const char* from = in_head ? client.head.data() + client.sent
                               : client.body->data() + (client.sent - client.head.size());
    const size_t left =
        in_head ? client.head.size() - client.sent : body_size - (client.sent - client.head.size());
    const size_t length = std::min(left, budget);
    const ssize_t written = ::send(client.fd, from, length, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    client.sent += static_cast<size_t>(written);
    budget -= static_cast<size_t>(written);
    if (static_cast<size_t>(written) < length) return false;
  }
  return client.sent == client.head.size() + body_size;
}

void MetricsServer::serve(const Renderer& render) {
  const uint64_t now = nowMs();
  acceptClients(
      fd_, clients_, kMaxClients, now + kRequestPatienceMs, counts_,
      [](const Client& client) { return !client.answered; },
      [&](Client& client) { return readRequest(client, render, now); });
  takeRendered();
  size_t budget = kBytesPerServe;
  serveEach(clients_, first_served_, [&](Client& client) {
    bool done = false;
    if (!client.answered) done = !readRequest(client, render, now);
    if (client.awaiting_text) settle(client, render, now);
    // The reply patience is the client's time to read; waiting for a rendering is berthd's.
    if (client.awaiting_text) client.deadline_ms = now + kReplyPatienceMs;
    if (!done && client.answered && !client.awaiting_text) done = send(client, budget);
    if (!done && now >= client.deadline_ms) {
      ++counts_.cut_at_deadline;
      done = true;
    }
    return done;
  });
}

}  // namespace berth
