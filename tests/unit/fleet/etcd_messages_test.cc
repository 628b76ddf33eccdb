// The messages berth sends to etcd's JSON gateway and reads back (fleet/etcd_messages.h). Pinned:
// - keys, range ends and values go as base64 and 64-bit numbers as decimal strings, as the
//   gateway's protobuf mapping takes them;
// - a field at its default (no range end, no lease, no comparisons, no failure branch, a watch
//   from now) is left out;
// - a transaction's comparisons name the revision their target compares, and each request of a
//   branch is wrapped as the kind it is (range, put, delete);
// - a range can ask for keys alone, or for its greatest key alone;
// - the readers take 64-bit numbers past a double's precision, base64 bytes, and a field left out
//   as its default, and refuse a field of the wrong kind.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "berth/fleet/etcd_client.h"

namespace berth {
namespace {

using Json = nlohmann::json;

Json written(const std::string& body) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(json.is_discarded()) << body;
  return json;
}

TEST(EtcdMessagesTest, RangesAndPutsAreBase64WithDefaultsLeftOut) {
  EXPECT_EQ(written(etcdRequest(EtcdRange("/k"))), Json({{"key", etcdBase64("/k")}}));
  EXPECT_EQ(written(etcdRequest(etcdPrefixRange("/p/"))),
            Json({{"key", etcdBase64("/p/")}, {"range_end", etcdBase64("/p0")}}));
  EXPECT_EQ(written(etcdRequest(EtcdPut("/k", std::string("v\0\xff", 3)))),
            Json({{"key", etcdBase64("/k")}, {"value", etcdBase64(std::string("v\0\xff", 3))}}));
  EXPECT_EQ(written(etcdRequest(EtcdPut("/k", "v", 7587869425091473665))),
            Json({{"key", etcdBase64("/k")},
                  {"value", etcdBase64("v")},
                  {"lease", "7587869425091473665"}}));
}

TEST(EtcdMessagesTest, ARangeCanAskForKeysOnlyOrItsGreatestKey) {
  EtcdRange keys = etcdPrefixRange("/p/");
  keys.keys_only = true;
  EXPECT_EQ(written(etcdRequest(keys))["keys_only"], true);
  EtcdRange greatest = etcdPrefixRange("/p/");
  greatest.greatest_key_only = true;
  const Json json = written(etcdRequest(greatest));
  EXPECT_EQ(json["sort_order"], "DESCEND");
  EXPECT_EQ(json["sort_target"], "KEY");
  EXPECT_EQ(json["limit"], "1");
  EXPECT_FALSE(json.contains("keys_only"));
}

TEST(EtcdMessagesTest, ATransactionWrapsEachRequestAsItsKind) {
  const EtcdTxn txn(
      {{"/a", EtcdCompare::Target::kCreate, 0}, {"/b", EtcdCompare::Target::kMod, 42}},
      {EtcdPut("/a", "1", 5), EtcdDeleteRange{etcdPrefixRange("/old/")}}, {EtcdRange("/a")});
  const Json expected = {
      {"compare",
       {{{"key", etcdBase64("/a")},
         {"target", "CREATE"},
         {"result", "EQUAL"},
         {"create_revision", "0"}},
        {{"key", etcdBase64("/b")},
         {"target", "MOD"},
         {"result", "EQUAL"},
         {"mod_revision", "42"}}}},
      {"success",
       {{{"request_put", {{"key", etcdBase64("/a")}, {"value", etcdBase64("1")}, {"lease", "5"}}}},
        {{"request_delete_range",
          {{"key", etcdBase64("/old/")}, {"range_end", etcdBase64("/old0")}}}}}},
      {"failure", {{{"request_range", {{"key", etcdBase64("/a")}}}}}}};
  EXPECT_EQ(written(etcdRequest(txn)), expected);
}

TEST(EtcdMessagesTest, ATransactionWithoutComparisonsOrFailureLeavesThemOut) {
  const Json json = written(etcdRequest(EtcdTxn({}, {EtcdRange("/a"), EtcdRange("/b")})));
  EXPECT_FALSE(json.contains("compare"));
  EXPECT_FALSE(json.contains("failure"));
  ASSERT_EQ(json["success"].size(), 2u);
  EXPECT_EQ(json["success"][1]["request_range"]["key"], etcdBase64("/b"));
  EXPECT_EQ(written(etcdRequest(EtcdTxn())), Json({{"success", Json::array()}}));
}

TEST(EtcdMessagesTest, WatchesAndNumberFieldsAreWhatTheGatewayTakes) {
  EXPECT_EQ(written(etcdRequest(EtcdWatch{EtcdRange("/h"), 12})),
            Json({{"create_request", {{"key", etcdBase64("/h")}, {"start_revision", "12"}}}}));
  EXPECT_EQ(
      written(etcdRequest(EtcdWatch{etcdPrefixRange("/w/"), 0})),
      Json({{"create_request", {{"key", etcdBase64("/w/")}, {"range_end", etcdBase64("/w0")}}}}));
  EXPECT_EQ(written(etcdRequest("TTL", 10)), Json({{"TTL", "10"}}));
  EXPECT_EQ(written(etcdRequest("ID", -1)), Json({{"ID", "-1"}}));
}

TEST(EtcdMessagesTest, HelpersReadWhatTheGatewayWrites) {
  EXPECT_EQ(etcdPrefixEnd("/berth/"), "/berth0");
  EXPECT_EQ(etcdPrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(etcdPrefixEnd(std::string("\xff", 1)), std::string(1, '\0')) << "every key";
  const Json object = {{"n", "9007199254740993"}, {"m", 7}, {"b", "eA=="}, {"bad", "!!"}};
  EXPECT_EQ(*etcdInteger(object, "n"), 9007199254740993) << "past a double's precision";
  EXPECT_EQ(*etcdInteger(object, "m"), 7);
  EXPECT_EQ(*etcdInteger(object, "absent"), 0) << "a default the gateway left out";
  EXPECT_FALSE(etcdInteger(object, "b").ok());
  EXPECT_EQ(*etcdBytes(object, "b"), "x");
  EXPECT_EQ(*etcdBytes(object, "absent"), "");
  EXPECT_FALSE(etcdBytes(object, "bad").ok());
  EXPECT_EQ(etcdBase64("/berth/head"), "L2JlcnRoL2hlYWQ=");
}

}  // namespace
}  // namespace berth
