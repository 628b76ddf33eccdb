// The fleet's push and status (fleet/admin.h) and the instance agent (fleet/agent.h) against a
// real etcd member the test starts. Pinned:
// - a push lands as the next version, and pieces and manifest read back as the pushed text;
// - of two pushes from the same head, exactly one lands, and the loser leaves no pieces behind;
// - retention keeps the newest versions and compacts older revisions;
// - an agent registers under its lease, offers each new version once, and reports what it
//   applied, with fingerprints, so that the status shows the instances agreeing;
// - a refusal is reported with its reason, and a later version still applies;
// - an agent that starts on its cached version says so until it hears from etcd, and offers
//   nothing when the cache is current;
// - a second live instance with the same name is not registered, and leave() frees the name;
// - with etcd down the agent keeps its version, and when etcd is back it catches up;
// - table generations: of three agents one is elected and makes generation 1, which all three
//   fetch with identical tables; a backend one agent sees down is named as its dissent and makes
//   no generation, a second one seeing it down makes generation 2, which moves only that backend's
//   slots; the elected agent leaving elects another, which makes generation 3 from generation 2;
// - a generation made for a version an agent has taken but not applied yet waits until it is.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "berth/fleet/admin.h"
#include "berth/fleet/agent.h"
#include "berth/maglev/analysis.h"
#include "support/etcd_member.h"

namespace berth {
namespace {

using Json = EtcdClient::Json;

std::string versionText(int backends) {
  std::string text =
      "services:\n  - name: web\n    vip: 198.18.0.10\n    port: 80\n    backends:\n";
  for (int i = 0; i < backends; ++i) {
    absl::StrAppend(&text, "      - {name: web-", i, ", address: 198.18.1.", i + 1, "}\n");
  }
  return text;
}

class FleetAgentTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    member_ = new EtcdMember();
    ASSERT_TRUE(member_->waitReady()) << "etcd did not start";
  }
  static void TearDownTestSuite() { delete member_; }

  void SetUp() override {
    // Each test its own prefix, so that tests never see each other's keys.
    fleet_.endpoints = {member_->url()};
    fleet_.prefix = absl::StrCat("/t", ++serial_);
    fleet_.name = "lb-1";
    fleet_.keep_versions = 3;
    fleet_.lease_ttl_s = 3;
    EtcdSettings settings;
    settings.endpoints = fleet_.endpoints;
    admin_ = *EtcdClient::create(settings);
  }

  absl::StatusOr<PushOutcome> push(const std::string& text) {
    PushRequest request;
    request.text = text;
    request.source = "fleet.yaml";
    request.service_lines = {{"web", 2}};
    request.pushed_by = "test@host";
    request.keep_versions = fleet_.keep_versions;
    std::optional<absl::StatusOr<PushOutcome>> outcome;
    pushVersion(*admin_, FleetKeys(fleet_.prefix), request,
                [&](absl::StatusOr<PushOutcome> done) { outcome = std::move(done); });
    admin_->runUntilIdle(absl::Now() + absl::Seconds(30));
    if (!outcome) return absl::DeadlineExceededError("the push did not finish");
    return *outcome;
  }

  FleetStatus status() {
    std::optional<absl::StatusOr<FleetStatus>> status;
    readFleetStatus(*admin_, FleetKeys(fleet_.prefix),
                    [&](absl::StatusOr<FleetStatus> done) { status = std::move(done); });
    admin_->runUntilIdle(absl::Now() + absl::Seconds(30));
    EXPECT_TRUE(status && status->ok());
    return status && status->ok() ? **status : FleetStatus{};
  }

  std::vector<std::string> keysUnder(const std::string& prefix) {
    std::vector<std::string> keys;
    EtcdRange range = etcdPrefixRange(prefix);
    range.keys_only = true;
    admin_->call("kv/range", etcdRequest(range), [&](absl::StatusOr<Json> reply) {
      ASSERT_TRUE(reply.ok());
      absl::StatusOr<std::vector<EtcdKeyValue>> kvs = etcdKeyValues(*reply);
      ASSERT_TRUE(kvs.ok());
      for (const EtcdKeyValue& kv : *kvs) keys.push_back(kv.key);
    });
    admin_->runUntilIdle(absl::Now() + absl::Seconds(30));
    return keys;
  }

