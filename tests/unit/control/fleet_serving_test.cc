// Whose verdicts count in a fleet with table generations (control/fleet_serving.h). Pinned:
// - without a generation, or for a service the generation lacks, this instance's probes decide;
// - with one, while etcd answers, the fleet's word alone: its down set is out, and a backend the
//   probes see down still serves;
// - fail-safe (etcd out of reach), a backend the probes see down is out too, and is listed as a
//   fail-safe removal, "service/backend", unless the fleet has it down already;
// - a backend the base table leaves out (new to the generation, with a check no instance has
//   judged) stays out whatever its probes say;
// - a build's base is the generation's table, or the step this instance took from it ahead of
//   the elected instance, and no base without a generation.

#include "berth/control/fleet_serving.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace berth {
namespace {

ServiceConfig service(const std::string& name, size_t count) {
  ServiceConfig config;
  config.name = name;
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = 251;
  for (size_t i = 0; i < count; ++i) {
    BackendConfig backend;
    backend.name = absl::StrFormat("%s-%d", name, i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(1 + i));
    backend.health.type = HealthCheckType::kTcp;
    config.backends.push_back(backend);
  }
  return config;
}

// Generation 1 of `services`, every backend judged up but those in `down` (service "web").
std::shared_ptr<const FleetGeneration> generationOf(const std::vector<ServiceConfig>& services,
                                                    const std::set<std::string>& down = {}) {
  AgreedHealth agreed;
  for (const ServiceConfig& config : services) {
    for (const BackendConfig& backend : config.backends) {
      agreed.judged[config.name].insert(backend.name);
    }
  }
  if (!down.empty()) agreed.down["web"] = down;
  absl::StatusOr<std::optional<PlannedGeneration>> planned =
      planGeneration(GenerationKeys("/berth"), nullptr, services, 1, agreed, "lb-a", 1);
  EXPECT_TRUE(planned.ok() && planned->has_value());
  return std::make_shared<const FleetGeneration>((*planned)->generation);
}

const std::vector<bool> kLocal = {true, false, true, true};

TEST(FleetServingTest, WithoutAGenerationTheProbesDecide) {
  const ServiceConfig web = service("web", 4);
  FleetServing serving;
  EXPECT_EQ(serving.verdicts(web, kLocal, nullptr), kLocal);
  serving.generation = generationOf({service("other", 2)});
  EXPECT_EQ(serving.verdicts(web, kLocal, nullptr), kLocal);
  EXPECT_TRUE(serving.generationBase({}, AgreedHealth()) != nullptr);
  EXPECT_TRUE(FleetServing().generationBase({}, AgreedHealth()) == nullptr);
}

TEST(FleetServingTest, WhileEtcdAnswersTheFleetsWordAloneCounts) {
  const ServiceConfig web = service("web", 4);
  FleetServing serving;
  serving.generation = generationOf({web}, {"web-3"});
  const Table& base = serving.generation->tables.at("web");
  // web-1 is down by this instance's probes only: it serves; web-3 is down by the fleet's word.
  EXPECT_EQ(serving.verdicts(web, kLocal, &base), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(serving.verdicts(web, kLocal, nullptr), (std::vector<bool>{true, true, true, false}));
  EXPECT_TRUE(
      serving.failSafeRemovals({web}, [&](size_t) -> const std::vector<bool>& { return kLocal; })
          .empty());
}

TEST(FleetServingTest, FailSafeTheProbesTakeBackendsOutTooAndAreListed) {
  const ServiceConfig web = service("web", 4);
  FleetServing serving;
  serving.generation = generationOf({web}, {"web-3"});
  serving.fail_safe = true;
  const std::vector<bool> local = {true, false, true, false};
  EXPECT_EQ(serving.verdicts(web, local, &serving.generation->tables.at("web")),
            (std::vector<bool>{true, false, true, false}));
  // web-3 is down by the fleet's word already: only web-1 is this instance's own removal.
  EXPECT_EQ(
      serving.failSafeRemovals({web}, [&](size_t) -> const std::vector<bool>& { return local; }),
      std::vector<std::string>{"web/web-1"});
}

TEST(FleetServingTest, ABackendTheBaseLeavesOutStaysOutWhateverItsProbesSay) {
  ServiceConfig web = service("web", 4);
  FleetServing serving;
  serving.generation = generationOf({web});
  // Version 2 adds web-4, checked and judged by no instance yet: the step leaves it out.
  BackendConfig added = web.backends.back();
  added.name = "web-4";
  web.backends.push_back(added);
  AgreedHealth agreed;
  for (int i = 0; i < 4; ++i) agreed.judged["web"].insert(absl::StrFormat("web-%d", i));
  absl::StatusOr<std::optional<Table>> step = generationBaseFor(*serving.generation, web, agreed);
  ASSERT_TRUE(step.ok() && step->has_value());
  const std::vector<bool> all_up(5, true);
  EXPECT_EQ(serving.verdicts(web, all_up, &**step),
            (std::vector<bool>{true, true, true, true, false}));

  // A build from a service state served on that step takes the step as its base, not the
  // generation's table.
  absl::StatusOr<ServiceState> state = ServiceState::create(web, all_up, {}, **step);
  ASSERT_TRUE(state.ok()) << state.status();
  const std::vector<ServiceState> states = {*state};
  EXPECT_EQ(serving.verdicts(states[0], all_up),
            (std::vector<bool>{true, true, true, true, false}));
  GenerationBase base = serving.generationBase(states, agreed);
  ASSERT_NE(base, nullptr);
  absl::StatusOr<std::optional<Table>> again = base(web);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_TRUE(std::equal((*again)->entries().begin(), (*again)->entries().end(),
                         (*step)->entries().begin(), (*step)->entries().end()));
}

}  // namespace
}  // namespace berth
