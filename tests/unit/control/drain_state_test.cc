#include "berth/control/drain_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class DrainStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/berth-drain-state-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/drains.json";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(directory_.c_str());
  }
  std::string read() const {
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string directory_;
  std::string path_;
};

// The file is sorted JSON, so equal drains give byte-equal files, and it reads back as written.
TEST_F(DrainStateTest, RendersSortedAndReadsBack) {
  DrainsByService drains;
  drains["web"] = {"web-07", "web-02"};
  drains["dns"] = {"ns-1"};
  drains["idle"] = {};
  const std::string text = renderDrainState(drains);
  EXPECT_EQ(text,
            "{\"version\":1,\"drains\":{\"dns\":[\"ns-1\"],\"web\":[\"web-02\",\"web-07\"]}}\n");
  absl::StatusOr<DrainsByService> parsed = parseDrainState(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->at("web"), UnorderedElementsAre("web-02", "web-07"));
  EXPECT_THAT(parsed->at("dns"), UnorderedElementsAre("ns-1"));
  EXPECT_FALSE(parsed->contains("idle"));
}

TEST_F(DrainStateTest, BadFilesAreRefusedWithTheReason) {
  EXPECT_THAT(parseDrainState("{").status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(parseDrainState("[1]").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(parseDrainState("{\"drains\":{}}").status().message(), HasSubstr("version"));
  EXPECT_THAT(parseDrainState("{\"version\":2}").status().message(),
              HasSubstr("version 2: this berthd reads only 1"));
  EXPECT_THAT(parseDrainState("{\"version\":1,\"drains\":[]}").status().message(),
              HasSubstr("drains: not an object"));
  EXPECT_THAT(parseDrainState("{\"version\":1,\"drains\":{\"web\":\"a\"}}").status().message(),
              HasSubstr("drains.web: not a list"));
  EXPECT_THAT(parseDrainState("{\"version\":1,\"drains\":{\"web\":[[1]]}}").status().message(),
              HasSubstr("drains.web: a backend that is not a name"));
}

TEST_F(DrainStateTest, AMissingFileMeansNoDrainsAndABadOneNamesTheFile) {
  absl::StatusOr<DrainsByService> none = loadDrainState(path_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  std::ofstream(path_) << "{\"version\":9}";
  absl::StatusOr<DrainsByService> bad = loadDrainState(path_);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(path_ + ": version 9"));
}

// A restart restores what the last run kept and names the drains of backends the config still
// has; an unreadable file is set aside, logged, and restores nothing.
TEST_F(DrainStateTest, ARestartRestoresTheDrainsOrSetsABadFileAside) {
  ServiceConfig web;
  web.name = "web";
  web.backends.resize(2);
  web.backends[0].name = "web-1";
  web.backends[1].name = "web-2";
  std::vector<std::string> lines;
  const auto log = [&lines](const std::string& line) { lines.push_back(line); };
  DrainStateWriter writer(path_);
  EXPECT_TRUE(writer.restore({web}, log).empty()) << "no file: no drains";
  EXPECT_TRUE(lines.empty());

  std::ofstream(path_) << renderDrainState({{"web", {"web-2", "gone"}}});
  const DrainsByService restored = writer.restore({web}, log);
  EXPECT_THAT(restored.at("web"), UnorderedElementsAre("web-2", "gone"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "drains restored from " + path_ + ": web/web-2");

  std::ofstream(path_) << "{not json";
  EXPECT_TRUE(writer.restore({web}, log).empty());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], HasSubstr("warning: drains not restored: " + path_));
  EXPECT_THAT(lines[1], HasSubstr("; kept as " + path_ + ".unreadable"));
  EXPECT_NE(access((path_ + ".unreadable").c_str(), F_OK), -1);
  EXPECT_EQ(access(path_.c_str(), F_OK), -1) << "the next drain writes a new file";
  unlink((path_ + ".unreadable").c_str());
}

// Saves return at once; the newest drains are what the file holds once the writer is gone, and
// no temporary file is left beside it.
TEST_F(DrainStateTest, TheWriterLeavesTheNewestDrainsWholeOnDisk) {
  {
    DrainStateWriter writer(path_);
    for (int i = 0; i < 50; ++i) {
      DrainsByService drains;
      drains["web"] = {"web-" + std::to_string(i)};
      writer.save(drains);
    }
  }
  absl::StatusOr<DrainsByService> loaded = loadDrainState(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->at("web"), UnorderedElementsAre("web-49"));
  struct stat info;
  ASSERT_EQ(stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
  EXPECT_EQ(std::system(("test $(ls " + directory_ + " | wc -l) -eq 1").c_str()), 0);
}

TEST_F(DrainStateTest, AFailedWriteIsReportedAndNothingElse) {
  DrainStateWriter writer(directory_ + "/missing/drains.json");
  writer.save({});
  // The write runs on the writer's thread; wait for its outcome, bounded.
  for (int i = 0; i < 500 && writer.lastWrite().ok(); ++i) usleep(2000);
  EXPECT_THAT(writer.lastWrite().message(), HasSubstr("cannot create"));
}

}  // namespace
}  // namespace berth
