#include "berth/fleet/store.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "berth/net/crc32c.h"
#include "berth/util/status_macros.h"
#include "fleet/json_fields.h"

namespace berth {
namespace {

using fleet_json::beginValue;
using fleet_json::crcOf;
using fleet_json::Json;
using fleet_json::kFormat;
using fleet_json::parseObject;
using fleet_json::readNames;
using fleet_json::readPieces;
using fleet_json::writePieces;

// The offset of the start of 1-based line `line` in `text`, or text.size() past the end.
size_t lineStart(absl::string_view text, int line) {
  size_t offset = 0;
  for (int at = 1; at < line; ++at) {
    const size_t newline = text.find('\n', offset);
    if (newline == absl::string_view::npos) return text.size();
    offset = newline + 1;
  }
  return offset;
}

}  // namespace

std::string FleetKeys::head() const { return absl::StrCat(prefix_, "/head"); }
std::string FleetKeys::versionsPrefix() const { return absl::StrCat(prefix_, "/versions/"); }
std::string FleetKeys::version(uint64_t number) const {
  return absl::StrCat(versionsPrefix(), absl::StrFormat("%020u", number));
}
std::string FleetKeys::piecesPrefix() const { return absl::StrCat(prefix_, "/pieces/"); }
std::string FleetKeys::piecesOf(absl::string_view push_id) const {
  return absl::StrCat(piecesPrefix(), push_id, "/");
}
std::string FleetKeys::piece(absl::string_view push_id, size_t index) const {
  return absl::StrCat(piecesOf(push_id), absl::StrFormat("%06u", index));
}
std::string FleetKeys::instancesPrefix() const { return absl::StrCat(prefix_, "/instances/"); }
std::string FleetKeys::instance(absl::string_view name) const {
  return absl::StrCat(instancesPrefix(), name);
}

uint64_t FleetKeys::versionOfKey(absl::string_view key) const {
  if (!absl::ConsumePrefix(&key, versionsPrefix())) return 0;
  uint64_t number = 0;
  return key.size() == 20 && absl::SimpleAtoi(key, &number) ? number : 0;
}

std::string FleetKeys::pushOfPieceKey(absl::string_view key) const {
  if (!absl::ConsumePrefix(&key, piecesPrefix())) return "";
  const size_t slash = key.find('/');
  return slash == absl::string_view::npos ? "" : std::string(key.substr(0, slash));
}

std::string renderHead(const FleetHead& head) {
  JsonWriter json;
  beginValue(json).key("version").value(head.version).key("push").value(head.push_id);
  return json.endObject().str();
}

absl::StatusOr<FleetHead> parseHead(absl::string_view text) {
  BERTH_ASSIGN_OR_RETURN(const Json json, parseObject(text, "the fleet's head"));
  FleetHead head;
  BERTH_FIELD(head.version, uint64_t, json, "version", "the fleet's head");
  BERTH_FIELD(head.push_id, std::string, json, "push", "the fleet's head");
  return head;
}

std::string renderManifest(const VersionManifest& manifest) {
  JsonWriter json;
  beginValue(json).key("version").value(manifest.version).key("push").value(manifest.push_id);
  json.key("pushed_by").value(manifest.pushed_by).key("pushed_at_ms").value(manifest.pushed_at_ms);
  json.key("source").value(manifest.source);
  json.key("bytes").value(manifest.bytes).key("crc32c").value(manifest.crc32c);
  json.key("services").strings(manifest.services);
  writePieces(json, manifest.pieces, /*with_service=*/true);
  return json.endObject().str();
}

absl::StatusOr<VersionManifest> parseManifest(absl::string_view text) {
  constexpr absl::string_view kWhat = "a version manifest";
  BERTH_ASSIGN_OR_RETURN(const Json json, parseObject(text, kWhat));
  VersionManifest manifest;
  BERTH_FIELD(manifest.version, uint64_t, json, "version", kWhat);
  BERTH_FIELD(manifest.push_id, std::string, json, "push", kWhat);
  BERTH_FIELD(manifest.pushed_by, std::string, json, "pushed_by", kWhat);
  BERTH_FIELD(manifest.pushed_at_ms, int64_t, json, "pushed_at_ms", kWhat);
  BERTH_FIELD(manifest.source, std::string, json, "source", kWhat);
  BERTH_FIELD(manifest.bytes, uint64_t, json, "bytes", kWhat);
  BERTH_FIELD(manifest.crc32c, uint32_t, json, "crc32c", kWhat);
  BERTH_RETURN_IF_ERROR(readNames(json, "services", kWhat, manifest.services));
  BERTH_RETURN_IF_ERROR(readPieces(json, kWhat, nullptr, manifest.pieces));
  return manifest;
}

std::vector<TextPiece> splitVersionText(
    absl::string_view text, const std::vector<std::pair<std::string, int>>& service_lines,
    size_t max_piece_bytes) {
  // Cut points: where each service's line starts, kept only while they move forward (a flow
  // sequence puts every service on one line, and so in one piece).
  std::vector<std::pair<size_t, std::string>> starts = {{0, ""}};
  for (const auto& [name, line] : service_lines) {
    const size_t offset = lineStart(text, line);
    if (offset <= starts.back().first || offset >= text.size()) continue;
    starts.emplace_back(offset, name);
  }
  std::vector<TextPiece> pieces;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1].first : text.size();
    absl::string_view rest = text.substr(starts[i].first, end - starts[i].first);
    do {
      const size_t take = std::min(rest.size(), std::max<size_t>(max_piece_bytes, 1));
      pieces.push_back({starts[i].second, rest.substr(0, take)});
      rest.remove_prefix(take);
    } while (!rest.empty());
  }
  return pieces;
}

