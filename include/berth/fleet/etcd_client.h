#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/fleet/etcd_messages.h"

namespace berth {

// etcd's v3 API through the JSON gateway that every member serves on its client URLs (etcd 3.4:
// POST /v3/<service>/<method>), on libcurl's multi interface. Nothing here waits: a call starts a
// transfer and returns, and turn() moves every transfer on and then runs the callbacks of those
// that ended, so berthd's management loop drives it between its other work. What it sends and
// reads is etcd_messages.h's.
struct EtcdSettings {
  std::vector<std::string> endpoints;  // client URLs, all http:// or all https://
  // TLS: the CA that signed the members' certificates, and a client certificate and key where
  // etcd asks for one. Empty: the system's CAs, no client certificate.
  std::string ca;
  std::string cert;
  std::string key;
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration call_timeout = absl::Seconds(5);  // per endpoint tried
};

class EtcdClient {
 public:
  using Json = nlohmann::json;
  // A call's reply, or why it failed: Unavailable when no endpoint answered, or etcd's own
  // error (its gRPC code mapped to a status, and its message).
  using Reply = std::function<void(absl::StatusOr<Json>)>;
  // Each message of a watch stream (the "result" object), and at the end, once, the error that
  // ended the stream. A watch etcd canceled (its start revision compacted) is a message with
  // "canceled" and "compact_revision", followed by the end.
  using WatchMessage = std::function<void(absl::StatusOr<Json>)>;

  static absl::StatusOr<std::unique_ptr<EtcdClient>> create(EtcdSettings settings);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `request` (written by etcdRequest()) to /v3/`method` ("kv/range", "kv/txn",
  // "lease/grant", ...). An endpoint that cannot be reached, times out or answers Unavailable
  // passes the call on to the next one, each tried at most once per call, starting with the last
  // one that answered.
  void call(absl::string_view method, std::string request, Reply reply);
  // Opens a watch stream on the first endpoint that takes it. Returns an id for cancelWatch().
  uint64_t watch(const EtcdWatch& request, WatchMessage message);
  // Ends a watch; its callback is not called again. Unknown or ended ids are ignored.
  void cancelWatch(uint64_t id);

  // Moves every transfer on and runs the callbacks of what ended or arrived; never waits.
  // Callbacks may start calls and watches, and cancel watches.
  void turn();
  // For command-line tools: turn() until no call is in flight (watches aside) or `deadline`,
  // waiting on the sockets in between.
  void runUntilIdle(absl::Time deadline);
  size_t callsInFlight() const;

 private:
  struct Transfer;
  explicit EtcdClient(EtcdSettings settings);
  // libcurl's write callback: a call's reply accumulates; a watch's lines become messages.
  static size_t receive(char* data, size_t size, size_t count, void* transfer);
  // A transfer of `body` to /v3/`method`, on the endpoint that answered last, not yet started.
  Transfer& newTransfer(absl::string_view method, std::string body);
  // Starts `transfer` on its current endpoint; false when libcurl refused it.
  bool start(Transfer& transfer);
  // After a failure on its current endpoint: true when the transfer moved on to another one.
  bool retryElsewhere(Transfer& transfer);
  void finish(Transfer& transfer, int curl_result, std::vector<std::function<void()>>& callbacks);

  EtcdSettings settings_;
  void* multi_ = nullptr;     // CURLM*
  size_t good_endpoint_ = 0;  // the last endpoint that answered
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Transfer>> transfers_;
};

}  // namespace berth
