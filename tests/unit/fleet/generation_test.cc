// Table generations in the store (fleet/generation.h). Pinned:
// - the manifest renders and parses back, and a table over kMaxPieceBytes is stored in pieces
//   that assemble only when each is what the manifest names;
// - the plan: the first generation stores every Maglev table; the same inputs again plan nothing;
//   a backend the fleet sees down makes the next generation, which moves only its slots, stores
//   only that service's table anew and keeps the other's pieces; other algorithms carry only
//   their down set;
// - an instance on a newer version than the generation serves what the next plan will store: an
//   added backend with a check out until an instance has judged it, and then it takes exactly its
//   quota; one without a check in at once, so that a version that adds and reweights moves the
//   least once, not once without the backend and again with it;
// - the cache file reads back as the generation, and a cut one does not;
// - retention keeps the tables the current and previous generations name, and later ones.

#include "berth/fleet/generation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "berth/maglev/analysis.h"

namespace berth {
namespace {

ServiceConfig service(const std::string& name, size_t count, uint32_t table_size = 65537,
                      Algorithm algorithm = Algorithm::kMaglev) {
  ServiceConfig config;
  config.name = name;
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = table_size;
  config.algorithm = algorithm;
  for (size_t i = count; i-- > 0;) {
    BackendConfig backend;
    backend.name = absl::StrFormat("%s-%03d", name, i);
    backend.address = IpAddress::v4(198, 18, 1 + static_cast<uint8_t>(i / 250),
                                    static_cast<uint8_t>(1 + i % 250));
    config.backends.push_back(backend);
  }
  return config;
}

// Every backend of `services` judged by some instance, none down.
AgreedHealth judgedUp(const std::vector<ServiceConfig>& services) {
  AgreedHealth agreed;
  for (const ServiceConfig& service : services) {
    for (const BackendConfig& backend : service.backends) {
      agreed.judged[service.name].insert(backend.name);
    }
  }
  return agreed;
}

uint32_t moved(const Table& before, const Table& after) {
  uint32_t count = 0;
  for (uint32_t slot = 0; slot < before.size(); ++slot) {
    const uint16_t a = before.entries()[slot];
    const uint16_t b = after.entries()[slot];
    const std::string owner_a = a == kNoBackend ? "" : before.backends()[a].name;
    const std::string owner_b = b == kNoBackend ? "" : after.backends()[b].name;
    count += owner_a != owner_b;
  }
  return count;
}

TEST(GenerationManifestTest, RendersAndParsesBack) {
  GenerationManifest manifest;
  manifest.generation = 7;
  manifest.config_version = 3;
  manifest.made_by = "lb-a";
  manifest.made_at_ms = 1'700'000'000'000;
  manifest.quorum = 2;
  GenerationService web;
  web.service = "web";
  web.down = {"web-001"};
  web.stored_in = 6;
  web.pieces = {{"/berth/tables/web/00000000000000000006/000000", "web", 10, 99}};
  web.bytes = 10;
  web.crc32c = 99;
  GenerationService ring;
  ring.service = "ring svc/1";
  manifest.services = {web, ring};
  absl::StatusOr<GenerationManifest> parsed =
      parseGenerationManifest(renderGenerationManifest(manifest));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, manifest);
  EXPECT_EQ(parseGenerationManifest("{}").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(tableKeyPart("ring svc/1"), "ring%20svc%2F1");
}

TEST(PlanGenerationTest, StoresInPiecesAndPlansOnlyChanges) {
  const GenerationKeys keys("/berth");
  const std::vector<ServiceConfig> services = {service("big", 1000, 655373), service("web", 100),
                                               service("ring", 10, 65537, Algorithm::kRing)};
  absl::StatusOr<std::optional<PlannedGeneration>> first =
      planGeneration(keys, nullptr, services, 1, judgedUp(services), "lb-a", 1);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  const FleetGeneration& one = (*first)->generation;
  EXPECT_EQ(one.manifest.generation, 1u);
  ASSERT_EQ(one.manifest.services.size(), 3u);
  EXPECT_EQ(one.tables.size(), 2u);  // the Maglev services
  // 655,373 slots at 10 bits: two pieces; each assembles only as stored.
  const GenerationService& big = one.manifest.services[0];
  ASSERT_EQ(big.pieces.size(), 2u);
  EXPECT_EQ(big.pieces[0].key, "/berth/tables/big/00000000000000000001/000000");
  std::map<std::string, std::string> pieces;
  const std::string& encoded = (*first)->encoded.at("big");
  pieces[big.pieces[0].key] = encoded.substr(0, kMaxPieceBytes);
  pieces[big.pieces[1].key] = encoded.substr(kMaxPieceBytes);
  absl::StatusOr<StoredTable> assembled = assembleStoredTable(big, pieces);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, storedTableOf("big", one.tables.at("big")));
  pieces[big.pieces[1].key][5] ^= 1;
  EXPECT_NE(assembleStoredTable(big, pieces).status().message().find(big.pieces[1].key),
            std::string::npos);
  pieces.erase(big.pieces[1].key);
  EXPECT_NE(assembleStoredTable(big, pieces).status().message().find("is missing"),
            std::string::npos);
  EXPECT_EQ(one.manifest.services[2].pieces.size(), 0u);  // ring: nothing stored