VersionManifest manifestFor(const FleetKeys& keys, uint64_t version, const std::string& push_id,
                            absl::string_view text, const std::vector<TextPiece>& pieces) {
  VersionManifest manifest;
  manifest.version = version;
  manifest.push_id = push_id;
  manifest.bytes = text.size();
  manifest.crc32c = crcOf(text);
  for (size_t i = 0; i < pieces.size(); ++i) {
    manifest.pieces.push_back(
        {keys.piece(push_id, i), pieces[i].service, pieces[i].text.size(), crcOf(pieces[i].text)});
    if (!pieces[i].service.empty() &&
        (manifest.services.empty() || manifest.services.back() != pieces[i].service)) {
      manifest.services.push_back(pieces[i].service);
    }
  }
  return manifest;
}

absl::StatusOr<std::string> assemblePieces(const std::vector<VersionPiece>& named, uint64_t bytes,
                                           uint32_t crc32c,
                                           const std::map<std::string, std::string>& pieces,
                                           absl::string_view what) {
  std::string whole;
  whole.reserve(bytes);
  for (const VersionPiece& piece : named) {
    const auto it = pieces.find(piece.key);
    if (it == pieces.end()) {
      return absl::DataLossError(absl::StrCat(what, ": piece ", piece.key, " is missing"));
    }
    if (it->second.size() != piece.bytes || crcOf(it->second) != piece.crc32c) {
      return absl::DataLossError(
          absl::StrCat(what, ": piece ", piece.key, " does not match its size and checksum"));
    }
    whole += it->second;
  }
  if (whole.size() != bytes || crcOf(whole) != crc32c) {
    return absl::DataLossError(absl::StrCat(what, " does not match its size and checksum"));
  }
  return whole;
}

absl::StatusOr<std::string> assembleVersionText(const VersionManifest& manifest,
                                                const std::map<std::string, std::string>& pieces) {
  return assemblePieces(manifest.pieces, manifest.bytes, manifest.crc32c, pieces,
                        absl::StrCat("version ", manifest.version));
}

