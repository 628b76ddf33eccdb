// The reload subsystem (control/reload_queue.h), with a fake loop behind it. Pinned:
// - a request starts a build, and its outcome is the apply's, with the snapshot then; requests
//   made while a build runs are answered together by the next build, which begins after them;
// - a file that does not parse is refused with its reason, and the request says so;
// - between reloads the fleet's version is built, and its outcome goes to the fleet with the
//   refusal's reason alone; a reload asked for first is built first;
// - a drain during a build has it built again before it applies, so that no drain is lost;
// - the history counts what applied and what was refused, and keeps the last refusal's reason
//   (the file's own, without the log's preamble) until a later reload applies.

#include "berth/control/reload_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kConfig[] = R"(services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 251
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
)";

class FakeLoop : public ReloadTarget {
 public:
  std::string path;
  uint64_t generation = 7;
  std::vector<std::string> applied;  // what each applied build was, by its service count
  std::vector<std::string> refused;
  std::vector<std::string> versions;  // "N ok" or "N refused: why"
  int generation_bases = 0;

  ReloadSource fileSource() const override {
    ReloadSource source;
    source.path = path;
    return source;
  }
  ReloadSource versionSource(const FleetVersionText& version) const override {
    ReloadSource source;
    source.local = Config();
    source.local->fleet.emplace();
    source.fleet_text = version.text;
    source.fleet_source = version.source;
    return source;
  }
  GenerationBase generationBase() const override {
    ++const_cast<FakeLoop*>(this)->generation_bases;
    return nullptr;
  }
  DrainsByService drains() const override { return {}; }
  absl::Status applyReload(BuiltReload built) override {
    ++generation;
    applied.push_back(std::to_string(built.config.services.size()) + " service(s)");
    return absl::OkStatus();
  }
  absl::Status refuseReload(absl::string_view why) override {
    refused.emplace_back(why);
    return absl::FailedPreconditionError(absl::StrCat("refused: ", why));
  }
  void versionDone(FleetVersionText version, const absl::Status& status,
                   const std::string& why) override {
    versions.push_back(absl::StrCat(version.head.version, status.ok() ? " ok" : " refused: ", why));
  }
  uint64_t snapshotGeneration() const override { return generation; }
};

