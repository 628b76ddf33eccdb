#include "berth/control/table_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "berth/api/request.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

ServiceConfig threeBackends() {
  ServiceConfig service;
  service.name = "web";
  service.vip = *IpAddress::parse("198.18.100.1");
  service.port = 80;
  service.table_size = 13;
  for (int b = 1; b <= 3; ++b) {
    BackendConfig backend;
    backend.name = "web-" + std::to_string(b);
    backend.address = *IpAddress::parse("198.18.0." + std::to_string(b));
    service.backends.push_back(backend);
  }
  return service;
}

// A service of three backends at M=13, the second unhealthy.
struct SmallService {
  ServiceConfig service = threeBackends();
  Table table = *withHealth(*build(service.hashingBackends(), 13), {true, false, true});
};

// What the renderer pins: whatever the size of its pieces, they join into the same rendering,
// so that berthd's live table (sent in pieces) and berthctl's offline one (whole) agree.
TEST(TableRendererTest, PiecesOfAnySizeJoinIntoTheSameRendering) {
  const SmallService small;
  const std::string json = tableJson(small.service, small.table);
  const std::string text = tableText(small.service, small.table, ", a note");
  for (size_t budget : {1, 7, 64, 4096}) {
    TableRenderer renderer(small.service, small.table, ", a note");
    std::string json_pieces;
    std::string text_pieces;
    while (renderer.nextJson(json_pieces, budget)) {
    }
    while (renderer.nextText(text_pieces, budget)) {
    }
    EXPECT_EQ(json_pieces, json) << budget;
    EXPECT_EQ(text_pieces, text) << budget;
  }
}

TEST(TableRendererTest, TheJsonAndTextSayWhatTheTableHolds) {
  const SmallService small;
  const std::string json = tableJson(small.service, small.table);
  EXPECT_THAT(json, StartsWith("{\"service\":\"web\",\"table_size\":13,\"listener\":\"tcp "
                               "198.18.100.1:80\""));
  EXPECT_THAT(json, HasSubstr("{\"name\":\"web-2\",\"address\":\"198.18.0.2\",\"weight\":1,"
                              "\"effective_weight\":0,\"healthy\":false,\"drained\":false,"
                              "\"slots\":0}"));
  EXPECT_THAT(json, HasSubstr("],\"entries\":["));
  const std::string text = tableText(small.service, small.table, ", unhealthy: web-2");
  EXPECT_THAT(text, StartsWith("service web (tcp 198.18.100.1:80): maglev, M=13, 3 backends, "
                               "unhealthy: web-2, fingerprint "));
  EXPECT_THAT(text, HasSubstr("slot backend\n0 web-"));
  EXPECT_THAT(text, HasSubstr("  weight 1, in use 0 (unhealthy)\n"));
}

// A weight is shown one way everywhere: as configured, and in use. The config's `weight: 0` is
// a drain and says so, without the table's stand-in weight of 1; a drain keeps the configured
// weight for the undrain.
TEST(TableRendererTest, WeightsAreShownAsConfiguredAndInUse) {
  ServiceConfig service = threeBackends();
  service.backends[0].weight = 0;
  service.backends[2].weight = 3;
  const Table table =
      *withHealth(*build(service.hashingBackends(), 13), {true, true, true}, {true, false, true});
  const std::string text = tableText(service, table, "");
  EXPECT_THAT(text, HasSubstr("  weight 0, in use 0 (drained)\n"));
  EXPECT_THAT(text, HasSubstr("  weight 1, in use 1\n"));
  EXPECT_THAT(text, HasSubstr("  weight 3, in use 0 (drained)\n"));
  EXPECT_THAT(tableJson(service, table),
              HasSubstr("\"name\":\"web-3\",\"address\":\"198.18.0.3\",\"weight\":3,"
                        "\"effective_weight\":0,\"healthy\":true,\"drained\":true"));
  EXPECT_EQ(weightText(2, 2, false, false), "weight 2, in use 2");
}

// --summary: the balance and the backends, without a line per slot; with many backends, the
// most over and under their weight's share, and a note that the rest are left out.
TEST(TableRendererTest, ASummaryHasTheBalanceAndNoSlots) {
  const SmallService small;
  const std::string text = tableText(small.service, small.table, "", true);
  EXPECT_THAT(text, HasSubstr("\n2 serving; slots per backend min 6, max 7; over its weight's "
                              "share min 0.9231, max 1.0769\nbackend slots per backend:\n"));
  EXPECT_THAT(text, Not(HasSubstr("slot backend")));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6);
  const std::string json = tableJson(small.service, small.table, true);
  EXPECT_THAT(json, HasSubstr("],\"summary\":true}"));
  EXPECT_THAT(json, Not(HasSubstr("entries")));

  ServiceConfig many = threeBackends();
  many.table_size = 1021;
  many.backends.clear();
  for (int b = 0; b < 100; ++b) {
    BackendConfig backend;
    backend.name = "b-" + std::to_string(b);
    backend.address = *IpAddress::parse("198.18.1." + std::to_string(b + 1));
    many.backends.push_back(backend);
  }
  const Table table = *build(many.hashingBackends(), 1021);
  const std::string long_text = tableText(many, table, "", true);
  EXPECT_THAT(long_text, HasSubstr("the 20 backends most over and under their weight's share, of "
                                   "100 (0 not serving):\n"));
  EXPECT_THAT(long_text, HasSubstr("(without --summary: every backend, and the backend of every "
                                   "slot)\n"));
  EXPECT_EQ(std::count(long_text.begin(), long_text.end(), '\n'), 2 + 1 + 20 + 1);
  // Whatever the pieces, the same rendering.
  TableRenderer renderer(many, table, "", true);
  std::string pieces;
  while (renderer.nextText(pieces, 5)) {
  }
  EXPECT_EQ(pieces, long_text);
}

TEST(TableRendererTest, TheReplyStreamIsOneControlReplyWithTheTextAsAString) {
  const SmallService small;
  std::unique_ptr<ReplyStream> stream = tableReplyStream(small.service, small.table, 7, ", live");
  const std::string reply = drainReply(*stream, 5);
  EXPECT_THAT(reply, StartsWith("{\"ok\":true,\"snapshot_generation\":7,\"table\":{\"service\""));
  absl::StatusOr<ControlReply> parsed = parseControlReply(reply);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->ok);
  EXPECT_EQ(parsed->strings["text"], tableText(small.service, small.table, ", live"));
}

}  // namespace
}  // namespace berth