std::vector<std::vector<size_t>> stagingBatches(const std::vector<TextPiece>& pieces) {
  std::vector<std::vector<size_t>> batches;
  size_t payload = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t encoded = (pieces[i].text.size() + 2) / 3 * 4;
    if (batches.empty() || batches.back().size() == kMaxOpsPerTxn ||
        (payload + encoded > kMaxTxnPayloadBytes && !batches.back().empty())) {
      batches.emplace_back();
      payload = 0;
    }
    batches.back().push_back(i);
    payload += encoded;
  }
  return batches;
}

RetentionPlan planRetention(const FleetKeys& keys, uint64_t head, uint32_t keep,
                            const std::vector<StoredVersion>& versions,
                            const std::vector<StagedPush>& staged, int64_t replaced_revision) {
  RetentionPlan plan;
  const uint64_t oldest_kept = head >= keep ? head - keep + 1 : 1;
  std::set<std::string> named;
  int64_t oldest_kept_revision = 0;
  for (const StoredVersion& stored : versions) {
    if (stored.version < oldest_kept) {
      plan.delete_keys.push_back(keys.version(stored.version));
      continue;
    }
    named.insert(stored.push_id);
    if (oldest_kept_revision == 0 || stored.create_revision < oldest_kept_revision) {
      oldest_kept_revision = stored.create_revision;
    }
  }
  for (const StagedPush& push : staged) {
    if (named.count(push.push_id) != 0) continue;
    if (push.first_create_revision > replaced_revision) continue;  // may still be committing
    plan.delete_prefixes.push_back(keys.piecesOf(push.push_id));
  }
  if (!plan.delete_keys.empty()) plan.compact_revision = oldest_kept_revision;
  return plan;
}

std::string renderInstanceReport(const InstanceReport& report) {
  JsonWriter json;
  beginValue(json).key("name").value(report.name).key("berth").value(report.berth_version);
  json.key("version").value(report.version).key("push").value(report.push_id);
  json.key("applied_at_ms").value(report.applied_at_ms).key("from_cache").value(report.from_cache);
  json.key("fingerprints").beginObject();
  for (const auto& [service, fingerprint] : report.fingerprints) {
    json.key(service).value(fingerprint);
  }
  json.endObject();
  json.key("refused_version").value(report.refused_version);
  json.key("refused_why").value(report.refused_why);
  json.key("generation").value(report.generation);
  json.key("health").beginObject();
  for (const auto& [service, backends] : report.health) {
    json.key(service).beginObject();
    for (const auto& [backend, up] : backends) json.key(backend).value(up);
    json.endObject();
  }
  json.endObject();
  json.key("fail_safe").strings(report.fail_safe).key("sync").value(report.sync);
  return json.endObject().str();
}

absl::StatusOr<InstanceReport> parseInstanceReport(absl::string_view text) {
  constexpr absl::string_view kWhat = "an instance's report";
  BERTH_ASSIGN_OR_RETURN(const Json json, parseObject(text, kWhat));
  InstanceReport report;
  BERTH_FIELD(report.name, std::string, json, "name", kWhat);
  BERTH_FIELD(report.berth_version, std::string, json, "berth", kWhat);
  BERTH_FIELD(report.version, uint64_t, json, "version", kWhat);
  BERTH_FIELD(report.push_id, std::string, json, "push", kWhat);
  BERTH_FIELD(report.applied_at_ms, int64_t, json, "applied_at_ms", kWhat);
  BERTH_FIELD(report.from_cache, bool, json, "from_cache", kWhat);
  BERTH_FIELD(report.refused_version, uint64_t, json, "refused_version", kWhat);
  BERTH_FIELD(report.refused_why, std::string, json, "refused_why", kWhat);
  const auto fingerprints = json.find("fingerprints");
  if (fingerprints == json.end() || !fingerprints->is_object()) {
    return absl::DataLossError("an instance's report without fingerprints");
  }
  for (const auto& [service, fingerprint] : fingerprints->items()) {
    if (!fingerprint.is_string()) return absl::DataLossError("an instance's fingerprint");
    report.fingerprints[service] = fingerprint.get<std::string>();
  }
  // Flow sync came later: a report without it has none.
  if (json.contains("sync")) BERTH_FIELD(report.sync, std::string, json, "sync", kWhat);
  // The generation fields came later: a report without them serves no generation.
  if (json.contains("generation")) {
    BERTH_FIELD(report.generation, uint64_t, json, "generation", kWhat);
  }
  if (const auto health = json.find("health"); health != json.end()) {
    if (!health->is_object()) return absl::DataLossError("an instance's verdicts");
    for (const auto& [service, backends] : health->items()) {
      if (!backends.is_object()) return absl::DataLossError("an instance's verdicts");
      for (const auto& [backend, up] : backends.items()) {
        if (!up.is_boolean()) return absl::DataLossError("an instance's verdict");
        report.health[service][backend] = up.get<bool>();
      }
    }
  }
  if (json.contains("fail_safe")) {
    BERTH_RETURN_IF_ERROR(readNames(json, "fail_safe", kWhat, report.fail_safe));
  }
  return report;
}

