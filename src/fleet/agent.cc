#include "berth/fleet/agent.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace berth {
namespace {

using Json = EtcdClient::Json;

}  // namespace

EtcdSettings etcdSettingsFor(const FleetConfig& fleet) {
  EtcdSettings settings;
  settings.endpoints = fleet.endpoints;
  settings.ca = fleet.ca;
  settings.cert = fleet.cert;
  settings.key = fleet.key;
  return settings;
}

absl::StatusOr<std::unique_ptr<FleetAgent>> FleetAgent::create(const FleetConfig& fleet,
                                                               std::string berth_version,
                                                               std::optional<FleetHead> running,
                                                               Log log) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::create(etcdSettingsFor(fleet));
  if (!client.ok()) return client.status();
  return std::unique_ptr<FleetAgent>(new FleetAgent(
      fleet, std::move(berth_version), std::move(running), std::move(log), *std::move(client)));
}

FleetAgent::FleetAgent(const FleetConfig& fleet, std::string berth_version,
                       std::optional<FleetHead> running, Log log,
                       std::unique_ptr<EtcdClient> client)
    : fleet_(fleet),
      keys_(fleet.prefix),
      log_(std::move(log)),
      client_(std::move(client)),
      alive_(std::make_shared<FleetAgent*>(this)),
      running_(std::move(running)),
      generation_keys_(fleet.prefix) {
  report_.name = fleet_.name;
  report_.berth_version = std::move(berth_version);
  if (running_) {
    report_.version = running_->version;
    report_.push_id = running_->push_id;
    report_.from_cache = true;
    status_.running_version = running_->version;
    status_.from_cache = true;
  }
}

FleetAgent::~FleetAgent() = default;

void FleetAgent::turn(absl::Time now) {
  now_ = now;
  client_->turn();
  keepLease(now);
  if (lease_ != 0 && !status_.registered && !claim_in_flight_ && now >= claim_retry_at_) {
    claimName();
  }
  if (status_.registered && report_dirty_ && !put_in_flight_) putReport();
  watchHead(now);
  if (newest_ && newest_ != running_ && newest_ != refused_ && newest_ != building_ &&
      !(offered_ && offered_->head == *newest_) && !fetch_in_flight_ && now >= fetch_retry_at_) {
    fetch();
  }
  turnGenerations(now);
}

void FleetAgent::answered() {
  if (!status_.etcd_reachable) {
    log_(absl::StrCat("fleet: etcd answers (", absl::StrJoin(fleet_.endpoints, ", "),
                      "); instance ", fleet_.name, ", prefix ", fleet_.prefix));
  }
  status_.etcd_reachable = true;
}

void FleetAgent::failed(absl::string_view what, const absl::Status& status) {
  ++status_.etcd_errors;
  status_.last_error = absl::StrCat(what, ": ", status.message());
  // Unavailable is etcd out of reach; anything else is worth a line each time.
  const bool unreachable = status.code() == absl::StatusCode::kUnavailable ||
                           status.code() == absl::StatusCode::kDeadlineExceeded;
  if (!unreachable || status_.etcd_reachable || status_.etcd_errors == 1) {
    log_(absl::StrCat("fleet: ", status_.last_error, "; serving ",
                      running_ ? absl::StrCat("fleet version ", running_->version)
                               : std::string("no fleet version yet"),
                      ", retrying every ", absl::FormatDuration(kRetryInterval)));
  }
  if (unreachable) status_.etcd_reachable = false;
}

void FleetAgent::loseLease() {
  if (lease_ != 0) previous_lease_ = lease_;
  lease_ = 0;
  status_.registered = false;
  report_dirty_ = true;
}