  // The same inputs: nothing to make.
  absl::StatusOr<std::optional<PlannedGeneration>> again =
      planGeneration(keys, &one, services, 1, judgedUp(services), "lb-a", 2);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());

  // web-003 down by the fleet's word: only web's table is stored anew, and only its slots move.
  AgreedHealth agreed = judgedUp(services);
  agreed.down["web"] = {"web-003"};
  agreed.down["ring"] = {"ring-001"};
  agreed.quorum = 2;
  absl::StatusOr<std::optional<PlannedGeneration>> second =
      planGeneration(keys, &one, services, 2, agreed, "lb-b", 3);
  ASSERT_TRUE(second.ok() && second->has_value());
  const FleetGeneration& two = (*second)->generation;
  EXPECT_EQ(two.manifest.generation, 2u);
  EXPECT_EQ(two.manifest.services[0].stored_in, 1u);
  EXPECT_EQ(two.manifest.services[0].pieces, big.pieces);
  EXPECT_EQ(two.manifest.services[1].stored_in, 2u);
  EXPECT_EQ(two.manifest.services[1].down, std::vector<std::string>{"web-003"});
  EXPECT_EQ(two.manifest.services[2].down, std::vector<std::string>{"ring-001"});
  EXPECT_EQ((*second)->encoded.count("big"), 0u);
  const Table& web_before = one.tables.at("web");
  const Table& web_after = two.tables.at("web");
  EXPECT_EQ(moved(web_before, web_after), web_before.slotCounts()[3]);

  // The cache file reads back as the generation, and a cut one is DataLoss.
  const std::string cache = renderGenerationCache(two);
  absl::StatusOr<FleetGeneration> cached = parseGenerationCache(cache);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->manifest, two.manifest);
  ASSERT_EQ(cached->tables.size(), 2u);
  EXPECT_EQ(moved(cached->tables.at("web"), web_after), 0u);
  EXPECT_EQ(parseGenerationCache(cache.substr(0, cache.size() - 3)).status().code(),
            absl::StatusCode::kDataLoss);

  // Retention: generation 1's web table is no longer needed once generation 3 is made.
  const std::vector<std::pair<std::string, uint64_t>> stored = {
      {"big", 1}, {"web", 1}, {"web", 2}, {"web", 4}};
  GenerationManifest three = two.manifest;
  three.generation = 3;
  EXPECT_EQ(unneededTablePrefixes(keys, three, &two.manifest, stored),
            std::vector<std::string>{"/berth/tables/web/00000000000000000001/"});
  EXPECT_TRUE(unneededTablePrefixes(keys, two.manifest, &one.manifest, stored).empty());
}

// Every backend of `config` checked by TCP probes, so that it counts only once judged.
ServiceConfig checked(ServiceConfig config) {
  for (BackendConfig& backend : config.backends) backend.health.type = HealthCheckType::kTcp;
  return config;
}

