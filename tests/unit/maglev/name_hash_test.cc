#include "berth/maglev/name_hash.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "berth/maglev/table.h"

namespace berth {
namespace {

// The reference implementation's published output: MurmurHash3_x64_128 of this sentence with
// seed 0 is 6c1b07bc7bbc4be347939ac4a93c437a as bytes, i.e. these two little-endian words.
TEST(NameHashTest, MatchesMurmur3ReferenceVector) {
  const Hash128 hash = murmur3x64_128("The quick brown fox jumps over the lazy dog", 0);
  EXPECT_EQ(hash.low, 0xe34bbc7bbc071b6cULL);
  EXPECT_EQ(hash.high, 0x7a433ca9c49a9347ULL);
}

TEST(NameHashTest, EmptyInputWithSeedZeroIsZero) {
  const Hash128 hash = murmur3x64_128("", 0);
  EXPECT_EQ(hash.low, 0u);
  EXPECT_EQ(hash.high, 0u);
}

// Every tail length (0..15 bytes past a block) takes a different path through the tail mixing.
TEST(NameHashTest, EveryTailLengthGivesADistinctHash) {
  const std::string text = "0123456789abcdefghijklmnopqrstuv";
  std::set<uint64_t> seen;
  for (size_t length = 0; length <= text.size(); ++length) {
    seen.insert(nameHash64(absl::string_view(text).substr(0, length), kOffsetHashSeed));
  }
  EXPECT_EQ(seen.size(), text.size() + 1);
}

// Pinned values: the permutation of a backend is part of berth's contract between instances and
// versions. If this test fails, every deployed table would reshuffle on upgrade.
TEST(NameHashTest, PinnedBackendNameHashes) {
  EXPECT_EQ(nameHash64("web-1", kOffsetHashSeed), 0x36e84509f5dab62eULL);
  EXPECT_EQ(nameHash64("web-1", kSkipHashSeed), 0xc80671d5eb753d8bULL);
  EXPECT_EQ(nameHash64("backend-0042", kOffsetHashSeed), 0x95b3e485ad55cad8ULL);
}

TEST(NameHashTest, PinnedPermutations) {
  const Permutation web1 = permutationFor("web-1", 65537);
  EXPECT_EQ(web1.offset, 52854u);
  EXPECT_EQ(web1.skip, 15756u);
  const Permutation big = permutationFor("backend-0042", 655373);
  EXPECT_EQ(big.offset, 347742u);
  EXPECT_EQ(big.skip, 245714u);
}

TEST(NameHashTest, SeedsGiveIndependentHashes) {
  EXPECT_NE(nameHash64("web-1", kOffsetHashSeed), nameHash64("web-1", kSkipHashSeed));
}

}  // namespace
}  // namespace berth
