// The etcd client (fleet/etcd_client.h) against a real etcd, one member started by the test on
// free loopback ports, as Debian 12's etcd-server 3.4 serves the v3 JSON gateway. Pinned:
// - puts, ranges and transactions round-trip bytes, and a transaction that failed its
//   comparisons reads as not succeeded (the gateway leaves the field out);
// - etcd's own errors come back as statuses with etcd's message;
// - an endpoint that refuses connections, or accepts and never answers, passes the call on to
//   the next one, and turn() goes on returning meanwhile;
// - with every endpoint down, the call fails as Unavailable, naming the endpoint;
// - a watch delivers each change in order, a canceled one delivers nothing more, even when its
//   own callback cancels it with more messages waiting, and a watch from a compacted revision
//   is canceled with the compact revision.
// The messages themselves, and the readers of replies, are pinned without etcd
// (unit/fleet/etcd_messages_test.cc).

#include "berth/fleet/etcd_client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/etcd_member.h"
#include "support/loopback.h"

namespace berth {
namespace {

using Json = EtcdClient::Json;

std::string loopbackUrl(uint16_t port) { return absl::StrCat("http://127.0.0.1:", port); }

absl::StatusOr<Json> callAndWait(EtcdClient& client, absl::string_view method,
                                 std::string request) {
  std::optional<absl::StatusOr<Json>> reply;
  client.call(method, std::move(request),
              [&](absl::StatusOr<Json> answer) { reply = std::move(answer); });
  client.runUntilIdle(absl::Now() + absl::Seconds(30));
  if (!reply) return absl::DeadlineExceededError("no reply in 30 s");
  return *reply;
}

std::unique_ptr<EtcdClient> clientFor(std::vector<std::string> endpoints,
                                      absl::Duration call_timeout = absl::Seconds(5)) {
  EtcdSettings settings;
  settings.endpoints = std::move(endpoints);
  settings.call_timeout = call_timeout;
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::create(settings);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

class EtcdClientTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    member_ = new EtcdMember();
    ASSERT_TRUE(member_->waitReady()) << "etcd did not start";
  }
  static void TearDownTestSuite() { delete member_; }

  static std::string put(EtcdClient& client, absl::string_view key, absl::string_view value) {
    absl::StatusOr<Json> reply =
        callAndWait(client, "kv/put", etcdRequest(EtcdPut(std::string(key), std::string(value))));
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? (*reply)["header"].value("revision", std::string()) : "";
  }

  static EtcdMember* member_;
};

EtcdMember* EtcdClientTest::member_ = nullptr;

TEST_F(EtcdClientTest, PutsRangesAndTransactionsRoundTripBytes) {
  std::unique_ptr<EtcdClient> client = clientFor({member_->url()});
  const std::string value("bytes \x00\xff\x80 and text", 19);
  put(*client, "/t/round/a", value);
  put(*client, "/t/round/b", "two");
  absl::StatusOr<Json> range =
      callAndWait(*client, "kv/range", etcdRequest(etcdPrefixRange("/t/round/")));
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(*etcdInteger(*range, "count"), 2);
  ASSERT_EQ((*range)["kvs"].size(), 2u);
  EXPECT_EQ(*etcdBytes((*range)["kvs"][0], "key"), "/t/round/a");
  EXPECT_EQ(*etcdBytes((*range)["kvs"][0], "value"), value);
  EXPECT_GT(*etcdInteger((*range)["kvs"][0], "mod_revision"), 0);

  // Create-if-absent: the first succeeds; the second fails its comparison, and says so by
  // leaving "succeeded" out.
  const std::string create = etcdRequest(EtcdTxn(
      {{"/t/round/once", EtcdCompare::Target::kCreate, 0}}, {EtcdPut("/t/round/once", "1")}));
  absl::StatusOr<Json> first = callAndWait(*client, "kv/txn", create);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->value("succeeded", false));
  absl::StatusOr<Json> second = callAndWait(*client, "kv/txn", create);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->value("succeeded", false));
  EXPECT_FALSE(second->contains("succeeded"));
}

TEST_F(EtcdClientTest, EtcdErrorsAreStatusesWithEtcdsMessage) {
  std::unique_ptr<EtcdClient> client = clientFor({member_->url()});
  absl::StatusOr<Json> reply = callAndWait(*client, "kv/put", etcdRequest(EtcdPut("", "x")));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument) << reply.status();
  EXPECT_EQ(reply.status().message(), "etcd: etcdserver: key is not provided");
}

