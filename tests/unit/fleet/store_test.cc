// The fleet's store layout (fleet/store.h). Pinned:
// - keys sort by version number, and version and push ids come back out of them;
// - a version's text cuts into one piece per service, from the line it starts on, with pieces
//   over the limit cut further, and the pieces always concatenate to the text;
// - the text reassembles from its pieces, and a missing or altered piece is DataLoss naming it;
// - staging batches stay within etcd's operation and size limits;
// - retention deletes versions older than the last `keep`, pieces no kept version names (unless
//   a push may still be committing them), and compacts at the oldest kept version;
// - manifests, heads and instance reports round-trip (a report from before generations too), and
//   odd JSON is an error, never a throw;
// - agreement names the instance on another version or table generation, or with a fail-safe
//   removal, and the service whose fingerprints differ;
// - the cache file is the pushed text with one trailing comment line, and reads back.

#include "berth/fleet/store.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

const FleetKeys kKeys("/berth");

TEST(FleetKeysTest, VersionKeysSortByNumberAndReadBack) {
  EXPECT_EQ(kKeys.head(), "/berth/head");
  EXPECT_LT(kKeys.version(9), kKeys.version(10));
  EXPECT_EQ(kKeys.versionOfKey(kKeys.version(1234)), 1234u);
  EXPECT_EQ(kKeys.versionOfKey("/berth/versions/12"), 0u);
  EXPECT_EQ(kKeys.versionOfKey("/other/versions/00000000000000000001"), 0u);
  EXPECT_EQ(kKeys.pushOfPieceKey(kKeys.piece("abc", 3)), "abc");
  EXPECT_EQ(kKeys.pushOfPieceKey("/berth/pieces/abc"), "");
  EXPECT_EQ(kKeys.instance("lb-1"), "/berth/instances/lb-1");
}

constexpr char kText[] =
    "# the web tier\n"
    "services:\n"
    "  - name: web\n"
    "    vip: 198.18.0.10\n"
    "  - name: dns\n"
    "    vip: 198.18.0.11\n";

std::string joined(const std::vector<TextPiece>& pieces) {
  std::string text;
  for (const TextPiece& piece : pieces) absl::StrAppend(&text, piece.text);
  return text;
}

TEST(SplitVersionTextTest, OnePiecePerServiceFromItsLine) {
  const std::vector<TextPiece> pieces = splitVersionText(kText, {{"web", 3}, {"dns", 5}});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].service, "");
  EXPECT_EQ(pieces[0].text, "# the web tier\nservices:\n");
  EXPECT_EQ(pieces[1].service, "web");
  EXPECT_EQ(pieces[1].text, "  - name: web\n    vip: 198.18.0.10\n");
  EXPECT_EQ(pieces[2].service, "dns");
  EXPECT_EQ(joined(pieces), kText);
}

TEST(SplitVersionTextTest, ServicesOnOneLineStayInOnePiece) {
  const std::string text = "services: [{name: a}, {name: b}]\n";
  const std::vector<TextPiece> pieces = splitVersionText(text, {{"a", 1}, {"b", 1}});
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(joined(pieces), text);
}

TEST(SplitVersionTextTest, LargePiecesAreCutFurther) {
  const std::vector<TextPiece> pieces = splitVersionText(kText, {{"web", 3}, {"dns", 5}}, 10);
  for (const TextPiece& piece : pieces) EXPECT_LE(piece.text.size(), 10u);
  EXPECT_EQ(joined(pieces), kText);
  EXPECT_EQ(pieces.back().service, "dns");
}