TEST(PlanGenerationTest, AnInstanceAheadServesWhatTheNextPlanStores) {
  const GenerationKeys keys("/berth");
  ServiceConfig web = checked(service("web", 100));
  AgreedHealth agreed = judgedUp({web});
  agreed.down["web"] = {"web-003"};
  absl::StatusOr<std::optional<PlannedGeneration>> first =
      planGeneration(keys, nullptr, {web}, 1, agreed, "lb-a", 1);
  ASSERT_TRUE(first.ok() && first->has_value());
  const FleetGeneration& one = (*first)->generation;
  absl::StatusOr<std::optional<Table>> same = generationBaseFor(one, web, agreed);
  ASSERT_TRUE(same.ok() && same->has_value());
  EXPECT_EQ(moved(**same, one.tables.at("web")), 0u);

  // Version 2 adds a checked backend and drains another; the instance serves it before the plan,
  // with the added backend out until an instance has judged it.
  BackendConfig added = web.backends.front();
  added.name = "web-100";
  web.backends.push_back(added);
  web.backends[10].weight = 0;
  absl::StatusOr<std::optional<Table>> ahead = generationBaseFor(one, web, agreed);
  ASSERT_TRUE(ahead.ok() && ahead->has_value()) << ahead.status();
  EXPECT_EQ((*ahead)->slotCounts()[*(*ahead)->indexOf("web-100")], 0u);
  absl::StatusOr<std::optional<PlannedGeneration>> second =
      planGeneration(keys, &one, {web}, 2, agreed, "lb-a", 2);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(moved(**ahead, (*second)->generation.tables.at("web")), 0u);
  // Judged up, it takes exactly its quota in the next generation.
  agreed.judged["web"].insert("web-100");
  absl::StatusOr<std::optional<PlannedGeneration>> third =
      planGeneration(keys, &(*second)->generation, {web}, 2, agreed, "lb-a", 3);
  ASSERT_TRUE(third.ok() && third->has_value());
  const Table& with_added = (*third)->generation.tables.at("web");
  EXPECT_EQ(moved(**ahead, with_added), with_added.slotCounts()[*with_added.indexOf("web-100")]);
  // Ring services and services the generation lacks use their config's own table.
  EXPECT_FALSE(generationBaseFor(one, service("other", 5), agreed)->has_value());
}

TEST(PlanGenerationTest, AVersionThatAddsAndReweightsWithoutChecksMovesTheLeastOnce) {
  // A service without health checks: every instance that runs a version judges its backends up
  // at once, the elected one included, so an added backend is in the very next plan. The
  // instance's own step must already take it in, or the version moves slots twice: once without
  // the backend, once with it.
  const GenerationKeys keys("/berth");
  ServiceConfig web = service("web", 20);
  const AgreedHealth before = judgedUp({web});
  absl::StatusOr<std::optional<PlannedGeneration>> first =
      planGeneration(keys, nullptr, {web}, 1, before, "lb-a", 1);
  ASSERT_TRUE(first.ok() && first->has_value());
  const FleetGeneration& one = (*first)->generation;
  const Table& served = one.tables.at("web");

  // Version 2 adds web-020 and doubles web-005's weight. This instance's view of the fleet has
  // no verdict on web-020 yet: no instance has run version 2.
  BackendConfig added = web.backends.front();
  added.name = "web-020";
  web.backends.push_back(added);
  for (BackendConfig& backend : web.backends) {
    if (backend.name == "web-005") backend.weight = 2;
  }
  absl::StatusOr<std::optional<Table>> ahead = generationBaseFor(one, web, before);
  ASSERT_TRUE(ahead.ok() && ahead->has_value()) << ahead.status();
  const TableMovement step = configMovement(served, **ahead);
  EXPECT_GT(step.moved_slots, 0u);
  EXPECT_LE(step.movedOverMinimum(), 1.1) << step.moved_slots << " over " << step.minimumSlots();
  EXPECT_GT((*ahead)->slotCounts()[*(*ahead)->indexOf("web-020")], 0u);

  // The elected instance, on version 2, has judged web-020 up: its plan stores the very table
  // the instance already serves, so the generation moves nothing more.
  absl::StatusOr<std::optional<PlannedGeneration>> second =
      planGeneration(keys, &one, {web}, 2, judgedUp({web}), "lb-a", 2);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(moved(**ahead, (*second)->generation.tables.at("web")), 0u);
  // Even planned before its own verdict was in, the elected instance takes web-020 in alike.
  absl::StatusOr<std::optional<PlannedGeneration>> early =
      planGeneration(keys, &one, {web}, 2, before, "lb-a", 2);
  ASSERT_TRUE(early.ok() && early->has_value());
  EXPECT_EQ(moved(**ahead, (*early)->generation.tables.at("web")), 0u);

  // A quorum that sees web-020 down still keeps it out, on both sides.
  AgreedHealth down = judgedUp({web});
  down.down["web"] = {"web-020"};
  absl::StatusOr<std::optional<Table>> out = generationBaseFor(one, web, down);
  ASSERT_TRUE(out.ok() && out->has_value());
  EXPECT_EQ((*out)->slotCounts()[*(*out)->indexOf("web-020")], 0u);
}

}  // namespace
}  // namespace berth
