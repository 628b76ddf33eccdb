#include "berth/fleet/etcd_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// libcurl's global state, set up once before the first handle of the process.
absl::Status initCurlOnce() {
  static const CURLcode result = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (result != CURLE_OK) {
    return absl::InternalError(absl::StrCat("libcurl: ", curl_easy_strerror(result)));
  }
  return absl::OkStatus();
}

// etcd's gRPC code, as the gateway reports it, as a status.
absl::Status etcdError(int code, absl::string_view message) {
  const auto status_code =
      code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown;
  return absl::Status(status_code, absl::StrCat("etcd: ", message));
}

// Whether another member may do better: it could not be reached or had no leader.
bool worthAnotherEndpoint(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

// A field of a reply, or `fallback` where it is absent or of another type: a member's odd
// reply becomes an error status, never an exception out of turn().
int intField(const nlohmann::json& object, const char* field, int fallback) {
  if (!object.is_object() || !object.contains(field)) return fallback;
  const nlohmann::json& value = object[field];
  return value.is_number_integer() ? value.get<int>() : fallback;
}
std::string stringField(const nlohmann::json& object, const char* field, std::string fallback) {
  if (!object.is_object() || !object.contains(field)) return fallback;
  const nlohmann::json& value = object[field];
  return value.is_string() ? value.get<std::string>() : fallback;
}

// More than any reply or watch message etcd sends within its request limits (1.5 MiB values,
// a watch message of many events): a member that sends more is cut off.
constexpr size_t kMaxReceivedBytes = size_t{64} << 20;

}  // namespace

struct EtcdClient::Transfer {
  uint64_t id = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string path;  // "/v3/kv/range"
  std::string body;
  std::string received;
  char error[CURL_ERROR_SIZE] = {};
  size_t endpoint = 0;
  size_t tried = 0;
  Reply reply;  // a call's
  // A watch's: its callback, what arrived and is yet to be handed over, and whether any of the
  // stream has arrived (a watch moves on to another endpoint only before that).
  WatchMessage message;
  std::vector<absl::StatusOr<Json>> arrived;
  bool streaming = false;
  bool canceled = false;       // ended, or canceled: removed on the next turn
  bool silenced = false;       // a watch canceled by its owner: nothing more is handed over
  absl::Status start_failure;  // libcurl refused to start it: the call's reply

  bool isWatch() const { return static_cast<bool>(message); }
};

size_t EtcdClient::receive(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  if (transfer->received.size() + size * count > kMaxReceivedBytes) return 0;  // a write error
  transfer->received.append(data, size * count);
  if (!transfer->isWatch()) return size * count;
  // A watch stream: one JSON object a line. Handed over in turn(), outside libcurl's callback,
  // where libcurl's functions may be called again.
  transfer->streaming = true;
  size_t line_start = 0;
  for (size_t line_end; (line_end = transfer->received.find('\n', line_start)) != std::string::npos;
       line_start = line_end + 1) {
    const absl::string_view line = absl::StripAsciiWhitespace(
        absl::string_view(transfer->received).substr(line_start, line_end - line_start));
    if (line.empty()) continue;
    Json message = Json::parse(line, nullptr, false);
    if (message.is_discarded() || !message.is_object()) {
      transfer->arrived.push_back(absl::DataLossError("etcd: a watch message that is not JSON"));
    } else if (message.contains("result")) {
      transfer->arrived.push_back(std::move(message["result"]));
    } else {
      const Json& error = message.contains("error") ? message["error"] : message;
      transfer->arrived.push_back(
          etcdError(intField(error, "grpc_code", intField(error, "code", 2)),
                    stringField(error, "message", "the watch stream reported an error")));
    }
  }
  transfer->received.erase(0, line_start);
  return size * count;
}