TEST(AssembleVersionTextTest, ReassemblesAndChecksEveryPiece) {
  const std::vector<TextPiece> pieces = splitVersionText(kText, {{"web", 3}, {"dns", 5}});
  const VersionManifest manifest = manifestFor(kKeys, 7, "p1", kText, pieces);
  EXPECT_EQ(manifest.services, (std::vector<std::string>{"web", "dns"}));
  std::map<std::string, std::string> stored;
  for (size_t i = 0; i < pieces.size(); ++i) {
    stored[manifest.pieces[i].key] = std::string(pieces[i].text);
  }
  absl::StatusOr<std::string> text = assembleVersionText(manifest, stored);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, kText);

  std::map<std::string, std::string> altered = stored;
  altered[manifest.pieces[1].key][4] = 'X';
  EXPECT_EQ(assembleVersionText(manifest, altered).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(assembleVersionText(manifest, altered).status().message().find(manifest.pieces[1].key),
            std::string::npos);
  stored.erase(manifest.pieces[2].key);
  EXPECT_EQ(assembleVersionText(manifest, stored).status().code(), absl::StatusCode::kDataLoss);
}

TEST(StagingBatchesTest, WithinOperationAndSizeLimits) {
  const std::string small(100, 'x');
  const std::string large(kMaxPieceBytes, 'y');
  std::vector<TextPiece> pieces(250, TextPiece{"s", small});
  for (int i = 0; i < 5; ++i) pieces.push_back({"big", large});
  const std::vector<std::vector<size_t>> batches = stagingBatches(pieces);
  size_t covered = 0;
  for (const std::vector<size_t>& batch : batches) {
    ASSERT_FALSE(batch.empty());
    EXPECT_LE(batch.size(), kMaxOpsPerTxn);
    size_t payload = 0;
    for (size_t index : batch) {
      EXPECT_EQ(index, covered++);
      payload += (pieces[index].text.size() + 2) / 3 * 4;
    }
    EXPECT_LE(payload, kMaxTxnPayloadBytes);
  }
  EXPECT_EQ(covered, pieces.size());
}

TEST(PlanRetentionTest, KeepsTheNewestVersionsAndTheirPieces) {
  std::vector<StoredVersion> versions;
  for (uint64_t v = 1; v <= 5; ++v) versions.push_back({v, absl::StrCat("p", v), int64_t(10 * v)});
  const std::vector<StagedPush> staged = {{"p1", 9},  {"p2", 19},      {"p3", 29},    {"p4", 39},
                                          {"p5", 49}, {"crashed", 35}, {"racing", 51}};
  const RetentionPlan plan = planRetention(kKeys, 5, 3, versions, staged, 40);
  EXPECT_EQ(plan.delete_keys, (std::vector<std::string>{kKeys.version(1), kKeys.version(2)}));
  EXPECT_EQ(plan.delete_prefixes,
            (std::vector<std::string>{kKeys.piecesOf("p1"), kKeys.piecesOf("p2"),
                                      kKeys.piecesOf("crashed")}));
  EXPECT_EQ(plan.compact_revision, 30);

  const RetentionPlan nothing = planRetention(kKeys, 2, 3, {versions[0], versions[1]}, {}, 20);
  EXPECT_TRUE(nothing.delete_keys.empty());
  EXPECT_EQ(nothing.compact_revision, 0);
}

