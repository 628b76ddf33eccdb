#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// What berth says to etcd's v3 JSON gateway and reads back from it (the transport is
// etcd_client.h). Pure: messages are written with util/json_writer.h and replies read with
// nlohmann.
//
// The gateway's JSON is protobuf's: keys and values are bytes in base64 (etcdBase64(),
// etcdBytes()), 64-bit numbers are decimal strings (etcdInteger()), and a field at its default
// (false, 0, empty) is left out, so a transaction that failed its comparisons has no
// "succeeded" at all.

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
