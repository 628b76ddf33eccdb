#include "berth/fleet/admin.h"

#include <map>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/util/json_writer.h"
#include "berth/util/random_bytes.h"

namespace berth {
namespace {

using Json = EtcdClient::Json;

// A push's id: random, so that two pushers never stage under the same keys.
absl::StatusOr<std::string> newPushId() {
  unsigned char bytes[8];
  if (absl::Status status = fillRandom(bytes, sizeof(bytes)); !status.ok()) return status;
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

// One push's state across its callbacks.
struct Push : std::enable_shared_from_this<Push> {
  EtcdClient& client;
  FleetKeys keys;
  PushRequest request;
  std::function<void(absl::StatusOr<PushOutcome>)> done;
  std::string push_id;
  std::vector<TextPiece> pieces;
  std::vector<std::vector<size_t>> batches;
  size_t next_batch = 0;
  FleetHead previous;
  int64_t previous_revision = 0;
  PushOutcome outcome;

  Push(EtcdClient& client, FleetKeys keys, PushRequest request,
       std::function<void(absl::StatusOr<PushOutcome>)> done)
      : client(client), keys(std::move(keys)), request(std::move(request)), done(std::move(done)) {}

  void fail(absl::Status status) {
    done(std::move(status));
    done = nullptr;
  }

  void start() {
    absl::StatusOr<std::string> id = newPushId();
    if (!id.ok()) return fail(id.status());
    push_id = *std::move(id);
    pieces = splitVersionText(request.text, request.service_lines);
    batches = stagingBatches(pieces);
    client.call("kv/range", etcdRequest(EtcdRange{keys.head()}),
                [self = shared_from_this()](absl::StatusOr<Json> reply) { self->readHead(reply); });
  }

  void readHead(const absl::StatusOr<Json>& reply) {
    if (!reply.ok()) return fail(reply.status());
    absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(*reply);
    if (!kvs.ok()) return fail(kvs.status());
    if (!kvs->empty()) {
      absl::StatusOr<FleetHead> head = parseHead(kvs->front().value);
      if (!head.ok()) return fail(head.status());
      previous = *head;
      previous_revision = kvs->front().mod_revision;
    }
    stageNext();
  }

  void stageNext() {
    if (next_batch == batches.size()) return commit();
    EtcdTxn puts;
    for (size_t index : batches[next_batch]) {
      puts.success.push_back(EtcdPut{keys.piece(push_id, index), std::string(pieces[index].text)});
    }
    ++next_batch;
    client.call("kv/txn", etcdRequest(puts),
                [self = shared_from_this()](absl::StatusOr<Json> reply) {
                  if (!reply.ok()) return self->abandon(reply.status());
                  self->stageNext();
                });
  }

  void commit() {
    VersionManifest manifest =
        manifestFor(keys, previous.version + 1, push_id, request.text, pieces);
    manifest.pushed_by = request.pushed_by;
    manifest.pushed_at_ms = absl::ToUnixMillis(absl::Now());
    manifest.source = request.source;
    const FleetHead head{manifest.version, push_id};
    const EtcdTxn txn({{keys.head(), EtcdCompare::Target::kMod, previous_revision}},
                      {EtcdPut{keys.version(head.version), renderManifest(manifest)},
                       EtcdPut{keys.head(), renderHead(head)}},
                      {EtcdRange{keys.head()}});
    client.call("kv/txn", etcdRequest(txn),
                [self = shared_from_this(), head](absl::StatusOr<Json> reply) {
                  self->committed(reply, head);
                });
  }

  void committed(const absl::StatusOr<Json>& reply, const FleetHead& head) {
    if (!reply.ok()) return abandon(reply.status());
    if (!reply->value("succeeded", false)) {
      std::string winner = "another push";
      if (absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdTxnRange(*reply, 0);
          kvs.ok() && !kvs->empty()) {
        if (absl::StatusOr<FleetHead> now = parseHead(kvs->front().value); now.ok()) {
          winner = absl::StrCat("version ", now->version, " (push ", now->push_id, ")");
        }
      }
      return abandon(absl::AbortedError(
          absl::StrCat("another push committed first: the fleet now runs ", winner,
                       "; this push was not kept. Check the fleet's status and push again")));
    }
    outcome.version = head.version;
    outcome.push_id = head.push_id;
    absl::StatusOr<int64_t> revision = etcdRevision(*reply);
    outcome.revision = revision.ok() ? *revision : 0;
    // Retention: what is there now, read in one transaction.
    EtcdRange piece_keys = etcdPrefixRange(keys.piecesPrefix());
    piece_keys.keys_only = true;
    const EtcdTxn reads({}, {etcdPrefixRange(keys.versionsPrefix()), piece_keys});
    client.call("kv/txn", etcdRequest(reads),
                [self = shared_from_this()](absl::StatusOr<Json> reply) { self->retain(reply); });
  }

  // A push that did not commit takes its pieces away, then reports `why`.
  void abandon(absl::Status why) {
    client.call("kv/deleterange", etcdRequest(etcdPrefixRange(keys.piecesOf(push_id))),
                [self = shared_from_this(), why](const absl::StatusOr<Json>&) { self->fail(why); });
  }

  void retain(const absl::StatusOr<Json>& reply) {
    if (!reply.ok()) return finish(absl::StrCat("retention skipped: ", reply.status().message()));
    absl::StatusOr<std::vector<EtcdKeyValue>> manifests = etcdTxnRange(*reply, 0);
    absl::StatusOr<std::vector<EtcdKeyValue>> piece_keys = etcdTxnRange(*reply, 1);
    if (!manifests.ok() || !piece_keys.ok()) return finish("retention skipped: an odd reply");
    std::vector<StoredVersion> versions;
    for (const EtcdKeyValue& kv : *manifests) {
      absl::StatusOr<VersionManifest> manifest = parseManifest(kv.value);
      const uint64_t number = keys.versionOfKey(kv.key);
      if (number == 0) continue;
      // A manifest that cannot be read names no pieces; it still ages out by its number.
      versions.push_back(
          {number, manifest.ok() ? manifest->push_id : std::string(), kv.create_revision});
    }
    std::map<std::string, int64_t> first_created;
    for (const EtcdKeyValue& kv : *piece_keys) {
      const std::string push = keys.pushOfPieceKey(kv.key);
      if (push.empty()) continue;
      auto [it, inserted] = first_created.emplace(push, kv.create_revision);
      if (!inserted) it->second = std::min(it->second, kv.create_revision);
    }
    std::vector<StagedPush> staged;
    for (const auto& [push, revision] : first_created) staged.push_back({push, revision});
    const RetentionPlan plan = planRetention(keys, outcome.version, request.keep_versions, versions,
                                             staged, previous_revision);
    std::vector<EtcdOp> deletes;
    for (const std::string& key : plan.delete_keys) {
      deletes.push_back(EtcdDeleteRange{EtcdRange{key}});
    }
    for (const std::string& prefix : plan.delete_prefixes) {
      deletes.push_back(EtcdDeleteRange{etcdPrefixRange(prefix)});
    }
    if (deletes.empty()) return finish("");
    outcome.notes.push_back(
        absl::StrFormat("retention: %u older version(s) and %u unused piece set(s) deleted",
                        plan.delete_keys.size(), plan.delete_prefixes.size()));
    deleteBatch(std::move(deletes), 0, plan.compact_revision);
  }

  void deleteBatch(std::vector<EtcdOp> deletes, size_t from, int64_t compact_revision) {
    if (from >= deletes.size()) return compact(compact_revision);
    EtcdTxn batch;
    for (size_t i = from; i < deletes.size() && batch.success.size() < kMaxOpsPerTxn; ++i) {
      batch.success.push_back(deletes[i]);
    }
    const size_t next = from + batch.success.size();
    client.call(
        "kv/txn", etcdRequest(batch),
        [self = shared_from_this(), deletes = std::move(deletes), next,
         compact_revision](absl::StatusOr<Json> reply) mutable {
          if (!reply.ok()) {
            return self->finish(absl::StrCat("retention stopped: ", reply.status().message()));
          }
          self->deleteBatch(std::move(deletes), next, compact_revision);
        });
  }

  void compact(int64_t revision) {
    if (revision <= 0) return finish("");
    client.call("kv/compaction", etcdRequest("revision", revision),
                [self = shared_from_this(), revision](absl::StatusOr<Json> reply) {
                  // Compacted already at or past it (by another push or etcd's own
                  // auto-compaction) is as good.
                  self->finish(reply.ok() ? absl::StrCat("compacted at revision ", revision)
                                          : absl::StrCat("compaction at revision ", revision, ": ",
                                                         reply.status().message()));
                });
  }

  void finish(const std::string& note) {
    if (!note.empty()) outcome.notes.push_back(note);
    done(outcome);
    done = nullptr;
  }
};

}  // namespace

void pushVersion(EtcdClient& client, const FleetKeys& keys, PushRequest request,
                 std::function<void(absl::StatusOr<PushOutcome>)> done) {
  std::make_shared<Push>(client, keys, std::move(request), std::move(done))->start();
}

FleetAgreement FleetStatus::agreement() const {
  return compareInstances(head ? head->version : 0, instances,
                          generation ? generation->generation : 0);
}

void readFleetStatus(EtcdClient& client, const FleetKeys& keys,
                     std::function<void(absl::StatusOr<FleetStatus>)> done,
                     uint32_t health_quorum) {
  // The generation's keys share the fleet's prefix: the head's key without its "/head".
  const std::string head_key = keys.head();
  const GenerationKeys generation_keys(head_key.substr(0, head_key.size() - 5));
  EtcdRange newest_manifest = etcdPrefixRange(keys.versionsPrefix());
  newest_manifest.greatest_key_only = true;
  const EtcdTxn reads(
      {}, {EtcdRange{keys.head()}, newest_manifest, etcdPrefixRange(keys.instancesPrefix()),
           EtcdRange{generation_keys.leader()}, EtcdRange{generation_keys.generation()}});
  client.call("kv/txn", etcdRequest(reads),
              [done = std::move(done), health_quorum](absl::StatusOr<Json> reply) {
                if (!reply.ok()) return done(reply.status());
                FleetStatus status;
                absl::StatusOr<int64_t> revision = etcdRevision(*reply);
                if (!revision.ok()) return done(revision.status());
                status.revision = *revision;
                absl::StatusOr<std::vector<EtcdKeyValue>> head = etcdTxnRange(*reply, 0);
                absl::StatusOr<std::vector<EtcdKeyValue>> manifest = etcdTxnRange(*reply, 1);
                absl::StatusOr<std::vector<EtcdKeyValue>> instances = etcdTxnRange(*reply, 2);
                if (!head.ok()) return done(head.status());
                if (!manifest.ok()) return done(manifest.status());
                if (!instances.ok()) return done(instances.status());
                if (!head->empty()) {
                  absl::StatusOr<FleetHead> parsed = parseHead(head->front().value);
                  if (!parsed.ok()) return done(parsed.status());
                  status.head = *parsed;
                }
                if (!manifest->empty()) {
                  absl::StatusOr<VersionManifest> parsed = parseManifest(manifest->front().value);
                  if (parsed.ok() && status.head && parsed->version == status.head->version) {
                    status.manifest = *std::move(parsed);
                  }
                }
                std::vector<InstanceVerdicts> verdicts;
                for (const EtcdKeyValue& kv : *instances) {
                  absl::StatusOr<InstanceReport> report = parseInstanceReport(kv.value);
                  if (report.ok()) {
                    verdicts.push_back(InstanceVerdicts{report->name, report->health});
                    status.instances.push_back(*std::move(report));
                  } else {
                    status.unreadable.push_back(kv.key);
                  }
                }
                status.health = agreeOnHealth(verdicts, health_quorum);
                absl::StatusOr<std::vector<EtcdKeyValue>> leader = etcdTxnRange(*reply, 3);
                if (leader.ok() && !leader->empty()) status.leader = leader->front().value;
                absl::StatusOr<std::vector<EtcdKeyValue>> generation = etcdTxnRange(*reply, 4);
                if (generation.ok() && !generation->empty()) {
                  absl::StatusOr<GenerationManifest> parsed =
                      parseGenerationManifest(generation->front().value);
                  if (parsed.ok()) status.generation = *std::move(parsed);
                }
                done(std::move(status));
              });
}

namespace {

std::string timeOf(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

}  // namespace

std::string renderFleetStatus(const FleetStatus& status) {
  std::string text;
  if (!status.head) {
    absl::StrAppend(&text, "fleet: no version pushed yet\n");
  } else {
    absl::StrAppend(&text, "fleet version ", status.head->version, " (push ", status.head->push_id,
                    ")");
    if (status.manifest) {
      absl::StrAppend(&text, " from ", status.manifest->source, ", pushed by ",
                      status.manifest->pushed_by, " at ", timeOf(status.manifest->pushed_at_ms),
                      ", ", status.manifest->services.size(), " service(s)");
    }
    absl::StrAppend(&text, "\n");
  }
  absl::StrAppend(
      &text, "\n",
      absl::StrFormat("%-24s %8s  %-24s %s\n", "instance", "version", "applied at", "note"));
  for (const InstanceReport& instance : status.instances) {
    std::string note = instance.from_cache ? "serving its cached version" : "";
    if (instance.refused_version > instance.version) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", "refused version ", instance.refused_version,
                      ": ", instance.refused_why);
    }
    absl::StrAppend(&text, absl::StrFormat("%-24s %8u  %-24s %s\n", instance.name, instance.version,
                                           timeOf(instance.applied_at_ms), note));
  }
  for (const std::string& key : status.unreadable) {
    absl::StrAppend(&text, "(unreadable report at ", key, ")\n");
  }
  // Each service's fingerprint per instance.
  std::map<std::string, std::vector<std::string>> services;
  for (const InstanceReport& instance : status.instances) {
    for (const auto& [service, fingerprint] : instance.fingerprints) {
      services[service].push_back(absl::StrCat(instance.name, "=", fingerprint));
    }
  }
  if (!services.empty()) absl::StrAppend(&text, "\nservice fingerprints:\n");
  for (const auto& [service, fingerprints] : services) {
    absl::StrAppend(&text, "  ", service, ": ", absl::StrJoin(fingerprints, " "), "\n");
  }
  if (status.generation) {
    absl::StrAppend(&text, "\ntable generation ", status.generation->generation, ", made by ",
                    status.generation->made_by, " at ", timeOf(status.generation->made_at_ms),
                    " for version ", status.generation->config_version,
                    "; elected now: ", status.leader.empty() ? std::string("none") : status.leader,
                    "\n");
  }
  // The backends whose verdicts not every live instance shares: the quorum's word decides.
  for (const auto& [backend, instances] : status.health.dissent) {
    const auto down = status.health.down.find(backend.first);
    const bool fleet_down =
        down != status.health.down.end() && down->second.count(backend.second) != 0;
    absl::StrAppend(&text, "health: ", backend.first, "/", backend.second, " ",
                    fleet_down ? "down" : "up", " by the fleet's word (quorum ",
                    status.health.quorum, "); ", absl::StrJoin(instances, ", "), " see",
                    instances.size() == 1 ? "s" : "", " it ", fleet_down ? "up" : "down", "\n");
  }
  const FleetAgreement agreement = status.agreement();
  if (status.instances.empty()) {
    absl::StrAppend(&text, "\nno live instances\n");
  } else if (agreement.agree) {
    absl::StrAppend(&text, "\nagree: yes, ", status.instances.size(),
                    " instance(s) on the same version and tables\n");
  } else {
    absl::StrAppend(&text, "\nagree: no\n");
    for (const std::string& line : agreement.disagreements) {
      absl::StrAppend(&text, "  ", line, "\n");
    }
  }
  return text;
}

std::string renderFleetStatusJson(const FleetStatus& status) {
  JsonWriter json;
  json.beginObject();
  json.key("revision").value(status.revision);
  json.key("version").value(status.head ? status.head->version : 0);
  json.key("push").value(status.head ? status.head->push_id : "");
  if (status.manifest) {
    json.key("pushed_by").value(status.manifest->pushed_by);
    json.key("pushed_at_ms").value(status.manifest->pushed_at_ms);
    json.key("source").value(status.manifest->source);
    json.key("services").strings(status.manifest->services);
  }
  // Each instance as it reported itself in etcd.
  json.key("instances").beginArray();
  for (const InstanceReport& instance : status.instances) json.raw(renderInstanceReport(instance));
  json.endArray();
  json.key("unreadable").strings(status.unreadable);
  const FleetAgreement agreement = status.agreement();
  json.key("agree").value(agreement.agree && !status.instances.empty());
  json.key("disagreements").strings(agreement.disagreements);
  json.key("leader").value(status.leader);
  json.key("generation").value(status.generation ? status.generation->generation : 0);
  json.key("health_quorum").value(status.health.quorum);
  json.key("dissent").beginArray();
  for (const auto& [backend, instances] : status.health.dissent) {
    const auto down = status.health.down.find(backend.first);
    const bool fleet_down =
        down != status.health.down.end() && down->second.count(backend.second) != 0;
    json.beginObject().key("service").value(backend.first).key("backend").value(backend.second);
    json.key("fleet_says").value(fleet_down ? "down" : "up");
    json.key("instances").strings(instances).endObject();
  }
  json.endArray().endObject();
  return json.str() + "\n";
}

}  // namespace berth