TEST(FleetValuesTest, RoundTripAndOddJsonIsAnError) {
  const FleetHead head{42, "abc"};
  EXPECT_EQ(*parseHead(renderHead(head)), head);

  VersionManifest manifest = manifestFor(kKeys, 3, "p3", kText, splitVersionText(kText, {}));
  manifest.pushed_by = "ops@host";
  manifest.pushed_at_ms = 1790000000000;
  manifest.source = "fleet.yaml";
  EXPECT_EQ(*parseManifest(renderManifest(manifest)), manifest);

  InstanceReport report;
  report.name = "lb-1";
  report.berth_version = "0.1.0";
  report.version = 3;
  report.push_id = "p3";
  report.applied_at_ms = 1790000000100;
  report.fingerprints = {{"web", "v2-0123456789abcdef"}};
  report.refused_version = 4;
  report.refused_why = "fleet.yaml:4:10: services[0].via: no such port";
  EXPECT_EQ(*parseInstanceReport(renderInstanceReport(report)), report);
  report.generation = 12;
  report.health = {{"web", {{"web-1", true}, {"web-2", false}}}};
  report.fail_safe = {"web/web-2"};
  EXPECT_EQ(*parseInstanceReport(renderInstanceReport(report)), report);
  report.sync = "198.18.0.11:7410";
  EXPECT_EQ(*parseInstanceReport(renderInstanceReport(report)), report);
  // A report from a release before generations: none served, no verdicts.
  const std::string older =
      "{\"format\":1,\"name\":\"lb-0\",\"berth\":\"0.1.0\",\"version\":1,\"push\":\"p\","
      "\"applied_at_ms\":1,\"from_cache\":false,\"fingerprints\":{},\"refused_version\":0,"
      "\"refused_why\":\"\"}";
  absl::StatusOr<InstanceReport> parsed = parseInstanceReport(older);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->generation, 0u);
  EXPECT_TRUE(parsed->health.empty());
  EXPECT_TRUE(parsed->sync.empty()) << "no flow sync";

  for (const char* odd : {"", "[]", "{\"format\":1}", "{\"format\":2,\"version\":1,\"push\":\"a\"}",
                          "{\"format\":1,\"version\":\"1\",\"push\":\"a\"}",
                          "{\"format\":1,\"version\":-1,\"push\":\"a\"}", "{not json"}) {
    EXPECT_EQ(parseHead(odd).status().code(), absl::StatusCode::kDataLoss) << odd;
    EXPECT_FALSE(parseManifest(odd).ok()) << odd;
    EXPECT_FALSE(parseInstanceReport(odd).ok()) << odd;
  }
}

TEST(CompareInstancesTest, NamesWhoDiffers) {
  InstanceReport a;
  a.name = "a";
  a.version = 5;
  a.fingerprints = {{"web", "v2-1"}, {"dns", "v2-2"}};
  InstanceReport b = a;
  b.name = "b";
  EXPECT_TRUE(compareInstances(5, {a, b}).agree);

  b.fingerprints["web"] = "v2-9";
  InstanceReport c = a;
  c.name = "c";
  c.version = 4;
  c.fingerprints.erase("dns");
  const FleetAgreement agreement = compareInstances(5, {a, b, c});
  EXPECT_FALSE(agreement.agree);
  ASSERT_EQ(agreement.disagreements.size(), 3u);
  EXPECT_EQ(agreement.disagreements[0], "c serves version 4, the fleet's is 5");
  EXPECT_EQ(agreement.disagreements[1], "service dns: v2-2 on a,b; absent elsewhere");
  EXPECT_EQ(agreement.disagreements[2], "service web: v2-1 on a,c; v2-9 on b");

  // Table generations: another generation, or a fail-safe removal, is a disagreement too.
  a.generation = 7;
  b = a;
  b.name = "b";
  b.generation = 6;
  b.fail_safe = {"web/web-3"};
  const FleetAgreement generations = compareInstances(5, {a, b}, 7);
  EXPECT_EQ(generations.disagreements,
            (std::vector<std::string>{
                "b serves table generation 6, the fleet's is 7",
                "b took out on its own, etcd out of its reach (fail-safe): web/web-3"}));
}

TEST(VersionCacheTest, TheTextWithOneTrailingLine) {
  const std::string contents = renderVersionCache({12, "p12"}, kText);
  EXPECT_EQ(contents, absl::StrCat(kText, "# berth fleet version 12 push p12\n"));
  absl::StatusOr<CachedVersion> cached = parseVersionCache(contents);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->head, (FleetHead{12, "p12"}));
  EXPECT_EQ(cached->text, kText);

  EXPECT_FALSE(parseVersionCache(kText).ok());
  EXPECT_FALSE(parseVersionCache("services: []\n# berth fleet version x push p\n").ok());
  EXPECT_FALSE(parseVersionCache("# berth fleet version 3 push p\nservices: []\n").ok());
}

}  // namespace
}  // namespace berth