  std::unique_ptr<FleetAgent> agent(std::optional<FleetHead> running = std::nullopt,
                                    std::string name = "lb-1") {
    FleetConfig fleet = fleet_;
    fleet.name = std::move(name);
    absl::StatusOr<std::unique_ptr<FleetAgent>> agent =
        FleetAgent::create(fleet, "test", std::move(running),
                           [this](const std::string& line) { log_.push_back(line); });
    EXPECT_TRUE(agent.ok()) << agent.status();
    return *std::move(agent);
  }

  // Turns `agents` until `done` holds, or 20 s.
  static bool turnUntil(const std::vector<FleetAgent*>& agents, const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      for (FleetAgent* agent : agents) agent->turn(absl::Now());
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  }

  // Applies each version `agent` offers, with `fingerprint` for every service.
  static std::optional<FleetVersionText> applyOffered(FleetAgent& agent,
                                                      const std::string& fingerprint) {
    std::optional<FleetVersionText> version = agent.takeVersion();
    if (!version) return std::nullopt;
    agent.setFingerprints({{"web", fingerprint}});
    agent.applied(version->head, absl::ToUnixMillis(absl::Now()));
    return version;
  }

  static EtcdMember* member_;
  static int serial_;
  FleetConfig fleet_;
  std::unique_ptr<EtcdClient> admin_;
  std::vector<std::string> log_;
};

EtcdMember* FleetAgentTest::member_ = nullptr;
int FleetAgentTest::serial_ = 0;

TEST_F(FleetAgentTest, PushesLandInOrderAndRetentionKeepsTheNewest) {
  for (uint64_t version = 1; version <= 5; ++version) {
    absl::StatusOr<PushOutcome> outcome = push(versionText(static_cast<int>(version)));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->version, version);
  }
  const FleetKeys keys(fleet_.prefix);
  EXPECT_EQ(keysUnder(keys.versionsPrefix()),
            (std::vector<std::string>{keys.version(3), keys.version(4), keys.version(5)}));
  // Two pieces a version (before the service, and the service), for the three kept.
  EXPECT_EQ(keysUnder(keys.piecesPrefix()).size(), 6u);
  const FleetStatus fleet = status();
  ASSERT_TRUE(fleet.head && fleet.manifest);
  EXPECT_EQ(fleet.head->version, 5u);
  EXPECT_EQ(fleet.manifest->pushed_by, "test@host");
  EXPECT_EQ(fleet.manifest->services, (std::vector<std::string>{"web"}));
}

TEST_F(FleetAgentTest, OfTwoRacingPushesExactlyOneLands) {
  ASSERT_TRUE(push(versionText(1)).ok());
  std::vector<std::optional<absl::StatusOr<PushOutcome>>> outcomes(2);
  for (int i = 0; i < 2; ++i) {
    PushRequest request;
    request.text = versionText(2 + i);
    request.source = "fleet.yaml";
    request.service_lines = {{"web", 2}};
    request.keep_versions = 10;
    pushVersion(
        *admin_, FleetKeys(fleet_.prefix), request,
        [&outcomes, i](absl::StatusOr<PushOutcome> done) { outcomes[i] = std::move(done); });
  }
  admin_->runUntilIdle(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(outcomes[0] && outcomes[1]);
  EXPECT_NE(outcomes[0]->ok(), outcomes[1]->ok());
  const absl::Status lost = outcomes[0]->ok() ? outcomes[1]->status() : outcomes[0]->status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kAborted) << lost;
  EXPECT_NE(lost.message().find("version 2"), std::string::npos) << lost;
  // The winner's pieces and version 1's remain; the loser's are gone.
  EXPECT_EQ(keysUnder(FleetKeys(fleet_.prefix).piecesPrefix()).size(), 4u);
}

