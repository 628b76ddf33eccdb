#include "berth/api/request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(ControlRequestTest, ParsesACommandWithItsFields) {
  absl::StatusOr<ControlRequest> request =
      parseControlRequest(R"( {"command": "drain", "service":"web" , "backend": "web-1"} )");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->command, "drain");
  EXPECT_EQ(request->field("service"), "web");
  EXPECT_EQ(request->field("backend"), "web-1");
  EXPECT_EQ(request->field("absent"), "");
}

TEST(ControlRequestTest, DecodesEscapes) {
  absl::StatusOr<ControlRequest> request =
      parseControlRequest(R"({"command":"x","name":"a\"b\\c\/d\u0041\u00e9"})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->field("name"), "a\"b\\c/dA\xc3\xa9");
  // A surrogate pair is one code point, four bytes of UTF-8.
  absl::StatusOr<ControlRequest> pair = parseControlRequest(R"({"command":"\ud83d\ude00"})");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->command, "\xf0\x9f\x98\x80");
}

TEST(ControlRequestTest, RefusesWhatIsNotARequestAndSaysWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "expected a JSON object"},
      {"[1]", "expected a JSON object"},
      {R"({"command": 1})", "must be a string"},
      {R"({"command": "a", "backend": {"name": "b"}})",
       "the value of \"backend\" must be a string"},
      {R"({"command": "a", "backend": ["b"]})", "the value of \"backend\" must be a string"},
      {R"({"command": "a", "command": "b"})", "given twice"},
      {R"({"command": "a", "x": "1", "x": "2"})", "a key given twice"},
      {R"({"x": "1"})", "no \"command\""},
      {R"({"command": "a"} trailing)", "text after the object"},
      {R"({"command": "a)", "without its closing quote"},
      {R"({"command": "\q"})", "a bad escape"},
      {R"({"command": "\ud800"})", "surrogate"},
      {"{\"command\": \"a\nb\"}", "control character"},
      {R"({"command" "a"})", "expected ':' at byte"},
      {R"({"command": "a" "b": "c"})", "expected ',' or '}'"},
  };
  for (const auto& [text, why] : cases) {
    absl::StatusOr<ControlRequest> request = parseControlRequest(text);
    ASSERT_FALSE(request.ok()) << text;
    EXPECT_THAT(std::string(request.status().message()), HasSubstr(why)) << text;
  }
  EXPECT_FALSE(parseControlRequest(std::string(kMaxControlRequestBytes + 1, ' ')).ok());
}

TEST(ControlReplyTest, ReadsOkAndTopLevelStringsAndSkipsTheRest) {
  absl::StatusOr<ControlReply> reply = parseControlReply(
      R"({"ok":true,"text":"a\nb","stats":{"counters":{"rx":1,"x":[1,2.5e3,null,false]}},"n":-3})");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->ok);
  EXPECT_EQ(reply->strings.at("text"), "a\nb");
  EXPECT_FALSE(reply->strings.contains("stats"));
  absl::StatusOr<ControlReply> error = parseControlReply(R"({"ok":false,"error":"no backend"})");
  ASSERT_TRUE(error.ok());
  EXPECT_FALSE(error->ok);
  EXPECT_EQ(error->strings.at("error"), "no backend");
  EXPECT_FALSE(parseControlReply(R"({"ok":true,"x":{"a":1)").ok());
  EXPECT_FALSE(parseControlReply(R"({"ok":"yes"})").ok());
}

}  // namespace
}  // namespace berth