class ReloadQueueTest : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/berth-reload-queue-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    loop_.path = directory_ + "/berth.yaml";
    write(kConfig);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  void write(const std::string& text) const { std::ofstream(loop_.path) << text; }
  // Turns the queue, as the management loop does, until `done`, or 10 s.
  bool serveUntil(
      const std::function<bool()>& done,
      const std::function<std::optional<FleetVersionText>()>& take_version = [] {
        return std::nullopt;
      }) {
    for (int i = 0; i < 10000; ++i) {
      queue_.serve(take_version);
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  std::string directory_;
  FakeLoop loop_;
  std::vector<std::string> log_;
  ReloadQueue queue_{loop_, [this](const std::string& line) { log_.push_back(line); }};
};

TEST_F(ReloadQueueTest, RequestsDuringABuildAreAnsweredTogetherByTheNextBuild) {
  const uint64_t first = queue_.request();
  const uint64_t second = queue_.request();
  const uint64_t third = queue_.request();
  EXPECT_EQ(first, 1u);
  EXPECT_FALSE(queue_.outcome(first, nullptr));
  uint64_t generation = 0;
  ASSERT_TRUE(serveUntil([&] { return queue_.outcome(third, &generation).has_value(); }));
  EXPECT_TRUE(queue_.outcome(first, nullptr)->ok());
  EXPECT_TRUE(queue_.outcome(second, nullptr)->ok());
  // The first build answered request 1; the second, begun after 2 and 3, answered both.
  EXPECT_THAT(loop_.applied, ElementsAre("1 service(s)", "1 service(s)"));
  EXPECT_EQ(generation, 9u);
  EXPECT_EQ(loop_.generation_bases, 2);
}

TEST_F(ReloadQueueTest, AFileThatDoesNotParseIsRefusedWithItsReason) {
  write("services:\n  - name: web\n    vip: not-an-address\n");
  const uint64_t request = queue_.request();
  ASSERT_TRUE(serveUntil([&] { return queue_.outcome(request, nullptr).has_value(); }));
  const absl::Status outcome = *queue_.outcome(request, nullptr);
  EXPECT_EQ(outcome.code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(loop_.refused.size(), 1u);
  EXPECT_THAT(loop_.refused[0], HasSubstr("berth.yaml:3"));
  EXPECT_TRUE(loop_.applied.empty());
}

TEST_F(ReloadQueueTest, FleetVersionsAreBuiltBetweenReloadsAndTheirOutcomeGoesToTheFleet) {
  std::vector<FleetVersionText> offered = {
      FleetVersionText{FleetHead{3, "p3"}, "services: [", "fleet version 3 (fleet.yaml)"},
      FleetVersionText{FleetHead{2, "p2"}, kConfig, "fleet version 2 (fleet.yaml)"}};
  const auto take_version = [&]() -> std::optional<FleetVersionText> {
    if (offered.empty()) return std::nullopt;
    FleetVersionText version = offered.back();
    offered.pop_back();
    return version;
  };
  // A reload asked for first is built first; the versions follow, one at a time.
  const uint64_t request = queue_.request();
  ASSERT_TRUE(serveUntil([&] { return loop_.versions.size() == 2; }, take_version));
  EXPECT_TRUE(queue_.outcome(request, nullptr)->ok());
  ASSERT_EQ(loop_.versions.size(), 2u);
  EXPECT_EQ(loop_.versions[0], "2 ok");
  EXPECT_THAT(loop_.versions[1], HasSubstr("3 refused: fleet version 3 (fleet.yaml)"));
  EXPECT_THAT(loop_.versions[1], Not(HasSubstr("refused: refused")));
  EXPECT_EQ(loop_.applied.size(), 2u);
}

TEST_F(ReloadQueueTest, TheHistoryKeepsTheLastRefusalUntilAReloadApplies) {
  const absl::Time start = absl::Now();
  queue_.startedAt(start);
  EXPECT_FALSE(queue_.history().anyEnded());
  EXPECT_TRUE(queue_.history().lastSucceeded());
  EXPECT_EQ(queue_.history().last_success_at, start);

  write("services:\n  - name: web\n    vip: not-an-address\n");
  uint64_t request = queue_.request();
  ASSERT_TRUE(serveUntil([&] { return queue_.outcome(request, nullptr).has_value(); }));
  const ReloadHistory refused = queue_.history();
  EXPECT_EQ(refused.refused, 1u);
  EXPECT_EQ(refused.applied, 0u);
  EXPECT_FALSE(refused.lastSucceeded());
  EXPECT_THAT(refused.last_status.message(), HasSubstr("berth.yaml:3"));
  EXPECT_THAT(refused.last_status.message(), Not(HasSubstr("refused: ")));
  EXPECT_EQ(refused.last_what, loop_.path);
  EXPECT_EQ(refused.last_success_at, start);
  EXPECT_GE(refused.last_at, start);

  write(kConfig);
  request = queue_.request();
  ASSERT_TRUE(serveUntil([&] { return queue_.outcome(request, nullptr).has_value(); }));
  const ReloadHistory applied = queue_.history();
  EXPECT_EQ(applied.applied, 1u);
  EXPECT_EQ(applied.refused, 1u);
  EXPECT_TRUE(applied.lastSucceeded());
  EXPECT_EQ(applied.last_success_at, applied.last_at);
  EXPECT_GE(applied.last_at, refused.last_at);
}

TEST_F(ReloadQueueTest, ADrainDuringABuildHasItBuiltAgain) {
  const uint64_t request = queue_.request();
  queue_.drainChanged();
  ASSERT_TRUE(serveUntil([&] { return queue_.outcome(request, nullptr).has_value(); }));
  EXPECT_EQ(loop_.applied.size(), 1u);
  EXPECT_EQ(loop_.generation_bases, 2);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_EQ(log_[0],
            loop_.path + ": a drain changed while the new config was being built; building again");
}

}  // namespace
}  // namespace berth
