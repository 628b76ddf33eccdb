#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace berth {

// etcd's v3 API through the JSON gateway that every member serves on its client URLs (etcd 3.4:
// POST /v3/<service>/<method>), on libcurl's multi interface. Nothing here waits: a call starts a
// transfer and returns, and turn() moves every transfer on and then runs the callbacks of those
// that ended, so berthd's management loop drives it between its other work.
//
// The gateway's JSON is protobuf's: keys and values are bytes in base64 (etcdBase64(),
// etcdBytes()), 64-bit numbers are decimal strings (etcdInteger()), and a field at its default
// (false, 0, empty) is left out, so a transaction that failed its comparisons has no
// "succeeded" at all.
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

struct EtcdWatch;  // below, with the other messages

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

// Base64 of bytes, as the gateway takes keys and values.
std::string etcdBase64(absl::string_view bytes);
// The bytes of a base64 field of `object`; empty when the field is absent (its default).
absl::StatusOr<std::string> etcdBytes(const nlohmann::json& object, const char* field);
// A 64-bit field of `object` (a decimal string, or a number); 0 when absent.
absl::StatusOr<int64_t> etcdInteger(const nlohmann::json& object, const char* field);
// The range_end that makes a range or watch cover every key starting with `prefix`.
std::string etcdPrefixEnd(absl::string_view prefix);

// The few messages berth sends. etcdRequest() writes each as the gateway takes it.
//
// A key, or the keys in [key, range_end): what a RangeRequest reads and a DeleteRangeRequest
// deletes.
struct EtcdRange {
  explicit EtcdRange(std::string key, std::string range_end = "")
      : key(std::move(key)), range_end(std::move(range_end)) {}
  std::string key;
  std::string range_end;           // empty: `key` alone
  bool keys_only = false;          // the keys without their values
  bool greatest_key_only = false;  // of the keys in range, the greatest alone
};
// Every key starting with `prefix`.
EtcdRange etcdPrefixRange(absl::string_view prefix);
// A PutRequest, attached to `lease` unless 0.
struct EtcdPut {
  EtcdPut(std::string key, std::string value, int64_t lease = 0)
      : key(std::move(key)), value(std::move(value)), lease(lease) {}
  std::string key;
  std::string value;
  int64_t lease = 0;
};
struct EtcdDeleteRange {
  EtcdRange range;
};
// One request of a transaction: a read, a put or a delete.
using EtcdOp = std::variant<EtcdRange, EtcdPut, EtcdDeleteRange>;
// A transaction's comparison: `key` was created (kCreate), or last modified (kMod), at
// `revision`; a create revision of 0 holds for a key that does not exist.
struct EtcdCompare {
  enum class Target { kCreate, kMod };
  std::string key;
  Target target = Target::kCreate;
  int64_t revision = 0;
};
// A TxnRequest: `success` if every comparison of `compare` holds (none: always), else `failure`.
struct EtcdTxn {
  EtcdTxn() = default;
  EtcdTxn(std::vector<EtcdCompare> compare, std::vector<EtcdOp> success,
          std::vector<EtcdOp> failure = {})
      : compare(std::move(compare)), success(std::move(success)), failure(std::move(failure)) {}
  std::vector<EtcdCompare> compare;
  std::vector<EtcdOp> success;
  std::vector<EtcdOp> failure;
};
// A WatchCreateRequest: the keys of `range` from `start_revision` (0: from now).
struct EtcdWatch {
  EtcdRange range;
  int64_t start_revision = 0;
};
std::string etcdRequest(const EtcdRange& range);
std::string etcdRequest(const EtcdPut& put);
std::string etcdRequest(const EtcdTxn& txn);
std::string etcdRequest(const EtcdWatch& watch);
// A request of one 64-bit field, as the lease calls ({"TTL": ..}, {"ID": ..}) and compaction
// ({"revision": ..}) take.
std::string etcdRequest(absl::string_view field, int64_t value);

// One key of a RangeResponse, decoded.
struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};
// The keys of a RangeResponse (its "kvs"; none when absent).
absl::StatusOr<std::vector<EtcdKeyValue>> etcdKeyValues(const nlohmann::json& range_response);
// The keys of the `n`th response of a transaction's reply, which is a range; DataLoss when the
// reply has no such response.
absl::StatusOr<std::vector<EtcdKeyValue>> etcdTxnRange(const nlohmann::json& txn_reply, size_t n);
// The store's revision a reply was made at (its header's).
absl::StatusOr<int64_t> etcdRevision(const nlohmann::json& response);

}  // namespace berth