TEST_F(EtcdClientTest, AnEndpointThatRefusesOrHangsPassesTheCallOn) {
  const Listener hanging("");  // accepts, reads nothing, never answers
  std::unique_ptr<EtcdClient> client =
      clientFor({loopbackUrl(closedPort()), loopbackUrl(hanging.port()), member_->url()},
                absl::Milliseconds(500));
  std::optional<absl::StatusOr<Json>> reply;
  client->call("kv/range", etcdRequest(EtcdRange("/t/none")),
               [&](absl::StatusOr<Json> answer) { reply = std::move(answer); });
  int turns = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!reply && absl::Now() < deadline) {
    client->turn();
    ++turns;
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->ok()) << reply->status();
  EXPECT_GT(turns, 10) << "turn() returned while the hanging endpoint held the call";
  // The endpoint that answered is where the next call starts.
  absl::StatusOr<Json> next = callAndWait(*client, "kv/range", etcdRequest(EtcdRange("/t/none")));
  EXPECT_TRUE(next.ok()) << next.status();
}

TEST_F(EtcdClientTest, WithEveryEndpointDownTheCallIsUnavailable) {
  std::unique_ptr<EtcdClient> client =
      clientFor({loopbackUrl(closedPort()), loopbackUrl(closedPort())});
  absl::StatusOr<Json> reply = callAndWait(*client, "kv/range", etcdRequest(EtcdRange("/t")));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("etcd at http://127.0.0.1:"), std::string::npos)
      << reply.status();
}

TEST_F(EtcdClientTest, AWatchDeliversChangesInOrderUntilCanceled) {
  std::unique_ptr<EtcdClient> client = clientFor({member_->url()});
  std::vector<std::string> seen;
  bool created = false;
  const uint64_t id =
      client->watch(EtcdWatch{etcdPrefixRange("/t/watch/"), 0}, [&](absl::StatusOr<Json> message) {
        ASSERT_TRUE(message.ok()) << message.status();
        created |= message->value("created", false);
        for (const Json& event : message->value("events", Json::array())) {
          seen.push_back(*etcdBytes(event["kv"], "value"));
        }
      });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!created && absl::Now() < deadline) {
    client->turn();
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(created);
  std::unique_ptr<EtcdClient> writer = clientFor({member_->url()});
  put(*writer, "/t/watch/a", "1");
  put(*writer, "/t/watch/b", "2");
  put(*writer, "/t/elsewhere", "x");
  while (seen.size() < 2 && absl::Now() < deadline) {
    client->turn();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "2"}));
  client->cancelWatch(id);
  put(*writer, "/t/watch/c", "3");
  for (int i = 0; i < 200; ++i) {
    client->turn();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(seen.size(), 2u) << "nothing after the cancel";
}

TEST_F(EtcdClientTest, AWatchCanceledFromItsOwnCallbackHearsNothingMore) {
  std::unique_ptr<EtcdClient> client = clientFor({member_->url()});
  std::unique_ptr<EtcdClient> writer = clientFor({member_->url()});
  int with_events = 0;
  bool created = false;
  uint64_t id = 0;
  id = client->watch(EtcdWatch{etcdPrefixRange("/t/self/"), 0}, [&](absl::StatusOr<Json> message) {
    ASSERT_TRUE(message.ok()) << message.status();
    created |= message->value("created", false);
    if (!message->contains("events")) return;
    ++with_events;
    client->cancelWatch(id);
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!created && absl::Now() < deadline) {
    client->turn();
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(created);
  // Three changes, likely in one turn's worth of the stream: only the first is handed over.
  put(*writer, "/t/self/a", "1");
  put(*writer, "/t/self/b", "2");
  put(*writer, "/t/self/c", "3");
  for (int i = 0; i < 300; ++i) {
    client->turn();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(with_events, 1);
}

TEST_F(EtcdClientTest, AWatchFromACompactedRevisionIsCanceledWithIt) {
  std::unique_ptr<EtcdClient> client = clientFor({member_->url()});
  put(*client, "/t/compact/a", "1");
  const std::string revision = put(*client, "/t/compact/a", "2");
  ASSERT_TRUE(
      callAndWait(*client, "kv/compaction", etcdRequest("revision", std::stoll(revision))).ok());
  int64_t compact_revision = 0;
  bool ended = false;
  client->watch(EtcdWatch{EtcdRange("/t/compact/a"), 1}, [&](absl::StatusOr<Json> message) {
    if (!message.ok()) {
      ended = true;
      return;
    }
    if (message->value("canceled", false)) {
      compact_revision = *etcdInteger(*message, "compact_revision");
    }
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (compact_revision == 0 && absl::Now() < deadline) {
    client->turn();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(absl::StrCat(compact_revision), revision);
}

}  // namespace
}  // namespace berth