void FleetAgent::keepLease(absl::Time now) {
  const absl::Duration ttl = absl::Seconds(fleet_.lease_ttl_s);
  if (lease_in_flight_) return;
  if (lease_ == 0) {
    if (now < lease_retry_at_) return;
    lease_in_flight_ = true;
    client_->call("lease/grant", {{"TTL", std::to_string(fleet_.lease_ttl_s)}},
                  guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
                    self.lease_in_flight_ = false;
                    absl::StatusOr<int64_t> id =
                        reply.ok() ? etcdInteger(*reply, "ID") : reply.status();
                    if (!id.ok() || *id == 0) {
                      self.lease_retry_at_ = self.now_ + kRetryInterval;
                      return self.failed("lease grant", id.ok() ? absl::DataLossError("no lease id")
                                                                : id.status());
                    }
                    self.answered();
                    self.lease_ = *id;
                    self.last_keepalive_ = self.now_;
                    self.next_keepalive_ = self.now_ + absl::Seconds(self.fleet_.lease_ttl_s) / 3;
                  }));
    return;
  }
  if (now - last_keepalive_ > ttl) {
    // Unrenewed for a whole TTL: etcd has let it go, and the report with it.
    log_(absl::StrCat("fleet: lease ", lease_, " expired unrenewed; taking a new one"));
    loseLease();
    return;
  }
  if (now < next_keepalive_) return;
  lease_in_flight_ = true;
  client_->call(
      "lease/keepalive", {{"ID", std::to_string(lease_)}},
      guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
        self.lease_in_flight_ = false;
        if (!reply.ok()) {
          self.next_keepalive_ = self.now_ + kRetryInterval;
          return self.failed("lease keepalive", reply.status());
        }
        self.answered();
        const Json result = reply->value("result", Json::object());
        absl::StatusOr<int64_t> ttl = etcdInteger(result, "TTL");
        if (!ttl.ok() || *ttl <= 0) {
          self.log_(absl::StrCat("fleet: lease ", self.lease_, " is gone; taking a new one"));
          return self.loseLease();
        }
        self.last_keepalive_ = self.now_;
        self.next_keepalive_ = self.now_ + absl::Seconds(self.fleet_.lease_ttl_s) / 3;
      }));
}

void FleetAgent::claimName() {
  const std::string key = keys_.instance(fleet_.name);
  report_dirty_ = false;
  Json txn = {
      {"compare", Json::array({{{"key", etcdBase64(key)},
                                {"target", "CREATE"},
                                {"result", "EQUAL"},
                                {"create_revision", "0"}}})},
      {"success",
       Json::array({{{"request_put", etcdPut(key, renderInstanceReport(report_), lease_)}}})},
      {"failure", Json::array({{{"request_range", etcdRange(key)}}})}};
  claim_in_flight_ = true;
  const int64_t lease = lease_;
  client_->call("kv/txn", txn, guarded([lease](FleetAgent& self, absl::StatusOr<Json> reply) {
                  self.claim_in_flight_ = false;
                  if (!reply.ok()) {
                    self.report_dirty_ = true;
                    self.claim_retry_at_ = self.now_ + kRetryInterval;
                    return self.failed("registering the instance", reply.status());
                  }
                  self.answered();
                  if (lease != self.lease_) return;  // the lease changed meanwhile: claim again
                  if (reply->value("succeeded", false)) {
                    self.status_.registered = true;
                    self.log_(absl::StrCat("fleet: registered as ", self.fleet_.name, " (lease ",
                                           self.lease_, ")"));
                    return;
                  }
                  // The key is there: ours from before (the same lease), or another live
                  // instance's.
                  int64_t holder = 0;
                  if (reply->contains("responses") && (*reply)["responses"].is_array() &&
                      !(*reply)["responses"].empty()) {
                    if (absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(
                            (*reply)["responses"][0].value("response_range", Json::object()));
                        kvs.ok() && !kvs->empty()) {
                      holder = kvs->front().lease;
                    }
                  }
                  // Ours: under this lease, or under the one it replaced (etcd was away longer
                  // than the TTL and has not expired the old one yet); the next put moves it.
                  if (holder == self.lease_ || (holder != 0 && holder == self.previous_lease_)) {
                    self.status_.registered = true;
                    self.report_dirty_ = true;
                    return;
                  }
                  self.report_dirty_ = true;
                  self.claim_retry_at_ = self.now_ + kRetryInterval;
                  const std::string why = absl::StrCat(
                      "the name ", self.fleet_.name, " is held by another live instance (lease ",
                      holder, "); names must be unique in a fleet");
                  if (self.status_.last_error != why) self.log_(absl::StrCat("fleet: ", why));
                  self.status_.last_error = why;
                }));
}