EtcdClient::EtcdClient(EtcdSettings settings) : settings_(std::move(settings)) {}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::create(EtcdSettings settings) {
  if (settings.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints");
  if (absl::Status status = initCurlOnce(); !status.ok()) return status;
  std::unique_ptr<EtcdClient> client(new EtcdClient(std::move(settings)));
  client->multi_ = curl_multi_init();
  if (client->multi_ == nullptr) {
    return absl::ResourceExhaustedError("libcurl: no multi handle");
  }
  return client;
}

EtcdClient::~EtcdClient() {
  for (auto& [id, transfer] : transfers_) {
    curl_multi_remove_handle(multi_, transfer->easy);
    curl_easy_cleanup(transfer->easy);
    curl_slist_free_all(transfer->headers);
  }
  if (multi_ != nullptr) curl_multi_cleanup(multi_);
}

bool EtcdClient::start(Transfer& transfer) {
  if (transfer.easy != nullptr) {
    curl_multi_remove_handle(multi_, transfer.easy);
    curl_easy_cleanup(transfer.easy);
  }
  transfer.easy = curl_easy_init();
  if (transfer.easy == nullptr) return false;
  transfer.received.clear();
  transfer.error[0] = '\0';
  CURL* easy = transfer.easy;
  const std::string url = absl::StrCat(settings_.endpoints[transfer.endpoint], transfer.path);
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(transfer.body.size()));
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, transfer.body.data());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer.headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, receive);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, &transfer);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer.error);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(settings_.connect_timeout)));
  if (transfer.isWatch()) {
    // A watch is quiet for as long as nothing changes: no overall timeout, but TCP keepalives,
    // so that a member that vanished without a word ends the stream within seconds.
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 2L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(settings_.call_timeout)));
  }
  if (!settings_.ca.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, settings_.ca.c_str());
  if (!settings_.cert.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLCERT, settings_.cert.c_str());
    curl_easy_setopt(easy, CURLOPT_SSLKEY, settings_.key.c_str());
  }
  return curl_multi_add_handle(multi_, easy) == CURLM_OK;
}

bool EtcdClient::retryElsewhere(Transfer& transfer) {
  if (transfer.tried >= settings_.endpoints.size() || transfer.canceled) return false;
  transfer.endpoint = (transfer.endpoint + 1) % settings_.endpoints.size();
  ++transfer.tried;
  return start(transfer);
}

EtcdClient::Transfer& EtcdClient::newTransfer(absl::string_view method, std::string body) {
  auto transfer = std::make_unique<Transfer>();
  transfer->id = next_id_++;
  transfer->path = absl::StrCat("/v3/", method);
  transfer->body = std::move(body);
  transfer->headers = curl_slist_append(nullptr, "Content-Type: application/json");
  transfer->endpoint = good_endpoint_;
  transfer->tried = 1;
  Transfer& made = *transfer;
  transfers_.emplace(made.id, std::move(transfer));
  return made;
}

void EtcdClient::call(absl::string_view method, std::string request, Reply reply) {
  Transfer& transfer = newTransfer(method, std::move(request));
  transfer.reply = std::move(reply);
  if (!start(transfer)) {
    // Reported on the next turn, like any other failure, never from inside call().
    transfer.start_failure = absl::ResourceExhaustedError("libcurl refused the call");
    transfer.canceled = true;
  }
}

uint64_t EtcdClient::watch(const EtcdWatch& request, WatchMessage message) {
  Transfer& transfer = newTransfer("watch", etcdRequest(request));
  transfer.message = std::move(message);
  if (!start(transfer)) {
    transfer.arrived.push_back(absl::ResourceExhaustedError("libcurl refused the watch"));
    transfer.canceled = true;
  }
  return transfer.id;
}

void EtcdClient::cancelWatch(uint64_t id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end() || !it->second->isWatch()) return;
  // Removed in turn(); the callback, which may be the caller, stays alive until then.
  it->second->canceled = true;
  it->second->silenced = true;
}

