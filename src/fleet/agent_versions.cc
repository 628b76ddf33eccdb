// The fleet agent's part in config versions (fleet/store.h, docs/scale-out.md): the watch on the
// fleet's head, the fetch of each new version's manifest and pieces, and what the daemon says
// of it once applied or refused. Like the rest of the agent, it never waits: etcd's replies come
// through turn().

#include <utility>

#include "absl/strings/str_cat.h"
#include "berth/fleet/agent.h"

namespace berth {
namespace {

using Json = EtcdClient::Json;

}  // namespace

void FleetAgent::watchHead(absl::Time now) {
  if (watch_.state != WatchState::kIdle || now < watch_.not_before) return;
  watch_.state = WatchState::kReading;
  client_->call("kv/range", etcdRequest(EtcdRange{keys_.head()}),
                guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
                  auto retry = [&self](absl::string_view what, const absl::Status& status) {
                    self.watch_.state = WatchState::kIdle;
                    self.watch_.not_before = self.now_ + kRetryInterval;
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
                    self.own_.report.from_cache = false;
                    self.own_.dirty = true;
                  }
                  if (!kvs->empty()) {
                    absl::StatusOr<FleetHead> head = parseHead(kvs->front().value);
                    if (!head.ok()) {
                      self.failed("reading the fleet's head", head.status());
                    } else {
                      self.noteHead(*head);
                    }
                  }
                  self.watch_.state = WatchState::kWatching;
                  const EtcdWatch create{EtcdRange{self.keys_.head()}, *revision + 1};
                  self.watch_.id = self.client_->watch(
                      create, self.guarded([](FleetAgent& self, absl::StatusOr<Json> message) {
                        if (!message.ok() || message->value("canceled", false)) {
                          // The stream ended (etcd went away), or etcd canceled it (its revision
                          // was compacted): read the head afresh and watch again.
                          self.client_->cancelWatch(self.watch_.id);
                          self.watch_.state = WatchState::kIdle;
                          self.watch_.not_before =
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
  versions_.noteHead(head);
  status_.head_version = head.version;
}

void FleetAgent::fetch(const FleetHead& head) {
  fetch_.in_flight = true;
  client_->call("kv/range", etcdRequest(EtcdRange{keys_.version(head.version)}),
                guarded([head](FleetAgent& self, absl::StatusOr<Json> reply) {
                  auto retry = [&self](absl::string_view what, const absl::Status& status) {
                    self.fetch_.in_flight = false;
                    self.fetch_.not_before = self.now_ + kRetryInterval;
                    self.failed(what, status);
                  };
                  const std::string what = absl::StrCat("fetching fleet version ", head.version);
                  if (!reply.ok()) return retry(what, reply.status());
                  absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(*reply);
                  if (!kvs.ok()) return retry(what, kvs.status());
                  if (kvs->empty()) {
                    // Retention took it: a newer head is on its way through the watch.
                    if (!self.versions_.isNewest(head)) return void(self.fetch_.in_flight = false);
                    return retry(what, absl::NotFoundError("its manifest is missing"));
                  }
                  absl::StatusOr<VersionManifest> manifest = parseManifest(kvs->front().value);
                  if (!manifest.ok()) return retry(what, manifest.status());
                  if (manifest->push_id != head.push_id) {
                    return retry(what, absl::DataLossError("its manifest names another push"));
                  }
                  self.client_->call(
                      "kv/range", etcdRequest(etcdPrefixRange(self.keys_.piecesOf(head.push_id))),
                      self.guarded([head, manifest = *std::move(manifest)](
                                       FleetAgent& self, absl::StatusOr<Json> reply) {
                        absl::StatusOr<std::vector<EtcdKeyValue>> pieces =
                            reply.ok() ? etcdKeyValues(*reply) : reply.status();
                        if (!pieces.ok()) {
                          self.fetch_.in_flight = false;
                          self.fetch_.not_before = self.now_ + kRetryInterval;
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
  fetch_.in_flight = false;
  std::map<std::string, std::string> by_key;
  for (const EtcdKeyValue& piece : pieces) by_key[piece.key] = piece.value;
  absl::StatusOr<std::string> text = assembleVersionText(manifest, by_key);
  if (!text.ok()) {
    // Stored wrong: no retry will mend it. Refused like a version that does not apply.
    refused(head, std::string(text.status().message()));
    return;
  }
  versions_.offer(
      FleetVersionText{head, *std::move(text),
                       absl::StrCat("fleet version ", head.version, " (", manifest.source, ")")});
}

std::optional<FleetVersionText> FleetAgent::takeVersion() { return versions_.take(); }

void FleetAgent::applied(const FleetHead& head, int64_t applied_at_ms) {
  versions_.applied(head);
  ++status_.versions_applied;
  status_.running_version = head.version;
  status_.from_cache = false;
  own_.report.version = head.version;
  own_.report.push_id = head.push_id;
  own_.report.applied_at_ms = applied_at_ms;
  own_.report.from_cache = false;
  own_.dirty = true;
}

void FleetAgent::refused(const FleetHead& head, const std::string& why) {
  versions_.refused(head);
  ++status_.versions_refused;
  status_.refused_version = head.version;
  status_.refused_why = why;
  own_.report.refused_version = head.version;
  own_.report.refused_why = why;
  own_.dirty = true;
}

}  // namespace berth