FleetAgreement compareInstances(uint64_t head, const std::vector<InstanceReport>& instances,
                                uint64_t generation) {
  FleetAgreement agreement;
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_service;
  for (const InstanceReport& instance : instances) {
    if (instance.version != head) {
      agreement.disagreements.push_back(absl::StrCat(instance.name, " serves version ",
                                                     instance.version, ", the fleet's is ", head));
    }
    if (generation != 0 && instance.generation != generation) {
      agreement.disagreements.push_back(absl::StrCat(instance.name, " serves table generation ",
                                                     instance.generation, ", the fleet's is ",
                                                     generation));
    }
    if (!instance.fail_safe.empty()) {
      agreement.disagreements.push_back(
          absl::StrCat(instance.name, " took out on its own, etcd out of its reach (fail-safe): ",
                       absl::StrJoin(instance.fail_safe, ", ")));
    }
    for (const auto& [service, fingerprint] : instance.fingerprints) {
      by_service[service][fingerprint].push_back(instance.name);
    }
  }
  for (const auto& [service, fingerprints] : by_service) {
    if (fingerprints.size() == 1 && fingerprints.begin()->second.size() == instances.size()) {
      continue;
    }
    std::vector<std::string> parts;
    size_t listed = 0;
    for (const auto& [fingerprint, names] : fingerprints) {
      parts.push_back(absl::StrCat(fingerprint, " on ", absl::StrJoin(names, ",")));
      listed += names.size();
    }
    if (listed < instances.size()) parts.push_back("absent elsewhere");
    agreement.disagreements.push_back(
        absl::StrCat("service ", service, ": ", absl::StrJoin(parts, "; ")));
  }
  agreement.agree = agreement.disagreements.empty();
  return agreement;
}

namespace {
constexpr absl::string_view kCacheMark = "# berth fleet version ";
}  // namespace

std::string renderVersionCache(const FleetHead& head, absl::string_view text) {
  std::string contents(text);
  if (!contents.empty() && contents.back() != '\n') contents += '\n';
  absl::StrAppend(&contents, kCacheMark, head.version, " push ", head.push_id, "\n");
  return contents;
}

absl::StatusOr<CachedVersion> parseVersionCache(absl::string_view contents) {
  absl::string_view body = absl::StripSuffix(contents, "\n");
  const size_t mark = body.rfind(kCacheMark);
  if (mark == absl::string_view::npos || (mark != 0 && body[mark - 1] != '\n') ||
      body.find('\n', mark) != absl::string_view::npos) {
    return absl::DataLossError("it does not end with berth's '# berth fleet version' line");
  }
  const std::vector<absl::string_view> words =
      absl::StrSplit(body.substr(mark + kCacheMark.size()), ' ');
  CachedVersion cached;
  if (words.size() != 3 || words[1] != "push" || words[2].empty() ||
      !absl::SimpleAtoi(words[0], &cached.head.version) || cached.head.version == 0) {
    return absl::DataLossError("its '# berth fleet version' line is not berth's");
  }
  cached.head.push_id = std::string(words[2]);
  cached.text = std::string(body.substr(0, mark));
  return cached;
}

}  // namespace berth
