#include "berth/control/table_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "berth/api/request.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
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
                              "\"healthy\":false,\"drained\":false,\"slots\":0}"));
  EXPECT_THAT(json, HasSubstr("],\"entries\":["));
  const std::string text = tableText(small.service, small.table, ", unhealthy: web-2");
  EXPECT_THAT(text, StartsWith("service web (tcp 198.18.100.1:80): maglev, M=13, 3 backends, "
                               "unhealthy: web-2, fingerprint "));
  EXPECT_THAT(text, HasSubstr("slot backend\n0 web-"));
  EXPECT_THAT(text, HasSubstr("  (unhealthy)\n"));
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
