#include "berth/maglev/table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/maglev/name_hash.h"
#include "support/maglev_backends.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> ownerNames(const Table& table) {
  std::vector<std::string> names;
  for (uint16_t entry : table.entries()) {
    names.push_back(entry == kNoBackend ? "-" : table.backends()[entry].name);
  }
  return names;
}

// The worked example of the Maglev paper (Eisenbud et al., NSDI 2016, table 1), with each
// backend's offset and skip injected as the paper gives them.
Table paperExample() {
  absl::StatusOr<Table> table =
      buildWithPermutations({{"B0", 1}, {"B1", 1}, {"B2", 1}}, {{3, 4}, {0, 2}, {3, 1}}, 7);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

TEST(MaglevTableTest, PaperExampleMatchesThePaper) {
  EXPECT_THAT(ownerNames(paperExample()), ElementsAre("B1", "B0", "B1", "B0", "B2", "B2", "B0"));
}

TEST(MaglevTableTest, PaperExampleRebuiltWithoutB1MatchesThePaper) {
  absl::StatusOr<Table> table = buildWithPermutations({{"B0", 1}, {"B2", 1}}, {{3, 4}, {3, 1}}, 7);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(ownerNames(*table), ElementsAre("B0", "B0", "B0", "B0", "B2", "B2", "B2"));
}

TEST(MaglevTableTest, InputOrderDoesNotMatterForThePaperExample) {
  absl::StatusOr<Table> table =
      buildWithPermutations({{"B2", 1}, {"B0", 1}, {"B1", 1}}, {{3, 1}, {3, 4}, {0, 2}}, 7);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(ownerNames(*table), ElementsAre("B1", "B0", "B1", "B0", "B2", "B2", "B0"));
}

// Equal weights: every backend owns floor(M/N) or ceil(M/N) slots, as the paper promises.
class MaglevBalanceTest : public ::testing::TestWithParam<std::tuple<size_t, uint32_t>> {};

TEST_P(MaglevBalanceTest, EqualWeightsOwnFloorOrCeilOfMOverN) {
  const auto [backend_count, table_size] = GetParam();
  absl::StatusOr<Table> table = build(equalBackends(backend_count), table_size);
  ASSERT_TRUE(table.ok()) << table.status();
  const uint32_t floor_share = table_size / backend_count;
  const uint32_t ceil_share = floor_share + (table_size % backend_count != 0);
  for (uint32_t count : table->slotCounts()) {
    EXPECT_GE(count, floor_share);
    EXPECT_LE(count, ceil_share);
  }
  EXPECT_EQ(std::count(table->entries().begin(), table->entries().end(), kNoBackend), 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, MaglevBalanceTest,
                         ::testing::Combine(::testing::Values(1, 3, 4, 100, 1000),
                                            ::testing::Values(65537u, 655373u)));

// Weights 1..10 over 100 backends: each share is within 2 slots or 0.2% of M * w / sum(w).
TEST(MaglevTableTest, WeightedSharesFollowWeights) {
  std::vector<Backend> backends = equalBackends(100);
  int64_t total_weight = 0;
  for (size_t i = 0; i < backends.size(); ++i) {
    backends[i].weight = static_cast<int64_t>(i % 10) + 1;
    total_weight += backends[i].weight;
  }
  absl::StatusOr<Table> table = build(backends, 65537);
  ASSERT_TRUE(table.ok()) << table.status();
  const std::vector<uint32_t> counts = table->slotCounts();
  for (size_t i = 0; i < counts.size(); ++i) {
    const Backend& backend = table->backends()[i];
    const double expected = 65537.0 * static_cast<double>(backend.weight) / total_weight;
    EXPECT_NEAR(counts[i], expected, std::max(2.0, 0.002 * expected)) << backend.name;
  }
}

TEST(MaglevTableTest, WeightZeroDrainsButStaysKnown) {
  std::vector<Backend> backends = equalBackends(4);
  backends[2].weight = 0;
  absl::StatusOr<Table> table = build(backends, 65537);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->backends().size(), 4u);
  EXPECT_THAT(table->indexOf("backend-00002"), ::testing::Eq(absl::StatusOr<uint16_t>(2)));
  const std::vector<uint32_t> counts = table->slotCounts();
  EXPECT_EQ(counts[2], 0u);
  for (size_t i : {0, 1, 3}) EXPECT_NEAR(counts[i], 65537 / 3.0, 1.0);
}

TEST(MaglevTableTest, NoBackendsMapsEverySlotToNoBackend) {
  absl::StatusOr<Table> table = build({}, 65537);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->entries().size(), 65537u);
  EXPECT_EQ(std::count(table->entries().begin(), table->entries().end(), kNoBackend), 65537);
  EXPECT_EQ(table->lookup(12345), kNoBackend);
}

TEST(MaglevTableTest, OnlyDrainedBackendsMapsEverySlotToNoBackend) {
  absl::StatusOr<Table> table = build({{"a", 0}, {"b", 0}}, 65537);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(std::count(table->entries().begin(), table->entries().end(), kNoBackend), 65537);
}

TEST(MaglevTableTest, ShuffledInputBuildsTheIdenticalTable) {
  std::vector<Backend> backends = equalBackends(100);
  for (size_t i = 0; i < backends.size(); ++i) backends[i].weight = static_cast<int64_t>(i % 3) + 1;
  absl::StatusOr<Table> reference = build(backends, 65537);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::mt19937 random(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(backends.begin(), backends.end(), random);
    absl::StatusOr<Table> shuffled = build(backends, 65537);
    ASSERT_TRUE(shuffled.ok()) << shuffled.status();
    EXPECT_TRUE(std::equal(reference->entries().begin(), reference->entries().end(),
                           shuffled->entries().begin(), shuffled->entries().end()));
  }
}