void FleetAgent::putReport() {
  report_dirty_ = false;
  put_in_flight_ = true;
  const int64_t lease = lease_;
  client_->call(
      "kv/put", etcdPut(keys_.instance(fleet_.name), renderInstanceReport(report_), lease),
      guarded([lease](FleetAgent& self, absl::StatusOr<Json> reply) {
        self.put_in_flight_ = false;
        if (!reply.ok()) {
          self.report_dirty_ = true;
          // A put under a lease etcd no longer has: take a new one.
          if (reply.status().code() == absl::StatusCode::kNotFound && lease == self.lease_) {
            self.loseLease();
          }
          return self.failed("reporting the instance", reply.status());
        }
        self.answered();
      }));
}

void FleetAgent::watchHead(absl::Time now) {
  if (watch_state_ != WatchState::kIdle || now < watch_retry_at_) return;
  watch_state_ = WatchState::kReading;
  client_->call("kv/range", etcdRange(keys_.head()),
                guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
                  auto retry = [&self](absl::string_view what, const absl::Status& status) {
                    self.watch_state_ = WatchState::kIdle;
                    self.watch_retry_at_ = self.now_ + kRetryInterval;
                    self.failed(what, status);
                  };
                  if (!reply.ok()) return retry("reading the fleet's head", reply.status());
                  absl::StatusOr<int64_t> revision = etcdRevision(*reply);
                  absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(*reply);
                  if (!revision.ok()) return retry("reading the fleet's head", revision.status());
                  if (!kvs.ok()) return retry("reading the fleet's head", kvs.status());
                  self.answered();
                  if (self.status_.from_cache) {
                    self.status_.from_cache = false;
                    self.report_.from_cache = false;
                    self.report_dirty_ = true;
                  }
                  if (!kvs->empty()) {
                    absl::StatusOr<FleetHead> head = parseHead(kvs->front().value);
                    if (!head.ok()) {
                      self.failed("reading the fleet's head", head.status());
                    } else {
                      self.noteHead(*head);
                    }
                  }
                  self.watch_state_ = WatchState::kWatching;
                  const Json create = {{"key", etcdBase64(self.keys_.head())},
                                       {"start_revision", std::to_string(*revision + 1)}};
                  self.watch_id_ = self.client_->watch(
                      create, self.guarded([](FleetAgent& self, absl::StatusOr<Json> message) {
                        if (!message.ok() || message->value("canceled", false)) {
                          // The stream ended (etcd went away), or etcd canceled it (its revision
                          // was compacted): read the head afresh and watch again.
                          self.client_->cancelWatch(self.watch_id_);
                          self.watch_state_ = WatchState::kIdle;
                          self.watch_retry_at_ =
                              self.now_ + (message.ok() ? absl::ZeroDuration() : kRetryInterval);
                          if (!message.ok())
                            self.failed("watching the fleet's head", message.status());
                          return;
                        }
                        for (const Json& event : message->value("events", Json::array())) {
                          if (event.value("type", "PUT") != "PUT") continue;
                          absl::StatusOr<std::string> value =
                              etcdBytes(event.value("kv", Json::object()), "value");
                          absl::StatusOr<FleetHead> head =
                              value.ok() ? parseHead(*value)
                                         : absl::StatusOr<FleetHead>(value.status());
                          if (!head.ok()) {
                            self.failed("a new fleet head", head.status());
                            continue;
                          }
                          self.noteHead(*head);
                        }
                      }));
                }));
}

void FleetAgent::noteHead(const FleetHead& head) {
  newest_ = head;
  status_.head_version = head.version;
}

