#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace berth {

// A loopback listener on its own thread, answering each connection per `reply`: nullptr closes at
// once, "" keeps the connection open without a word, anything else is written after the request.
class Listener {
 public:
  explicit Listener(const char* reply) : reply_(reply) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    listen(fd_, 512);
    thread_ = std::thread([this] { serve(); });
  }
  ~Listener() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) close(fd);
    close(fd_);
  }
  uint16_t port() const { return port_; }
  // The bytes of the last request read (one read of it), for a listener that answers.
  std::string lastRequest() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return request_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd waiting{fd_, POLLIN, 0};
      if (::poll(&waiting, 1, 20) <= 0) continue;
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) continue;
      if (reply_ == nullptr) {
        close(client);
      } else if (reply_[0] == '\0') {
        held_.push_back(client);
      } else {
        char request[1024];
        const ssize_t length = recv(client, request, sizeof(request), 0);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          request_.assign(request, length > 0 ? static_cast<size_t>(length) : 0);
        }
        send(client, reply_, strlen(reply_), MSG_NOSIGNAL);
        close(client);
      }
    }
  }

  const char* reply_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<int> held_;
  mutable std::mutex mutex_;
  std::string request_;
};

// A port with nobody listening: bound, then closed.
uint16_t closedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

}  // namespace berth
