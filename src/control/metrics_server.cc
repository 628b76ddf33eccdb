#include "berth/control/metrics_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

constexpr uint64_t kRequestPatienceMs = 2000;
constexpr uint64_t kReplyPatienceMs = 5000;
constexpr size_t kMaxRequestBytes = 8192;
constexpr size_t kMaxClients = 64;

uint64_t nowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string httpReply(absl::string_view status, absl::string_view content_type,
                      absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::open(const Endpoint& listen) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (listen.address.isV4()) {
    auto* address = reinterpret_cast<sockaddr_in*>(&storage);
    address->sin_family = AF_INET;
    address->sin_port = htons(listen.port);
    std::memcpy(&address->sin_addr, listen.address.bytes.data(), 4);
    length = sizeof(sockaddr_in);
  } else {
    auto* address = reinterpret_cast<sockaddr_in6*>(&storage);
    address->sin6_family = AF_INET6;
    address->sin6_port = htons(listen.port);
    std::memcpy(&address->sin6_addr, listen.address.bytes.data(), 16);
    length = sizeof(sockaddr_in6);
  }
  const int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("metrics: socket: ", strerror(errno)));
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&storage), length) != 0 || ::listen(fd, 16) != 0) {
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
  return std::unique_ptr<MetricsServer>(new MetricsServer(fd, bound));
}

MetricsServer::~MetricsServer() {
  for (Client& client : clients_) close(client.fd);
  close(fd_);
}

std::string MetricsServer::answer(const std::string& head, const Renderer& render) {
  const std::string request_line = head.substr(0, head.find("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return httpReply("400 Bad Request", "text/plain", "expected an HTTP/1.x request line\n");
  }
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    return httpReply("405 Method Not Allowed", "text/plain", "only GET\n");
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  std::string reply;
  if (path == "/metrics") {
    reply = httpReply("200 OK", "text/plain; version=0.0.4; charset=utf-8", render());
  } else if (path == "/") {
    reply = httpReply("200 OK", "text/plain", "berthd: metrics at /metrics\n");
  } else {
    reply = httpReply("404 Not Found", "text/plain", "berthd serves /metrics only\n");
  }
  // HEAD: the headers alone.
  if (parts[0] == "HEAD") reply.resize(reply.find("\r\n\r\n") + 4);
  return reply;
}

void MetricsServer::serve(const Renderer& render) {
  const uint64_t now = nowMs();
  for (;;) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    if (clients_.size() >= kMaxClients) {
      close(fd);
      continue;
    }
    clients_.push_back(Client{fd, {}, {}, 0, now + kRequestPatienceMs});
  }
  for (size_t i = 0; i < clients_.size();) {
    Client& client = clients_[i];
    bool done = false;
    if (client.reply.empty()) {
      char buffer[2048];
      for (;;) {
        const ssize_t got = recv(client.fd, buffer, sizeof(buffer), 0);
        if (got > 0) {
          client.received.append(buffer, static_cast<size_t>(got));
          if (client.received.find("\r\n\r\n") != std::string::npos) {
            client.reply = answer(client.received, render);
            client.deadline_ms = now + kReplyPatienceMs;
            break;
          }
          if (client.received.size() > kMaxRequestBytes) {
            client.reply = httpReply("431 Request Header Fields Too Large", "text/plain",
                                     "request over 8 KiB\n");
            break;
          }
          continue;
        }
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) done = true;
        break;
      }
    }
    while (!done && !client.reply.empty() && client.sent < client.reply.size()) {
      const ssize_t written = send(client.fd, client.reply.data() + client.sent,
                                   client.reply.size() - client.sent, MSG_NOSIGNAL);
      if (written > 0) {
        client.sent += static_cast<size_t>(written);
        continue;
      }
      if (written < 0 && errno != EAGAIN && errno != EWOULDBLOCK) done = true;
      break;
    }
    if (!client.reply.empty() && client.sent == client.reply.size()) done = true;
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