void FleetAgent::fetch() {
  const FleetHead head = *newest_;
  fetch_in_flight_ = true;
  client_->call("kv/range", etcdRange(keys_.version(head.version)),
                guarded([head](FleetAgent& self, absl::StatusOr<Json> reply) {
                  auto retry = [&self](absl::string_view what, const absl::Status& status) {
                    self.fetch_in_flight_ = false;
                    self.fetch_retry_at_ = self.now_ + kRetryInterval;
                    self.failed(what, status);
                  };
                  const std::string what = absl::StrCat("fetching fleet version ", head.version);
                  if (!reply.ok()) return retry(what, reply.status());
                  absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(*reply);
                  if (!kvs.ok()) return retry(what, kvs.status());
                  if (kvs->empty()) {
                    // Retention took it: a newer head is on its way through the watch.
                    if (self.newest_ != head) return void(self.fetch_in_flight_ = false);
                    return retry(what, absl::NotFoundError("its manifest is missing"));
                  }
                  absl::StatusOr<VersionManifest> manifest = parseManifest(kvs->front().value);
                  if (!manifest.ok()) return retry(what, manifest.status());
                  if (manifest->push_id != head.push_id) {
                    return retry(what, absl::DataLossError("its manifest names another push"));
                  }
                  self.client_->call(
                      "kv/range", etcdPrefixRange(self.keys_.piecesOf(head.push_id)),
                      self.guarded([head, manifest = *std::move(manifest)](
                                       FleetAgent& self, absl::StatusOr<Json> reply) {
                        absl::StatusOr<std::vector<EtcdKeyValue>> pieces =
                            reply.ok() ? etcdKeyValues(*reply) : reply.status();
                        if (!pieces.ok()) {
                          self.fetch_in_flight_ = false;
                          self.fetch_retry_at_ = self.now_ + kRetryInterval;
                          return self.failed(absl::StrCat("fetching fleet version ", head.version),
                                             pieces.status());
                        }
                        self.answered();
                        self.fetched(head, manifest, *pieces);
                      }));
                }));
}

void FleetAgent::fetched(const FleetHead& head, const VersionManifest& manifest,
                         const std::vector<EtcdKeyValue>& pieces) {
  fetch_in_flight_ = false;
  std::map<std::string, std::string> by_key;
  for (const EtcdKeyValue& piece : pieces) by_key[piece.key] = piece.value;
  absl::StatusOr<std::string> text = assembleVersionText(manifest, by_key);
  if (!text.ok()) {
    // Stored wrong: no retry will mend it. Refused like a version that does not apply.
    refused(head, std::string(text.status().message()));
    return;
  }
  if (newest_ != head) return;  // overtaken while it was fetched
  offered_ =
      FleetVersionText{head, *std::move(text),
                       absl::StrCat("fleet version ", head.version, " (", manifest.source, ")")};
}

std::optional<FleetVersionText> FleetAgent::takeVersion() {
  if (!offered_) return std::nullopt;
  building_ = offered_->head;
  std::optional<FleetVersionText> taken = std::move(offered_);
  offered_.reset();
  return taken;
}

void FleetAgent::applied(const FleetHead& head, int64_t applied_at_ms) {
  if (building_ == head) building_.reset();
  running_ = head;
  ++status_.versions_applied;
  status_.running_version = head.version;
  status_.from_cache = false;
  report_.version = head.version;
  report_.push_id = head.push_id;
  report_.applied_at_ms = applied_at_ms;
  report_.from_cache = false;
  report_dirty_ = true;
}

void FleetAgent::refused(const FleetHead& head, const std::string& why) {
  if (building_ == head) building_.reset();
  refused_ = head;
  ++status_.versions_refused;
  status_.refused_version = head.version;
  status_.refused_why = why;
  report_.refused_version = head.version;
  report_.refused_why = why;
  report_dirty_ = true;
}

void FleetAgent::setFingerprints(std::map<std::string, std::string> fingerprints) {
  if (fingerprints == report_.fingerprints) return;
  report_.fingerprints = std::move(fingerprints);
  report_dirty_ = true;
}

void FleetAgent::setSyncEndpoint(std::string endpoint) {
  if (endpoint == report_.sync) return;
  report_.sync = std::move(endpoint);
  report_dirty_ = true;
}

void FleetAgent::leave(absl::Time deadline) {
  if (lease_ == 0) return;
  client_->call("lease/revoke", {{"ID", std::to_string(lease_)}},
                [](const absl::StatusOr<Json>&) {});
  lease_ = 0;
  status_.registered = false;
  client_->runUntilIdle(deadline);
}

}  // namespace berth
