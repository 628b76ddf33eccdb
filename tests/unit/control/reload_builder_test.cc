#include "berth/control/reload_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace berth {
namespace {

using ::testing::HasSubstr;

constexpr char kConfig[] = R"(services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 65537
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
      - { name: web-3, address: 198.18.1.4 }
)";

class ReloadBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/berth-reload-builder-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/berth.yaml";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  void write(const std::string& text) const { std::ofstream(path_) << text; }
  static ReloadSource file(std::string path) {
    ReloadSource source;
    source.path = std::move(path);
    return source;
  }
  static ReloadSource fleetVersion(const Config& local, std::string text, std::string name) {
    ReloadSource source;
    source.local = local;
    source.fleet_text = std::move(text);
    source.fleet_source = std::move(name);
    return source;
  }

  // Polls take() as the management loop does, without waiting in it.
  static absl::StatusOr<BuiltReload> finish(ReloadBuilder& builder) {
    for (int i = 0; i < 10000; ++i) {
      if (std::optional<absl::StatusOr<BuiltReload>> built = builder.take()) return *built;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return absl::DeadlineExceededError("no build in 10 s");
  }

  std::string directory_;
  std::string path_;
};

// What the builder pins: it hands back a parsed config and its services with the run-time drains
// kept (names the file still has) and every backend healthy, one build at a time.
TEST_F(ReloadBuilderTest, BuildsTheFileWithTheDrainsKept) {
  write(kConfig);
  ReloadBuilder builder;
  EXPECT_FALSE(builder.take().has_value());
  ASSERT_TRUE(builder.start(file(path_), {{"web", {"web-2", "gone"}}}));
  EXPECT_FALSE(builder.start(file(path_), {})) << "one build at a time";
  absl::StatusOr<BuiltReload> built = finish(builder);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->services.size(), 1u);
  const ServiceState& web = built->services[0];
  EXPECT_EQ(web.drainedBackends(), std::vector<std::string>{"web-2"});
  EXPECT_EQ(web.healthy(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(built->config.services[0].backends.size(), 3u);
  EXPECT_TRUE(builder.start(file(path_), {})) << "free again once taken";
  EXPECT_TRUE(finish(builder).ok());
}

TEST_F(ReloadBuilderTest, ABadFileIsARefusalWithItsFieldAndLine) {
  write(std::string(kConfig) + "      - { name: web-1, address: 198.18.1.5 }\n");
  ReloadBuilder builder;
  ASSERT_TRUE(builder.start(file(path_), {}));
  absl::StatusOr<BuiltReload> built = finish(builder);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(), HasSubstr(path_ + ":11:"));
}

TEST_F(ReloadBuilderTest, AMissingFileIsARefusal) {
  ReloadBuilder builder;
  ASSERT_TRUE(builder.start(file(directory_ + "/nothing.yaml"), {}));
  EXPECT_EQ(finish(builder).status().code(), absl::StatusCode::kNotFound);
}

// A fleet version is composed with the local part in force, and a version that does not fit this
// instance is refused naming the version and the line in the pushed text.
TEST_F(ReloadBuilderTest, AFleetVersionComposesWithTheLocalPart) {
  write(
      "dataplane:\n  ports:\n    - {name: p0, device: net_null0, ipv4: 198.18.0.2}\n"
      "fleet:\n  endpoints: [http://127.0.0.1:2379]\n  name: lb-1\n");
  ReloadBuilder builder;
  ASSERT_TRUE(builder.start(file(path_), {}));
  absl::StatusOr<BuiltReload> local = finish(builder);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_TRUE(local->services.empty()) << "no version yet: no services";

  ASSERT_TRUE(builder.start(fleetVersion(local->local, kConfig, "fleet version 3 (web.yaml)"), {}));
  absl::StatusOr<BuiltReload> built = finish(builder);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->services.size(), 1u);
  EXPECT_TRUE(built->local.services.empty());
  EXPECT_TRUE(built->config.fleet.has_value());

  const std::string unknown_port = std::string(kConfig) + "    via: p9\n";
  ASSERT_TRUE(
      builder.start(fleetVersion(local->local, unknown_port, "fleet version 4 (web.yaml)"), {}));
  absl::StatusOr<BuiltReload> refused = finish(builder);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("fleet version 4 (web.yaml):11:"));
}

}  // namespace
}  // namespace berth
