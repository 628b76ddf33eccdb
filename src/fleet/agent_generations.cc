// The fleet agent's part in table generations (fleet/generation.h, docs/scale-out.md): the
// election through a leased key, the elected instance's plans and writes, and every instance's
// fetch of the generation in force. Like the rest of the agent, it never waits: etcd's replies
// come through turn(), and decoding and planning run on the agent's background thread.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "berth/fleet/agent.h"
#include "berth/net/crc32c.h"

namespace berth {
namespace {

using Json = EtcdClient::Json;

}  // namespace

void FleetAgent::setVerdicts(std::map<std::string, std::map<std::string, bool>> up) {
  if (up == own_.report.health) return;
  own_.report.health = std::move(up);
  own_.dirty = true;
  roster_.agree(own_.report.health);
}

void FleetAgent::setFailSafe(std::vector<std::string> removed) {
  if (removed == own_.report.fail_safe) return;
  own_.report.fail_safe = std::move(removed);
  own_.dirty = true;
}

void FleetAgent::setServices(std::shared_ptr<const std::vector<ServiceConfig>> services,
                             uint64_t version) {
  services_.list = std::move(services);
  services_.version = version;
  ++services_.serial;
}

std::shared_ptr<const FleetGeneration> FleetAgent::takeGeneration() {
  // A generation made for a version this instance is still fetching or building waits for it:
  // taken first, it would be served with the old version's backends, and the version would then
  // move the same slots again.
  if (generations_.offered && versions_.onItsWay(generations_.offered->manifest.config_version)) {
    return nullptr;
  }
  return std::exchange(generations_.offered, nullptr);
}

void FleetAgent::generationApplied(uint64_t number) {
  if (own_.report.generation == number) return;
  own_.report.generation = number;
  own_.dirty = true;
}

void FleetAgent::generationFailed(absl::string_view what, const absl::Status& status) {
  status_.generation_error = absl::StrCat(what, ": ", status.message());
  failed(what, status);
}

void FleetAgent::turnGenerations(absl::Time now) {
  collectBackground();
  if (!view_.in_flight && now >= view_.not_before) viewFleet();
  if (status_.registered && status_.leader.empty() && !leadership_.campaign_in_flight &&
      lease_.id() != 0) {
    campaign();
  }
  if (stored_.manifest && generations_.fetching == 0 && now >= generations_.not_before &&
      stored_.manifest->generation != generations_.unreadable &&
      (!generations_.current ||
       generations_.current->manifest.generation != stored_.manifest->generation)) {
    fetchGeneration(*stored_.manifest);
  }
  if (status_.elected && !plan_.in_flight && now >= plan_.not_before) planNext();
}

// --- what the fleet looks like -----------------------------------------------------------------

void FleetAgent::viewFleet() {
  view_.in_flight = true;
  view_.not_before = now_ + kViewInterval;
  const EtcdTxn reads(
      {}, {EtcdRange{generation_keys_.leader()}, EtcdRange{generation_keys_.generation()},
           etcdPrefixRange(keys_.instancesPrefix())});
  client_->call("kv/txn", etcdRequest(reads),
                guarded([](FleetAgent& self, absl::StatusOr<Json> reply) {
                  self.view_.in_flight = false;
                  if (!reply.ok()) return self.failed("reading the fleet", reply.status());
                  self.answered();
                  self.viewed(*reply);
                }));
}

void FleetAgent::viewed(const Json& reply) {
  // The elected instance.
  absl::StatusOr<std::vector<EtcdKeyValue>> leader = etcdTxnRange(reply, 0);
  const std::string was_leader = status_.leader;
  const bool was_elected = status_.elected;
  status_.leader.clear();
  status_.elected = false;
  if (leader.ok() && !leader->empty()) {
    status_.leader = leader->front().value;
    status_.elected = lease_.id() != 0 && leader->front().lease == lease_.id() &&
                      leader->front().create_revision == leadership_.revision;
  }
  if (status_.leader != was_leader || status_.elected != was_elected) {
    log_(status_.elected ? absl::StrCat("fleet: elected to make the table generations")
         : status_.leader.empty()
             ? std::string("fleet: no instance is elected")
             : absl::StrCat("fleet: ", status_.leader, " makes the table generations"));
  }
  if (!status_.elected) planned_from_.reset();  // elected again later: plan afresh

  // The generation in force.
  absl::StatusOr<std::vector<EtcdKeyValue>> generation = etcdTxnRange(reply, 1);
  if (generation.ok() && !generation->empty()) {
    absl::StatusOr<GenerationManifest> manifest =
        parseGenerationManifest(generation->front().value);
    if (!manifest.ok()) {
      generationFailed("reading the fleet's generation", manifest.status());
    } else {
      stored_.manifest = *std::move(manifest);
      stored_.revision = generation->front().mod_revision;
      status_.generation_head = stored_.manifest->generation;
    }
  } else if (generation.ok()) {
    stored_.manifest.reset();
    stored_.revision = 0;
  }

  // Every live instance's report, and the health they agree on.
  absl::StatusOr<std::vector<EtcdKeyValue>> instances = etcdTxnRange(reply, 2);
  if (!instances.ok()) return failed("reading the instances' reports", instances.status());
  std::vector<InstanceReport> live;
  for (const EtcdKeyValue& kv : *instances) {
    absl::StatusOr<InstanceReport> report = parseInstanceReport(kv.value);
    if (!report.ok()) continue;  // a release that writes another format: not counted
    live.push_back(*std::move(report));
  }
  for (const std::string& name : roster_.update(std::move(live), now_, own_.report.health)) {
    log_(absl::StrCat("fleet: instance ", name, " left; its verdicts still count for ",
                      absl::FormatDuration(kDepartedHold)));
  }
}

void FleetAgent::campaign() {
  const std::string key = generation_keys_.leader();
  leadership_.campaign_in_flight = true;
  const int64_t lease = lease_.id();
  const EtcdTxn txn({{key, EtcdCompare::Target::kCreate, 0}}, {EtcdPut{key, fleet_.name, lease}});
  client_->call("kv/txn", etcdRequest(txn),
                guarded([lease](FleetAgent& self, absl::StatusOr<Json> reply) {
                  self.leadership_.campaign_in_flight = false;
                  if (!reply.ok()) return self.failed("standing for election", reply.status());
                  self.answered();
                  if (!reply->value("succeeded", false) || lease != self.lease_.id()) return;
                  // The key was created in this transaction: its create revision is the reply's.
                  absl::StatusOr<int64_t> revision = etcdRevision(*reply);
                  if (!revision.ok()) return;
                  self.leadership_.revision = *revision;
                  self.view_.not_before = self.now_;  // see the election at once
                }));
  // Until the view confirms it, nobody is taken for elected; the next view reads the key.
  status_.leader = "(election under way)";
}

EtcdCompare FleetAgent::leaderCompare() const {
  return {generation_keys_.leader(), EtcdCompare::Target::kCreate, leadership_.revision};
}

// --- fetching the generation in force ----------------------------------------------------------

void FleetAgent::fetchGeneration(const GenerationManifest& manifest) {
  generations_.fetching = manifest.generation;
  // Only the tables this instance does not hold already: an unchanged table keeps its pieces.
  EtcdTxn reads;
  for (const GenerationService& service : manifest.services) {
    if (service.stored_in == 0) continue;
    const GenerationService* held =
        generations_.current ? generations_.current->manifest.find(service.service) : nullptr;
    if (held != nullptr && held->stored_in == service.stored_in &&
        generations_.current->tables.count(service.service) != 0) {
      continue;
    }
    reads.success.push_back(
        etcdPrefixRange(generation_keys_.tablePiecesOf(service.service, service.stored_in)));
  }
  if (reads.success.empty()) return decodeGeneration(manifest, {});
  const size_t ranges = reads.success.size();
  client_->call("kv/txn", etcdRequest(reads),
                guarded([manifest, ranges](FleetAgent& self, absl::StatusOr<Json> reply) {
                  const std::string what =
                      absl::StrCat("fetching table generation ", manifest.generation);
                  if (!reply.ok()) {
                    self.generations_.fetching = 0;
                    self.generations_.not_before = self.now_ + kRetryInterval;
                    return self.generationFailed(what, reply.status());
                  }
                  self.answered();
                  std::map<std::string, std::string> pieces;
                  for (size_t n = 0; n < ranges; ++n) {
                    absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdTxnRange(*reply, n);
                    if (!kvs.ok()) {
                      self.generations_.fetching = 0;
                      self.generations_.not_before = self.now_ + kRetryInterval;
                      return self.generationFailed(what, kvs.status());
                    }
                    for (EtcdKeyValue& kv : *kvs) pieces[kv.key] = std::move(kv.value);
                  }
                  self.decodeGeneration(manifest, std::move(pieces));
                }));
}

void FleetAgent::decodeGeneration(GenerationManifest manifest,
                                  std::map<std::string, std::string> pieces) {
  std::shared_ptr<const FleetGeneration> held = generations_.current;
  const bool posted = background_->post([this, manifest = std::move(manifest),
                                         pieces = std::move(pieces), held]() mutable {
    absl::StatusOr<FleetGeneration> result = [&]() -> absl::StatusOr<FleetGeneration> {
      FleetGeneration generation;
      for (const GenerationService& service : manifest.services) {
        if (service.stored_in == 0) continue;
        const GenerationService* kept = held ? held->manifest.find(service.service) : nullptr;
        if (kept != nullptr && kept->stored_in == service.stored_in) {
          if (const auto table = held->tables.find(service.service); table != held->tables.end()) {
            generation.tables.emplace(service.service, table->second);
            continue;
          }
        }
        absl::StatusOr<StoredTable> stored = assembleStoredTable(service, pieces);
        if (!stored.ok()) return stored.status();
        absl::StatusOr<Table> table = tableOf(*stored);
        if (!table.ok()) return table.status();
        generation.tables.emplace(service.service, *std::move(table));
      }
      generation.manifest = std::move(manifest);
      return generation;
    }();
    std::lock_guard<std::mutex> lock(results_.mutex);
    results_.decoded = std::move(result);
  });
  if (!posted) generations_.fetching = 0;
}

void FleetAgent::collectBackground() {
  std::optional<absl::StatusOr<FleetGeneration>> decoded;
  std::optional<absl::StatusOr<std::optional<PlannedGeneration>>> planned;
  {
    std::lock_guard<std::mutex> lock(results_.mutex);
    decoded = std::exchange(results_.decoded, std::nullopt);
    planned = std::exchange(results_.planned, std::nullopt);
  }
  if (decoded) {
    const uint64_t number = generations_.fetching;
    generations_.fetching = 0;
    if (!decoded->ok()) {
      // Stored wrong (a piece lost or altered): no retry mends it. The elected instance plans
      // the next generation afresh past it.
      generations_.unreadable = number;
      generationFailed(absl::StrCat("reading table generation ", number), decoded->status());
    } else if (!generations_.current ||
               generations_.current->manifest.generation != (*decoded)->manifest.generation) {
      generations_.current = std::make_shared<const FleetGeneration>(*std::move(*decoded));
      generations_.offered = generations_.current;
      status_.generation_error.clear();
    }
  }
  if (planned) {
    if (!planned->ok()) {
      plan_.in_flight = false;
      plan_.not_before = now_ + kRetryInterval;
      generationFailed("planning the next table generation", planned->status());
    } else if (!planned->value()) {
      plan_.in_flight = false;  // nothing changed
    } else {
      storeGeneration(*std::move(planned->value()));
    }
  }
}

// --- the elected instance ----------------------------------------------------------------------

void FleetAgent::planNext() {
  if (!services_.list) return;
  // Plan from the generation in force, once this instance holds it; past one that cannot be
  // read, from its number alone.
  std::shared_ptr<const FleetGeneration> previous = generations_.current;
  if (stored_.manifest && (!generations_.current || generations_.current->manifest.generation !=
                                                        stored_.manifest->generation)) {
    if (stored_.manifest->generation != generations_.unreadable) return;  // still fetching it
    auto numbered = std::make_shared<FleetGeneration>();
    numbered->manifest.generation = stored_.manifest->generation;
    previous = std::move(numbered);
  }
  PlanInputs inputs{previous ? previous->manifest.generation : 0, services_.serial,
                    roster_.agreed().down, roster_.agreed().judged};
  if (planned_from_ == inputs) return;
  planned_from_ = inputs;
  plan_.in_flight = true;
  const bool posted = background_->post([this, previous, services = services_.list,
                                         version = services_.version, agreed = roster_.agreed(),
                                         keys = generation_keys_, name = fleet_.name] {
    absl::StatusOr<std::optional<PlannedGeneration>> planned = planGeneration(
        keys, previous.get(), *services, version, agreed, name, absl::ToUnixMillis(absl::Now()));
    std::lock_guard<std::mutex> lock(results_.mutex);
    results_.planned = std::move(planned);
  });
  if (!posted) {
    plan_.in_flight = false;
    planned_from_.reset();
  }
}

void FleetAgent::storeGeneration(PlannedGeneration planned) {
  // The changed tables' pieces, in transactions within etcd's limits, each only while this
  // instance is still the elected one, so that a deposed instance never writes over its
  // successor's pieces.
  std::vector<std::vector<std::pair<std::string, std::string>>> batches(1);
  size_t batch_bytes = 0;
  for (const GenerationService& service : planned.generation.manifest.services) {
    const auto encoded = planned.encoded.find(service.service);
    if (encoded == planned.encoded.end()) continue;
    size_t at = 0;
    for (const VersionPiece& piece : service.pieces) {
      const size_t base64 = (piece.bytes + 2) / 3 * 4 + (piece.key.size() + 2) / 3 * 4;
      if (!batches.back().empty() && (batches.back().size() + 1 >= kMaxOpsPerTxn ||
                                      batch_bytes + base64 > kMaxTxnPayloadBytes)) {
        batches.emplace_back();
        batch_bytes = 0;
      }
      batches.back().emplace_back(piece.key, encoded->second.substr(at, piece.bytes));
      batch_bytes += base64;
      at += piece.bytes;
    }
  }
  if (batches.back().empty()) batches.pop_back();
  stageNext(std::make_shared<const PlannedGeneration>(std::move(planned)), std::move(batches), 0);
}

void FleetAgent::stageNext(std::shared_ptr<const PlannedGeneration> planned,
                           std::vector<std::vector<std::pair<std::string, std::string>>> batches,
                           size_t next) {
  if (next == batches.size()) return commitGeneration(std::move(planned));
  EtcdTxn puts({leaderCompare()}, {});
  for (const auto& [key, value] : batches[next]) puts.success.push_back(EtcdPut{key, value});
  client_->call("kv/txn", etcdRequest(puts),
                guarded([planned, batches = std::move(batches), next](
                            FleetAgent& self, absl::StatusOr<Json> reply) mutable {
                  const uint64_t number = planned->generation.manifest.generation;
                  if (!reply.ok() || !reply->value("succeeded", false)) {
                    self.plan_.in_flight = false;
                    self.plan_.not_before = self.now_ + kRetryInterval;
                    self.planned_from_.reset();
                    if (!reply.ok()) {
                      return self.generationFailed(
                          absl::StrCat("storing table generation ", number), reply.status());
                    }
                    self.log_(absl::StrCat("fleet: table generation ", number,
                                           " not stored: this instance is no longer elected"));
                    self.status_.elected = false;
                    return;
                  }
                  self.stageNext(std::move(planned), std::move(batches), next + 1);
                }));
}

void FleetAgent::commitGeneration(std::shared_ptr<const PlannedGeneration> planned) {
  const GenerationManifest& manifest = planned->generation.manifest;
  const std::string key = generation_keys_.generation();
  // Numbers without a gap: the manifest replaces exactly the one it was planned from.
  const EtcdTxn txn(
      {leaderCompare(), {key, EtcdCompare::Target::kMod, stored_.manifest ? stored_.revision : 0}},
      {EtcdPut{key, renderGenerationManifest(manifest)}});
  std::optional<GenerationManifest> previous = stored_.manifest;
  client_->call(
      "kv/txn", etcdRequest(txn),
      guarded([planned, previous](FleetAgent& self, absl::StatusOr<Json> reply) {
        self.plan_.in_flight = false;
        const GenerationManifest& made = planned->generation.manifest;
        if (!reply.ok()) {
          self.plan_.not_before = self.now_ + kRetryInterval;
          self.planned_from_.reset();
          return self.generationFailed(absl::StrCat("storing table generation ", made.generation),
                                       reply.status());
        }
        self.answered();
        if (!reply->value("succeeded", false)) {
          // Deposed, or the generation moved meanwhile: look again before planning again.
          self.planned_from_.reset();
          self.view_.not_before = self.now_;
          self.plan_.not_before = self.now_ + kViewInterval;
          self.log_(absl::StrCat("fleet: table generation ", made.generation,
                                 " not stored: the fleet's generation or election moved first"));
          return;
        }
        ++self.status_.generations_made;
        self.status_.generation_error.clear();
        std::vector<std::string> down;
        for (const GenerationService& service : made.services) {
          for (const std::string& backend : service.down) {
            down.push_back(absl::StrCat(service.service, "/", backend));
          }
        }
        self.log_(absl::StrCat("fleet: made table generation ", made.generation, " for version ",
                               made.config_version, ", ", planned->encoded.size(),
                               " table(s) stored anew; down by the fleet's word: ",
                               down.empty() ? "none" : absl::StrJoin(down, ", ")));
        if (absl::StatusOr<int64_t> revision = etcdRevision(*reply); revision.ok()) {
          self.stored_.revision = *revision;
        }
        self.stored_.manifest = made;
        self.status_.generation_head = made.generation;
        self.generations_.current = std::make_shared<const FleetGeneration>(planned->generation);
        self.generations_.offered = self.generations_.current;
        if (self.planned_from_) self.planned_from_->generation = made.generation;
        self.dropUnneededTables(made, previous);
      }));
}

void FleetAgent::dropUnneededTables(const GenerationManifest& committed,
                                    std::optional<GenerationManifest> previous) {
  EtcdRange list = etcdPrefixRange(generation_keys_.tablesPrefix());
  list.keys_only = true;
  client_->call(
      "kv/range", etcdRequest(list),
      guarded([committed, previous](FleetAgent& self, absl::StatusOr<Json> reply) {
        if (!reply.ok()) return;  // the next generation tries again
        absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(*reply);
        if (!kvs.ok()) return;
        std::vector<std::pair<std::string, uint64_t>> stored;
        for (const EtcdKeyValue& kv : *kvs) {
          std::string part;
          if (const uint64_t number = self.generation_keys_.generationOfTableKey(kv.key, &part)) {
            stored.emplace_back(std::move(part), number);
          }
        }
        const std::vector<std::string> prefixes = unneededTablePrefixes(
            self.generation_keys_, committed, previous ? &*previous : nullptr, stored);
        if (prefixes.empty()) return;
        EtcdTxn deletes({self.leaderCompare()}, {});
        for (const std::string& prefix : prefixes) {
          deletes.success.push_back(EtcdDeleteRange{etcdPrefixRange(prefix)});
        }
        self.client_->call("kv/txn", etcdRequest(deletes), [](const absl::StatusOr<Json>&) {});
      }));
}

}  // namespace berth
