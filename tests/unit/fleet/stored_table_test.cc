// A Maglev table as a generation stores it (fleet/stored_table.h). Pinned:
// - a stored table decodes to the same table, at the fewest bits an entry (7 for 100 backends,
//   10 for 1,000), and restores to a Table equal in entries, flags and what failover does next;
// - its header is the compact, key-sorted JSON every berth has written, so that a table an
//   instance re-encodes for its cache is byte for byte what the elected one stored;
// - a flipped byte, a cut or a wrong bit count is DataLoss naming it, and entries naming a
//   backend the list lacks or giving slots to a failed one do not restore.

#include "berth/fleet/stored_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"

namespace berth {
namespace {

std::vector<Backend> backendsNamed(size_t count) {
  std::vector<Backend> backends;
  for (size_t i = 0; i < count; ++i) backends.push_back({absl::StrFormat("web-%03d", i), 1});
  return backends;
}

Table built(size_t count) {
  absl::StatusOr<Table> table = build(backendsNamed(count), kDefaultTableSize);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

size_t bitsOf(const std::string& encoded) {
  const size_t newline = encoded.find('\n');
  const size_t at = encoded.find("\"bits\":");
  EXPECT_LT(at, newline);
  return std::stoul(encoded.substr(at + 7));
}

TEST(StoredTableTest, DecodesToTheSameTableAtTheFewestBits) {
  for (const auto& [count, bits] : {std::pair{100, 7}, std::pair{1000, 10}, std::pair{0, 1}}) {
    const Table table = built(count);
    const StoredTable stored = storedTableOf("web", table);
    const std::string encoded = encodeStoredTable(stored);
    EXPECT_EQ(bitsOf(encoded), static_cast<size_t>(bits)) << count;
    absl::StatusOr<StoredTable> decoded = decodeStoredTable(encoded);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, stored);
    absl::StatusOr<Table> restored = tableOf(*decoded);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_TRUE(std::equal(restored->entries().begin(), restored->entries().end(),
                           table.entries().begin(), table.entries().end()));
  }
}

TEST(StoredTableTest, TheHeaderIsCompactWithItsKeysSorted) {
  StoredTable stored = storedTableOf("web", built(3));
  stored.failed = {"web-1"};
  stored.drained = {"web-2"};
  const std::string encoded = encodeStoredTable(stored);
  const std::string header = encoded.substr(0, encoded.find('\n'));
  // nlohmann's compact dump orders an object's keys: what berth wrote before JsonWriter did.
  EXPECT_EQ(header, nlohmann::json::parse(header).dump());
  EXPECT_EQ(header.substr(0, 12), R"({"backends":)");
}

TEST(StoredTableTest, ARestoredGenerationFailsOverAsTheOriginal) {
  absl::StatusOr<Table> generation =
      nextGeneration(built(100), backendsNamed(100), {"web-007"}, {"web-011"});
  ASSERT_TRUE(generation.ok());
  absl::StatusOr<Table> restored = tableOf(storedTableOf("web", *generation));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->healthy(), generation->healthy());
  EXPECT_EQ(restored->drained(), generation->drained());
  std::vector<bool> healthy = generation->healthy();
  healthy[42] = false;
  absl::StatusOr<Table> a = withHealth(*generation, healthy, generation->drained());
  absl::StatusOr<Table> b = withHealth(*restored, healthy, restored->drained());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(std::equal(a->entries().begin(), a->entries().end(), b->entries().begin(),
                         b->entries().end()));
}

TEST(StoredTableTest, DamageIsDataLossNamingIt) {
  const std::string encoded = encodeStoredTable(storedTableOf("web", built(100)));
  std::string flipped = encoded;
  flipped[flipped.size() - 10] ^= 0x20;
  EXPECT_NE(decodeStoredTable(flipped).status().message().find("CRC32-C"), std::string::npos);
  const absl::Status cut = decodeStoredTable(encoded.substr(0, encoded.size() - 1)).status();
  EXPECT_EQ(cut.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cut.message().find("bytes of entries"), std::string::npos) << cut;
  std::string bits = encoded;
  bits.replace(bits.find("\"bits\":7"), 8, "\"bits\":8");
  EXPECT_NE(decodeStoredTable(bits).status().message().find("bits an entry"), std::string::npos);
  EXPECT_EQ(decodeStoredTable("no header").status().code(), absl::StatusCode::kDataLoss);
  // Entries that name a backend the list lacks, or give slots to a failed one, do not restore.
  StoredTable small;
  small.service = "web";
  small.backends = {{"a", 1}, {"b", 1}, {"c", 1}};
  small.entries = {0, 1, 2, kNoBackend, 4};
  EXPECT_NE(tableOf(small).status().message().find("names backend 4 of 3"), std::string::npos);
  small.entries[4] = 2;
  small.failed = {"c"};
  EXPECT_NE(tableOf(small).status().message().find("owns 2 slots"), std::string::npos);
}

}  // namespace
}  // namespace berth