TEST_F(FleetAgentTest, AgentsApplyEachVersionAndReportIt) {
  std::unique_ptr<FleetAgent> a = agent(std::nullopt, "lb-1");
  std::unique_ptr<FleetAgent> b = agent(std::nullopt, "lb-2");
  ASSERT_TRUE(turnUntil({a.get(), b.get()},
                        [&] { return a->status().registered && b->status().registered; }));
  ASSERT_TRUE(push(versionText(2)).ok());
  std::optional<FleetVersionText> got_a, got_b;
  ASSERT_TRUE(turnUntil({a.get(), b.get()}, [&] {
    if (!got_a) got_a = applyOffered(*a, "v2-aaaa");
    if (!got_b) got_b = applyOffered(*b, "v2-aaaa");
    return got_a && got_b;
  }));
  EXPECT_EQ(got_a->text, versionText(2));
  EXPECT_EQ(got_a->source, "fleet version 1 (fleet.yaml)");
  EXPECT_EQ(got_a->head.version, 1u);
  // Reported: both on version 1 with the same fingerprint.
  ASSERT_TRUE(turnUntil({a.get(), b.get()}, [&] {
    const FleetStatus fleet = status();
    return fleet.instances.size() == 2 && compareInstances(1, fleet.instances).agree;
  }));
  EXPECT_FALSE(a->takeVersion());

  // A refusal is reported; the next version still applies.
  ASSERT_TRUE(push(versionText(3)).ok());
  std::optional<FleetVersionText> refused;
  ASSERT_TRUE(turnUntil({a.get()}, [&] { return (refused = a->takeVersion()).has_value(); }));
  a->refused(refused->head, "fleet.yaml:7:9: services[0].via: no port p9 here");
  ASSERT_TRUE(turnUntil({a.get()}, [&] {
    const FleetStatus fleet = status();
    for (const InstanceReport& instance : fleet.instances) {
      if (instance.name == "lb-1" && instance.refused_version == 2) return true;
    }
    return false;
  }));
  EXPECT_EQ(a->status().running_version, 1u);
  EXPECT_NE(renderFleetStatus(status()).find("refused version 2: fleet.yaml:7:9"),
            std::string::npos);
  ASSERT_TRUE(push(versionText(4)).ok());
  std::optional<FleetVersionText> third;
  ASSERT_TRUE(
      turnUntil({a.get()}, [&] { return (third = applyOffered(*a, "v2-bbbb")).has_value(); }));
  EXPECT_EQ(third->head.version, 3u);
}

TEST_F(FleetAgentTest, StartsFromItsCacheAndOffersNothingWhenCurrent) {
  absl::StatusOr<PushOutcome> pushed = push(versionText(2));
  ASSERT_TRUE(pushed.ok());
  std::unique_ptr<FleetAgent> a = agent(FleetHead{pushed->version, pushed->push_id});
  EXPECT_TRUE(a->status().from_cache);
  ASSERT_TRUE(turnUntil({a.get()}, [&] { return a->status().head_version == 1; }));
  EXPECT_FALSE(a->status().from_cache);
  // Give a fetch the time it would take, then check nothing was offered.
  const absl::Time settle = absl::Now() + absl::Seconds(1);
  turnUntil({a.get()}, [&] { return absl::Now() > settle; });
  EXPECT_FALSE(a->takeVersion());
}

TEST_F(FleetAgentTest, ANameIsHeldByOneLiveInstance) {
  std::unique_ptr<FleetAgent> first = agent();
  ASSERT_TRUE(turnUntil({first.get()}, [&] { return first->status().registered; }));
  std::unique_ptr<FleetAgent> second = agent();
  ASSERT_TRUE(turnUntil({first.get(), second.get()}, [&] {
    return second->status().last_error.find("held by another live instance") != std::string::npos;
  }));
  EXPECT_FALSE(second->status().registered);
  first->leave(absl::Now() + absl::Seconds(5));
  first.reset();
  ASSERT_TRUE(turnUntil({second.get()}, [&] { return second->status().registered; }));
}

