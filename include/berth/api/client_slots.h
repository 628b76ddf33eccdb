#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace berth {

// The connection bookkeeping the control socket and the metrics server share. Their `Client`
// derives from ClientConnection.
struct ClientConnection {
  int fd = -1;
  uint64_t accepted_order = 0;  // grows with each connection accepted
  uint64_t deadline_ms = 0;
  std::string received;  // the request so far
};

// Makes room for one more connection among `clients`, which may hold `limit`. At the limit:
//   1. once per burst of accepts (`waiting_read` false), every client for which
//      `waiting_for_request` holds is read with `read_request`, so that a client whose request
//      has arrived is no longer idle, and one that closed (read_request false) is removed;
//   2. then the oldest client still waiting for its request is closed and removed, since an idle
//      connection must not lock out a new one that has a request to make.
// Returns kEvicted when it closed an idle one, kRoom when there was room, or kFull when every
// client is being answered.
enum class Room { kRoom, kEvicted, kFull };
template <typename Client, typename Waiting, typename Read>
Room makeRoom(std::vector<Client>& clients, size_t limit, bool& waiting_read,
              Waiting waiting_for_request, Read read_request) {
  if (clients.size() < limit) return Room::kRoom;
  if (!waiting_read) {
    waiting_read = true;
    for (size_t i = clients.size(); i-- > 0;) {
      if (!waiting_for_request(clients[i]) || read_request(clients[i])) continue;
      close(clients[i].fd);
      clients[i] = std::move(clients.back());
      clients.pop_back();
    }
    if (clients.size() < limit) return Room::kRoom;
  }
  auto oldest = clients.end();
  for (auto it = clients.begin(); it != clients.end(); ++it) {
    if (!waiting_for_request(*it)) continue;
    if (oldest == clients.end() || it->accepted_order < oldest->accepted_order) oldest = it;
  }
  if (oldest == clients.end()) return Room::kFull;
  close(oldest->fd);
  *oldest = std::move(clients.back());
  clients.pop_back();
  return Room::kEvicted;
}

// Accepts every connection waiting on `listen_fd` into `clients` (at most `limit`, making room as
// makeRoom does), each with `request_deadline_ms` to send its request. A new connection is read
// at once: a request already sent makes it busy before a later accept of the same burst looks
// for an idle one to evict. `Counts` has `accepted`, `evicted_idle` and `refused_full`.
template <typename Client, typename Counts, typename Waiting, typename Read>
void acceptClients(int listen_fd, std::vector<Client>& clients, size_t limit,
                   uint64_t request_deadline_ms, Counts& counts, Waiting waiting_for_request,
                   Read read_request) {
  bool waiting_read = false;
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    const Room room = makeRoom(clients, limit, waiting_read, waiting_for_request, read_request);
    if (room == Room::kFull) {
      ++counts.refused_full;
      close(fd);
      continue;
    }
    if (room == Room::kEvicted) ++counts.evicted_idle;
    Client client;
    client.fd = fd;
    client.accepted_order = ++counts.accepted;
    client.deadline_ms = request_deadline_ms;
    clients.push_back(std::move(client));
    if (!read_request(clients.back())) {
      close(clients.back().fd);
      clients.pop_back();
    }
  }
}

// Serves every client once, starting one further along each call so that no client always
// comes first; `serve_one` returns whether the client is finished, and finished clients are
// closed and removed.
template <typename Client, typename ServeOne>
void serveEach(std::vector<Client>& clients, size_t& first, ServeOne serve_one) {
  if (clients.empty()) return;
  first = (first + 1) % clients.size();
  std::vector<bool> finished(clients.size(), false);
  for (size_t n = 0; n < clients.size(); ++n) {
    const size_t i = (first + n) % clients.size();
    finished[i] = serve_one(clients[i]);
  }
  // From the back, so that what moves into a removed place has been looked at already.
  for (size_t i = clients.size(); i-- > 0;) {
    if (!finished[i]) continue;
    close(clients[i].fd);
    clients[i] = std::move(clients.back());
    clients.pop_back();
  }
}

}  // namespace berth
