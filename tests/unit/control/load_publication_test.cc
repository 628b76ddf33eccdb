#include "berth/control/load_publication.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace berth {
namespace {

ServiceConfig service(const std::string& name, double bounded_load, int backends) {
  ServiceConfig config;
  config.name = name;
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = 1009;
  config.bounded_load = bounded_load;
  for (int i = 0; i < backends; ++i) {
    BackendConfig backend;
    backend.name = name + "-" + std::to_string(i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(i + 1));
    config.backends.push_back(backend);
  }
  return config;
}

class LoadPublicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const ServiceConfig& config : {service("web", 1.25, 3), service("plain", 0, 2)}) {
      absl::StatusOr<ServiceState> state =
          ServiceState::create(config, std::vector<bool>(config.backends.size(), true));
      ASSERT_TRUE(state.ok()) << state.status();
      services_.push_back(*std::move(state));
      ASSERT_TRUE(ids_.service(config.name).ok());
      for (const BackendConfig& backend : config.backends) {
        ASSERT_TRUE(ids_.backend(config.name, backend.name).ok());
      }
    }
  }

  uint32_t id(const std::string& service, const std::string& backend) const {
    return *ids_.findBackend(service, backend);
  }

  bool publish() {
    return publishBackendLoads(
        services_, ids_,
        [&](uint32_t backend) { return active_.contains(backend) ? active_.at(backend) : 0; },
        *loads_);
  }

  std::vector<ServiceState> services_;
  CounterIds ids_;
  absl::flat_hash_map<uint32_t, uint64_t> active_;
  std::unique_ptr<BackendLoads> loads_ = std::make_unique<BackendLoads>();
};

// Each backend's flows as the workers count them, and the serving total of the healthy ones.
TEST_F(LoadPublicationTest, PublishesEachBackendAndTheServingTotal) {
  active_ = {{id("web", "web-0"), 10}, {id("web", "web-1"), 20}, {id("web", "web-2"), 30}};
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->generation.load(), 1u);
  EXPECT_EQ(loads_->active[id("web", "web-1")].load(), 20u);
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), 60u);

  // A failed backend's flows still show as its own, but no longer count as serving.
  ASSERT_TRUE(services_[0].setHealth({true, false, true}).ok());
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->generation.load(), 2u);
  EXPECT_EQ(loads_->active[id("web", "web-1")].load(), 20u);
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), 40u);

  // A drained backend (weight 0) does not serve either.
  ASSERT_TRUE(services_[0].setDrained("web-2", true).ok());
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), 10u);
}

// Services without bounded_load are left alone, and with none at all the generation stays.
TEST_F(LoadPublicationTest, OnlyBoundedLoadServices) {
  active_ = {{id("plain", "plain-0"), 7}};
  services_.erase(services_.begin());
  EXPECT_FALSE(publish());
  EXPECT_EQ(loads_->generation.load(), 0u);
  EXPECT_EQ(loads_->active[id("plain", "plain-0")].load(), 0u);
}

TEST_F(LoadPublicationTest, CountsPast32BitsAreClamped) {
  active_ = {{id("web", "web-0"), uint64_t{1} << 40}, {id("web", "web-1"), 1}};
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->active[id("web", "web-0")].load(), UINT32_MAX);
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), UINT32_MAX);
}

}  // namespace
}  // namespace berth
