#include "berth/fleet/etcd_messages.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "berth/util/json_writer.h"
#include "berth/util/status_macros.h"

namespace berth {

std::string etcdBase64(absl::string_view bytes) { return absl::Base64Escape(bytes); }

absl::StatusOr<std::string> etcdBytes(const nlohmann::json& object, const char* field) {
  if (!object.is_object() || !object.contains(field)) return std::string();
  const nlohmann::json& value = object[field];
  std::string bytes;
  if (!value.is_string() || !absl::Base64Unescape(value.get<std::string>(), &bytes)) {
    return absl::DataLossError(absl::StrCat("etcd: '", field, "' is not base64"));
  }
  return bytes;
}

absl::StatusOr<int64_t> etcdInteger(const nlohmann::json& object, const char* field) {
  if (!object.is_object() || !object.contains(field)) return 0;
  const nlohmann::json& value = object[field];
  int64_t number = 0;
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_string() && absl::SimpleAtoi(value.get<std::string>(), &number)) return number;
  return absl::DataLossError(absl::StrCat("etcd: '", field, "' is not an integer"));
}

std::string etcdPrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  // The smallest key after every key with the prefix: its last byte below 0xff, plus one.
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');  // etcd: every key
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

EtcdRange etcdPrefixRange(absl::string_view prefix) {
  return EtcdRange{std::string(prefix), etcdPrefixEnd(prefix)};
}

namespace {

// The members of a range's message, inside its object.
void writeRange(JsonWriter& json, const EtcdRange& range) {
  json.key("key").value(etcdBase64(range.key));
  if (!range.range_end.empty()) json.key("range_end").value(etcdBase64(range.range_end));
  if (range.keys_only) json.key("keys_only").value(true);
  if (range.greatest_key_only) {
    json.key("sort_order").value("DESCEND").key("sort_target").value("KEY");
    json.key("limit").value("1");
  }
}

void writePut(JsonWriter& json, const EtcdPut& put) {
  json.key("key").value(etcdBase64(put.key)).key("value").value(etcdBase64(put.value));
  if (put.lease != 0) json.key("lease").value(std::to_string(put.lease));
}

void writeOps(JsonWriter& json, const std::vector<EtcdOp>& ops) {
  json.beginArray();
  for (const EtcdOp& op : ops) {
    json.beginObject();
    if (const auto* range = std::get_if<EtcdRange>(&op)) {
      json.key("request_range").beginObject();
      writeRange(json, *range);
    } else if (const auto* put = std::get_if<EtcdPut>(&op)) {
      json.key("request_put").beginObject();
      writePut(json, *put);
    } else {
      json.key("request_delete_range").beginObject();
      writeRange(json, std::get<EtcdDeleteRange>(op).range);
    }
    json.endObject().endObject();
  }
  json.endArray();
}

}  // namespace

std::string etcdRequest(const EtcdRange& range) {
  JsonWriter json;
  json.beginObject();
  writeRange(json, range);
  return json.endObject().str();
}

std::string etcdRequest(const EtcdPut& put) {
  JsonWriter json;
  json.beginObject();
  writePut(json, put);
  return json.endObject().str();
}

std::string etcdRequest(const EtcdTxn& txn) {
  JsonWriter json;
  json.beginObject();
  if (!txn.compare.empty()) {
    json.key("compare").beginArray();
    for (const EtcdCompare& compare : txn.compare) {
      const bool create = compare.target == EtcdCompare::Target::kCreate;
      json.beginObject().key("key").value(etcdBase64(compare.key));
      json.key("target").value(create ? "CREATE" : "MOD").key("result").value("EQUAL");
      json.key(create ? "create_revision" : "mod_revision").value(std::to_string(compare.revision));
      json.endObject();
    }
    json.endArray();
  }
  json.key("success");
  writeOps(json, txn.success);
  if (!txn.failure.empty()) {
    json.key("failure");
    writeOps(json, txn.failure);
  }
  return json.endObject().str();
}

std::string etcdRequest(const EtcdWatch& watch) {
  JsonWriter json;
  json.beginObject().key("create_request").beginObject();
  writeRange(json, watch.range);
  if (watch.start_revision != 0) {
    json.key("start_revision").value(std::to_string(watch.start_revision));
  }
  return json.endObject().endObject().str();
}

std::string etcdRequest(absl::string_view field, int64_t value) {
  JsonWriter json;
  return json.beginObject().key(field).value(std::to_string(value)).endObject().str();
}

absl::StatusOr<std::vector<EtcdKeyValue>> etcdTxnRange(const nlohmann::json& txn_reply, size_t n) {
  const auto responses = txn_reply.find("responses");
  if (responses == txn_reply.end() || !responses->is_array() || responses->size() <= n ||
      !(*responses)[n].is_object()) {
    return absl::DataLossError("etcd: a transaction reply without its responses");
  }
  const auto range = (*responses)[n].find("response_range");
  if (range == (*responses)[n].end()) return std::vector<EtcdKeyValue>{};
  return etcdKeyValues(*range);
}

absl::StatusOr<std::vector<EtcdKeyValue>> etcdKeyValues(const nlohmann::json& range_response) {
  std::vector<EtcdKeyValue> result;
  if (!range_response.is_object() || !range_response.contains("kvs")) return result;
  const nlohmann::json& kvs = range_response["kvs"];
  if (!kvs.is_array()) return absl::DataLossError("etcd: 'kvs' is not a list");
  for (const nlohmann::json& kv : kvs) {
    EtcdKeyValue entry;
    BERTH_ASSIGN_OR_RETURN(entry.key, etcdBytes(kv, "key"));
    BERTH_ASSIGN_OR_RETURN(entry.value, etcdBytes(kv, "value"));
    BERTH_ASSIGN_OR_RETURN(entry.create_revision, etcdInteger(kv, "create_revision"));
    BERTH_ASSIGN_OR_RETURN(entry.mod_revision, etcdInteger(kv, "mod_revision"));
    BERTH_ASSIGN_OR_RETURN(entry.lease, etcdInteger(kv, "lease"));
    result.push_back(std::move(entry));
  }
  return result;
}

absl::StatusOr<int64_t> etcdRevision(const nlohmann::json& response) {
  if (!response.is_object() || !response.contains("header")) {
    return absl::DataLossError("etcd: a reply without its header");
  }
  return etcdInteger(response["header"], "revision");
}

}  // namespace berth