TEST_F(FleetAgentTest, CatchesUpWhenEtcdReturns) {
  std::unique_ptr<FleetAgent> a = agent();
  ASSERT_TRUE(push(versionText(1)).ok());
  ASSERT_TRUE(turnUntil({a.get()}, [&] { return applyOffered(*a, "v2-1").has_value(); }));
  member_->stop();
  ASSERT_TRUE(turnUntil({a.get()}, [&] { return !a->status().etcd_reachable; }));
  EXPECT_EQ(a->status().running_version, 1u);
  member_->start();
  ASSERT_TRUE(member_->waitReady());
  ASSERT_TRUE(push(versionText(5)).ok());
  std::optional<FleetVersionText> caught_up;
  ASSERT_TRUE(
      turnUntil({a.get()}, [&] { return (caught_up = applyOffered(*a, "v2-5")).has_value(); }));
  EXPECT_EQ(caught_up->head.version, 2u);
  EXPECT_TRUE(a->status().etcd_reachable);
}

ServiceConfig webService(size_t backends) {
  ServiceConfig service;
  service.name = "web";
  service.vip = IpAddress::v4(198, 18, 0, 10);
  service.port = 80;
  for (size_t i = 0; i < backends; ++i) {
    BackendConfig backend;
    backend.name = absl::StrFormat("web-%03d", i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(i + 1));
    service.backends.push_back(backend);
  }
  return service;
}

std::map<std::string, std::map<std::string, bool>> verdicts(size_t backends,
                                                            const std::set<size_t>& down = {}) {
  std::map<std::string, bool> up;
  for (size_t i = 0; i < backends; ++i) up[absl::StrFormat("web-%03d", i)] = down.count(i) == 0;
  return {{"web", up}};
}

TEST_F(FleetAgentTest, AnElectedInstanceMakesGenerationsEveryInstanceServes) {
  constexpr size_t kBackends = 100;
  const auto services =
      std::make_shared<const std::vector<ServiceConfig>>(std::vector{webService(kBackends)});
  std::vector<std::unique_ptr<FleetAgent>> agents;
  for (int i = 1; i <= 3; ++i) {
    agents.push_back(agent(std::nullopt, absl::StrCat("lb-", i)));
    agents.back()->setServices(services, 1);
    agents.back()->setVerdicts(verdicts(kBackends));
  }
  std::map<FleetAgent*, std::shared_ptr<const FleetGeneration>> serving;
  auto all = [&] {
    std::vector<FleetAgent*> list;
    for (const auto& a : agents) list.push_back(a.get());
    return list;
  };
  // Turns every agent, each serving what it is offered, until all serve generation `number`.
  auto serveUntil = [&](uint64_t number) {
    return turnUntil(all(), [&] {
      bool done = true;
      for (const auto& a : agents) {
        if (std::shared_ptr<const FleetGeneration> taken = a->takeGeneration()) {
          serving[a.get()] = taken;
          a->generationApplied(taken->manifest.generation);
        }
        done &= serving[a.get()] && serving[a.get()]->manifest.generation == number;
      }
      return done;
    });
  };
  auto elected = [&]() -> FleetAgent* {
    FleetAgent* found = nullptr;
    for (const auto& a : agents) {
      if (a->status().elected) {
        EXPECT_EQ(found, nullptr) << "two instances elected";
        found = a.get();
      }
    }
    return found;
  };
  auto identicalTables = [&] {
    const Table& first = serving[agents[0].get()]->tables.at("web");
    for (const auto& a : agents) {
      const Table& table = serving[a.get()]->tables.at("web");
      EXPECT_TRUE(std::equal(table.entries().begin(), table.entries().end(),
                             first.entries().begin(), first.entries().end()));
    }
  };

  ASSERT_TRUE(serveUntil(1));
  ASSERT_NE(elected(), nullptr);
  identicalTables();
  const Table one = serving[agents[0].get()]->tables.at("web");

  // One instance of three sees web-007 down: it is the dissent, and nothing changes.
  agents[1]->setVerdicts(verdicts(kBackends, {7}));
  ASSERT_TRUE(turnUntil(all(), [&] {
    for (const auto& a : agents) {
      const auto found = a->agreedHealth().dissent.find({"web", "web-007"});
      if (found == a->agreedHealth().dissent.end() ||
          found->second != std::vector<std::string>{"lb-2"}) {
        return false;
      }
    }
    return true;
  }));
  for (const auto& a : agents) EXPECT_EQ(a->status().generation_head, 1u);

  // A second one: the quorum takes it out in generation 2, which moves only its slots.
  agents[2]->setVerdicts(verdicts(kBackends, {7}));
  ASSERT_TRUE(serveUntil(2));
  identicalTables();
  const Table two = serving[agents[0].get()]->tables.at("web");
  EXPECT_EQ(serving[agents[0].get()]->manifest.services[0].down,
            std::vector<std::string>{"web-007"});
  EXPECT_EQ(configMovement(one, two).moved_slots, one.slotCounts()[7]);

  // The elected instance leaves: another is elected and carries on from generation 2.
  FleetAgent* leader = elected();
  ASSERT_NE(leader, nullptr);
  leader->leave(absl::Now() + absl::Seconds(5));
  std::erase_if(agents, [&](const auto& a) { return a.get() == leader; });
  ASSERT_TRUE(turnUntil(all(), [&] { return elected() != nullptr; }));
  for (const auto& a : agents) a->setVerdicts(verdicts(kBackends));
  ASSERT_TRUE(serveUntil(3));
  identicalTables();
  EXPECT_EQ(serving[agents[0].get()]->manifest.made_by, elected()->status().leader);
  // web-007 back: it takes back exactly its quota.
  const Table three = serving[agents[0].get()]->tables.at("web");
  EXPECT_EQ(configMovement(two, three).moved_slots, three.slotCounts()[7]);
}

