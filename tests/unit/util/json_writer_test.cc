#include "berth/util/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace berth {
namespace {

TEST(JsonWriterTest, NestsContainersWithCommasInTheRightPlaces) {
  JsonWriter json;
  json.beginObject()
      .key("a")
      .value(1)
      .key("b")
      .beginArray()
      .value("x")
      .value(true)
      .null()
      .endArray();
  json.key("c").beginObject().endObject().endObject();
  EXPECT_EQ(json.str(), R"({"a":1,"b":["x",true,null],"c":{}})");
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControlCharacters) {
  JsonWriter json;
  json.value(absl::string_view("q\"b\\n\n\x01", 7));
  EXPECT_EQ(json.str(), R"("q\"b\\n\n\u0001")");
}

TEST(JsonWriterTest, NonFiniteNumbersBecomeNull) {
  JsonWriter json;
  json.beginArray().value(1.5).value(std::nan("")).value(INFINITY).endArray();
  EXPECT_EQ(json.str(), "[1.5,null,null]");
}

TEST(JsonWriterTest, DoublesReadBackExactlyInTheirShortestForm) {
  JsonWriter json;
  json.beginArray().value(4 / 3.5).value(0.1).value(100.0).value(1e-7).endArray();
  EXPECT_EQ(json.str(), "[1.1428571428571428,0.1,100,1e-07]");
}

TEST(JsonWriterTest, RawValuesAndStringListsTakeTheirPlaceAmongTheOthers) {
  JsonWriter inner;
  inner.beginObject().key("n").value(1).endObject();
  JsonWriter json;
  json.beginArray().raw(inner.str()).strings({"a", "b"}).strings({}).raw("2").endArray();
  EXPECT_EQ(json.str(), R"([{"n":1},["a","b"],[],2])");
}

}  // namespace
}  // namespace berth
