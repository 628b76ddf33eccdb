#include "berth/fleet/agent.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
      generation_keys_(fleet.prefix),
      log_(std::move(log)),
      client_(std::move(client)),
      alive_(std::make_shared<FleetAgent*>(this)),
      lease_(absl::Seconds(fleet.lease_ttl_s), kRetryInterval),
      versions_(running),
      roster_(fleet.name, fleet.health_quorum) {
  own_.report.name = fleet_.name;
  own_.report.berth_version = std::move(berth_version);
  if (running) {
    own_.report.version = running->version;
    own_.report.push_id = running->push_id;
    own_.report.from_cache = true;
    status_.running_version = running->version;
    status_.from_cache = true;
  }
}

FleetAgent::~FleetAgent() = default;

void FleetAgent::turn(absl::Time now) {
  now_ = now;
  client_->turn();
  keepLease(now);
  if (lease_.id() != 0 && !status_.registered && claim_.due(now)) claimName();
  if (status_.registered && own_.dirty && !own_.put_in_flight) putReport();
  watchHead(now);
  if (versions_.toFetch() && fetch_.due(now)) fetch(*versions_.toFetch());
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
                      versions_.running()
                          ? absl::StrCat("fleet version ", versions_.running()->version)
                          : std::string("no fleet version yet"),
                      ", retrying every ", absl::FormatDuration(kRetryInterval)));
  }
  if (unreachable) status_.etcd_reachable = false;
}

void FleetAgent::loseLease() {
  lease_.lost();
  status_.registered = false;
  own_.dirty = true;
}

void FleetAgent::keepLease(absl::Time now) {
  switch (lease_.next(now)) {
    case LeaseClock::Step::kNothing:
      return;
    case LeaseClock::Step::kExpired:
      // Unrenewed for a whole TTL: etcd has let it go, and the report with it.
      log_(absl::StrCat("fleet: lease ", lease_.id(), " expired unrenewed; taking a new one"));
      return loseLease();
    case LeaseClock::Step::kGrant:
      lease_.asked();
      client_->call(
          "lease/grant", etcdRequest("TTL", fleet_.lease_ttl_s),
          guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
            absl::StatusOr<int64_t> id = reply.ok() ? etcdInteger(*reply, "ID") : reply.status();
            if (!id.ok() || *id == 0) {
              self.lease_.grantFailed(self.now_);
              return self.failed("lease grant",
                                 id.ok() ? absl::DataLossError("no lease id") : id.status());
            }
            self.answered();
            self.lease_.granted(*id, self.now_);
          }));
      return;
    case LeaseClock::Step::kKeepAlive:
      lease_.asked();
      client_->call("lease/keepalive", etcdRequest("ID", lease_.id()),
                    guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
                      if (!reply.ok()) {
                        self.lease_.renewFailed(self.now_);
                        return self.failed("lease keepalive", reply.status());
                      }
                      self.answered();
                      const Json result = reply->value("result", Json::object());
                      absl::StatusOr<int64_t> ttl = etcdInteger(result, "TTL");
                      if (!ttl.ok() || *ttl <= 0) {
                        self.log_(absl::StrCat("fleet: lease ", self.lease_.id(),
                                               " is gone; taking a new one"));
                        return self.loseLease();
                      }
                      self.lease_.renewed(self.now_);
                    }));
      return;
  }
}

void FleetAgent::claimName() {
  const std::string key = keys_.instance(fleet_.name);
  own_.dirty = false;
  const EtcdTxn txn({{key, EtcdCompare::Target::kCreate, 0}},
                    {EtcdPut{key, renderInstanceReport(own_.report), lease_.id()}},
                    {EtcdRange{key}});
  claim_.in_flight = true;
  const int64_t lease = lease_.id();
  client_->call(
      "kv/txn", etcdRequest(txn), guarded([lease](FleetAgent& self, absl::StatusOr<Json> reply) {
        self.claim_.in_flight = false;
        if (!reply.ok()) {
          self.own_.dirty = true;
          self.claim_.not_before = self.now_ + kRetryInterval;
          return self.failed("registering the instance", reply.status());
        }
        self.answered();
        if (lease != self.lease_.id()) return;  // the lease changed meanwhile: claim again
        if (reply->value("succeeded", false)) {
          self.status_.registered = true;
          self.log_(absl::StrCat("fleet: registered as ", self.fleet_.name, " (lease ",
                                 self.lease_.id(), ")"));
          return;
        }
        // The key is there: ours from before (the same lease), or another live
        // instance's.
        int64_t holder = 0;
        if (reply->contains("responses") && (*reply)["responses"].is_array() &&
            !(*reply)["responses"].empty()) {
          if (absl::StatusOr<std::vector<EtcdKeyValue>> kvs =
                  etcdKeyValues((*reply)["responses"][0].value("response_range", Json::object()));
              kvs.ok() && !kvs->empty()) {
            holder = kvs->front().lease;
          }
        }
        // Ours: under this lease, or under the one it replaced (etcd was away longer
        // than the TTL and has not expired the old one yet); the next put moves it.
        if (holder == self.lease_.id() || (holder != 0 && holder == self.lease_.previous())) {
          self.status_.registered = true;
          self.own_.dirty = true;
          return;
        }
        self.own_.dirty = true;
        self.claim_.not_before = self.now_ + kRetryInterval;
        const std::string why =
            absl::StrCat("the name ", self.fleet_.name, " is held by another live instance (lease ",
                         holder, "); names must be unique in a fleet");
        if (self.status_.last_error != why) self.log_(absl::StrCat("fleet: ", why));
        self.status_.last_error = why;
      }));
}

void FleetAgent::putReport() {
  own_.dirty = false;
  own_.put_in_flight = true;
  const int64_t lease = lease_.id();
  client_->call(
      "kv/put",
      etcdRequest(EtcdPut{keys_.instance(fleet_.name), renderInstanceReport(own_.report), lease}),
      guarded([lease](FleetAgent& self, absl::StatusOr<Json> reply) {
        self.own_.put_in_flight = false;
        if (!reply.ok()) {
          self.own_.dirty = true;
          // A put under a lease etcd no longer has: take a new one.
          if (reply.status().code() == absl::StatusCode::kNotFound && lease == self.lease_.id()) {
            self.loseLease();
          }
          return self.failed("reporting the instance", reply.status());
        }
        self.answered();
      }));
}

void FleetAgent::setFingerprints(std::map<std::string, std::string> fingerprints) {
  if (fingerprints == own_.report.fingerprints) return;
  own_.report.fingerprints = std::move(fingerprints);
  own_.dirty = true;
}

void FleetAgent::setSyncEndpoint(std::string endpoint) {
  if (endpoint == own_.report.sync) return;
  own_.report.sync = std::move(endpoint);
  own_.dirty = true;
}

void FleetAgent::leave(absl::Time deadline) {
  if (lease_.id() == 0) return;
  client_->call("lease/revoke", etcdRequest("ID", lease_.id()), [](const absl::StatusOr<Json>&) {});
  lease_.revoked();
  status_.registered = false;
  client_->runUntilIdle(deadline);
}

}  // namespace berth