TEST_F(FleetAgentTest, AGenerationForAVersionStillBeingBuiltWaitsForIt) {
  // lb-1 is elected and plans; lb-2 builds each version slowly.
  std::unique_ptr<FleetAgent> a = agent(std::nullopt, "lb-1");
  ASSERT_TRUE(turnUntil({a.get()}, [&] { return a->status().elected; }));
  std::unique_ptr<FleetAgent> b = agent(std::nullopt, "lb-2");
  ASSERT_TRUE(push(versionText(10)).ok());
  std::optional<FleetVersionText> got_a, got_b;
  ASSERT_TRUE(turnUntil({a.get(), b.get()}, [&] {
    if (!got_a) got_a = applyOffered(*a, "v1");
    if (!got_b) got_b = applyOffered(*b, "v1");
    return got_a && got_b;
  }));
  for (FleetAgent* instance : {a.get(), b.get()}) {
    instance->setServices(
        std::make_shared<const std::vector<ServiceConfig>>(std::vector{webService(10)}), 1);
    instance->setVerdicts(verdicts(10));
  }
  ASSERT_TRUE(turnUntil({a.get(), b.get()}, [&] {
    std::shared_ptr<const FleetGeneration> taken = b->takeGeneration();
    return taken != nullptr && taken->manifest.config_version == 1;
  }));

  // Version 2 adds a backend. lb-1 applies it and plans generation 2 for it; lb-2 has taken it
  // to build but not applied it yet, so generation 2 waits.
  ASSERT_TRUE(push(versionText(11)).ok());
  std::optional<FleetVersionText> building;
  got_a.reset();
  ASSERT_TRUE(turnUntil({a.get(), b.get()}, [&] {
    if (!got_a) got_a = applyOffered(*a, "v2");
    if (!building) building = b->takeVersion();
    return got_a && building;
  }));
  a->setServices(std::make_shared<const std::vector<ServiceConfig>>(std::vector{webService(11)}),
                 2);
  a->setVerdicts(verdicts(11));
  ASSERT_TRUE(turnUntil({a.get(), b.get()}, [&] { return b->status().generation_head == 2; }));
  const absl::Time until = absl::Now() + absl::Seconds(2);
  while (absl::Now() < until) {
    a->turn(absl::Now());
    b->turn(absl::Now());
    ASSERT_EQ(b->takeGeneration(), nullptr) << "taken before its version was applied";
    absl::SleepFor(absl::Milliseconds(5));
  }
  // Applied: the generation, fetched meanwhile, is there at once.
  b->applied(building->head, absl::ToUnixMillis(absl::Now()));
  std::shared_ptr<const FleetGeneration> taken = b->takeGeneration();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->manifest.generation, 2u);
  EXPECT_EQ(taken->manifest.config_version, 2u);
}

}  // namespace
}  // namespace berth