// A checksum of a reference table, pinned: any change to the name hashes, seeds, quota rule or
// turn order would make upgraded instances disagree with running ones, and must show up here.
TEST(MaglevTableTest, ReferenceTableChecksumIsPinned) {
  absl::StatusOr<Table> table = build(equalBackends(100), 65537);
  ASSERT_TRUE(table.ok()) << table.status();
  const absl::Span<const uint16_t> entries = table->entries();
  const uint64_t checksum = nameHash64(
      absl::string_view(reinterpret_cast<const char*>(entries.data()), entries.size() * 2), 0);
  EXPECT_EQ(checksum, 0x52a59c8204f4e017ULL);
}

TEST(MaglevTableTest, LookupEqualsEntryAtHashModuloSize) {
  for (uint32_t table_size : {7u, 65537u, 655373u, kMaxTableSize}) {
    absl::StatusOr<Table> table = build(equalBackends(5), table_size);
    ASSERT_TRUE(table.ok()) << table.status();
    std::mt19937 random(table_size);
    std::vector<uint32_t> hashes = {0, 1, table_size - 1, table_size, UINT32_MAX, UINT32_MAX - 1};
    for (int i = 0; i < 100000; ++i) hashes.push_back(random());
    for (uint32_t hash : hashes) {
      ASSERT_EQ(table->lookup(hash), table->entries()[hash % table_size]) << hash;
    }
  }
}

TEST(MaglevTableTest, IndexOfFindsSortedPositionOrNotFound) {
  absl::StatusOr<Table> table = build({{"zeta", 1}, {"alpha", 1}, {"mid", 1}}, 101);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->backends()[0].name, "alpha");
  EXPECT_EQ(*table->indexOf("mid"), 1);
  EXPECT_EQ(*table->indexOf("zeta"), 2);
  EXPECT_EQ(table->indexOf("nope").status().code(), absl::StatusCode::kNotFound);
}

// Each bad input is rejected with a message naming the problem.
struct BadInput {
  const char* description;
  std::vector<Backend> backends;
  uint32_t table_size;
  const char* message;
};

class MaglevBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(MaglevBadInputTest, IsRejectedWithAClearMessage) {
  const BadInput& input = GetParam();
  absl::StatusOr<Table> table = build(input.backends, input.table_size);
  ASSERT_FALSE(table.ok()) << input.description;
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(table.status().message(), HasSubstr(input.message)) << input.description;
  EXPECT_EQ(validateBackends(input.backends, input.table_size).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MaglevBadInputTest,
    ::testing::Values(
        BadInput{"size not prime", {{"a", 1}}, 65536, "65536 is not prime"},
        BadInput{"size zero", {{"a", 1}}, 0, "0 is not prime"},
        BadInput{"size one", {}, 1, "1 is not prime"},
        BadInput{"size above maximum", {{"a", 1}}, 16777259, "above the maximum"},
        BadInput{"size equal to N",
                 {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}},
                 5,
                 "must be larger than the number of backends (5)"},
        BadInput{"size below N",
                 {{"a", 1}, {"b", 1}, {"c", 1}},
                 2,
                 "must be larger than the number of backends (3)"},
        BadInput{"empty name", {{"a", 1}, {"", 1}}, 7, "empty name"},
        BadInput{"duplicate name", {{"a", 1}, {"b", 1}, {"a", 2}}, 7, "duplicate backend name 'a'"},
        BadInput{"negative weight", {{"a", 1}, {"b", -1}}, 7, "backend 'b' has weight -1"},
        BadInput{"weight above maximum", {{"a", 1000001}}, 7, "weights run from 0 to 1000000"},
        BadInput{"weight too small to earn a slot",
                 {{"a", 1000000}, {"b", 1}},
                 65537,
                 "backend 'b' has weight 1 of a total 1000001, which earns less than one of "
                 "65537 slots"}));

TEST(MaglevTableTest, MoreThan65535BackendsIsRejected) {
  absl::StatusOr<Table> table = build(equalBackends(kMaxBackends + 1), kMaxTableSize);
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("65536 backends is more than the 65535"));
}

TEST(MaglevTableTest, Exactly65535BackendsIsAccepted) {
  absl::StatusOr<Table> table = build(equalBackends(kMaxBackends), 655373);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->backends().size(), kMaxBackends);
  EXPECT_EQ(std::count(table->entries().begin(), table->entries().end(), kNoBackend), 0);
}

TEST(MaglevTableTest, PermutationsOutsideTheTableAreRejected) {
  EXPECT_FALSE(buildWithPermutations({{"a", 1}}, {{7, 1}}, 7).ok());
  EXPECT_FALSE(buildWithPermutations({{"a", 1}}, {{0, 0}}, 7).ok());
  EXPECT_FALSE(buildWithPermutations({{"a", 1}}, {{0, 7}}, 7).ok());
  EXPECT_FALSE(buildWithPermutations({{"a", 1}}, {}, 7).ok());
}

TEST(MaglevTableTest, IsPrimeAgreesWithKnownValues) {
  for (uint64_t prime : {2u, 3u, 7u, 65537u, 655373u, 16777213u})
    EXPECT_TRUE(isPrime(prime)) << prime;
  for (uint64_t composite : {0u, 1u, 4u, 65535u, 65536u, 655371u, 16777215u}) {
    EXPECT_FALSE(isPrime(composite)) << composite;
  }
}

}  // namespace
}  // namespace berth