void EtcdClient::finish(Transfer& transfer, int curl_result,
                        std::vector<std::function<void()>>& callbacks) {
  long http = 0;
  curl_easy_getinfo(transfer.easy, CURLINFO_RESPONSE_CODE, &http);
  absl::Status failure;
  Json reply;
  if (curl_result != CURLE_OK) {
    failure = absl::UnavailableError(absl::StrCat(
        "etcd at ", settings_.endpoints[transfer.endpoint], ": ",
        transfer.error[0] != '\0' ? transfer.error
                                  : curl_easy_strerror(static_cast<CURLcode>(curl_result))));
  } else if (!transfer.isWatch()) {
    reply = Json::parse(transfer.received, nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
      failure =
          absl::DataLossError(absl::StrCat("etcd at ", settings_.endpoints[transfer.endpoint],
                                           " answered HTTP ", http, " with what is not JSON"));
    } else if (http != 200) {
      failure = etcdError(intField(reply, "code", 2),
                          stringField(reply, "message", absl::StrCat("HTTP ", http)));
      if (http >= 500 && absl::IsUnknown(failure))
        failure = absl::UnavailableError(failure.message());
    }
  } else {
    failure =
        absl::UnavailableError(absl::StrCat("etcd at ", settings_.endpoints[transfer.endpoint],
                                            ": the watch stream ended (HTTP ", http, ")"));
  }
  const bool moved_on = worthAnotherEndpoint(failure) &&
                        !(transfer.isWatch() && transfer.streaming) && retryElsewhere(transfer);
  if (moved_on) return;
  if (failure.ok() || !worthAnotherEndpoint(failure)) good_endpoint_ = transfer.endpoint;
  transfer.canceled = true;  // ended: removed below
  if (transfer.isWatch()) {
    transfer.arrived.push_back(failure);
    return;
  }
  Reply callback = std::exchange(transfer.reply, nullptr);
  if (failure.ok()) {
    callbacks.push_back([callback = std::move(callback), value = std::move(reply)]() mutable {
      callback(std::move(value));
    });
  } else {
    callbacks.push_back([callback = std::move(callback), failure] { callback(failure); });
  }
}

void EtcdClient::turn() {
  int running = 0;
  curl_multi_perform(static_cast<CURLM*>(multi_), &running);
  std::vector<std::function<void()>> callbacks;
  int queued = 0;
  while (CURLMsg* done = curl_multi_info_read(static_cast<CURLM*>(multi_), &queued)) {
    if (done->msg != CURLMSG_DONE) continue;
    Transfer* transfer = nullptr;
    curl_easy_getinfo(done->easy_handle, CURLINFO_PRIVATE, &transfer);
    if (transfer != nullptr && !transfer->canceled) finish(*transfer, done->data.result, callbacks);
  }
  // What watches received, one message at a time: a message's callback may cancel its watch or
  // another, and start transfers.
  std::vector<uint64_t> watches;
  for (const auto& [id, transfer] : transfers_) {
    if (transfer->isWatch() && !transfer->arrived.empty()) watches.push_back(id);
  }
  for (uint64_t id : watches) {
    std::vector<absl::StatusOr<Json>> arrived = std::move(transfers_.at(id)->arrived);
    transfers_.at(id)->arrived.clear();
    for (absl::StatusOr<Json>& message : arrived) {
      Transfer& transfer = *transfers_.at(id);  // removed only below
      if (transfer.silenced) break;
      transfer.message(std::move(message));
    }
  }
  // Then the ended transfers go, and the calls' replies run.
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Transfer& transfer = *it->second;
    if (!transfer.canceled) {
      ++it;
      continue;
    }
    if (transfer.reply) {
      callbacks.push_back([callback = std::exchange(transfer.reply, nullptr),
                           failure = transfer.start_failure] { callback(failure); });
    }
    if (transfer.easy != nullptr) {
      curl_multi_remove_handle(static_cast<CURLM*>(multi_), transfer.easy);
      curl_easy_cleanup(transfer.easy);
    }
    curl_slist_free_all(transfer.headers);
    it = transfers_.erase(it);
  }
  for (std::function<void()>& callback : callbacks) callback();
}

void EtcdClient::runUntilIdle(absl::Time deadline) {
  turn();
  while (callsInFlight() > 0 && absl::Now() < deadline) {
    const int wait_ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 100));
    curl_multi_poll(static_cast<CURLM*>(multi_), nullptr, 0, wait_ms, nullptr);
    turn();
  }
}

size_t EtcdClient::callsInFlight() const {
  return std::count_if(transfers_.begin(), transfers_.end(),
                       [](const auto& entry) { return !entry.second->isWatch(); });
}

}  // namespace berth
