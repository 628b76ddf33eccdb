#include "berth/net/flow_hash.h"

#include <gtest/gtest.h>
#include <rte_hash_crc.h>

#include <random>
#include <vector>

namespace berth {
namespace {

IpAddress parseOrDie(absl::string_view text) {
  absl::StatusOr<IpAddress> address = IpAddress::parse(text);
  EXPECT_TRUE(address.ok()) << address.status();
  return *address;
}

// The documented byte string that flowHash() feeds to CRC32-C, written out independently.
std::vector<uint8_t> documentedBytes(const FlowKey& key, HashFields fields) {
  const size_t address_length = key.family == IpFamily::kIpv4 ? 4 : 16;
  const bool ports = fields == HashFields::kFiveTuple;
  const bool destination = fields != HashFields::kSourceOnly;
  std::vector<uint8_t> bytes(key.source.begin(), key.source.begin() + address_length);
  for (size_t i = 0; i < address_length; ++i) bytes.push_back(destination ? key.destination[i] : 0);
  const auto* port_bytes = reinterpret_cast<const uint8_t*>(&key.source_port);
  for (size_t i = 0; i < 4; ++i) bytes.push_back(ports ? port_bytes[i] : 0);
  bytes.push_back(destination ? key.protocol : 0);
  return bytes;
}

const FlowKey kV4 = FlowKey::make(IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, 1),
                                  40000, 80, kProtocolTcp);
const FlowKey kV6 = FlowKey::make(parseOrDie("2001:db8::1"), parseOrDie("2001:db8:100::1"), 40000,
                                  443, kProtocolUdp);

TEST(FlowHashTest, EqualsPortableCrcOverTheDocumentedBytes) {
  for (const FlowKey& key : {kV4, kV6}) {
    for (HashFields fields :
         {HashFields::kFiveTuple, HashFields::kThreeTuple, HashFields::kSourceOnly}) {
      const std::vector<uint8_t> bytes = documentedBytes(key, fields);
      EXPECT_EQ(bytes.size(), key.family == IpFamily::kIpv4 ? 13u : 37u);
      EXPECT_EQ(flowHash(key, fields, kDefaultFlowHashSeed),
                crc32cPortable(kDefaultFlowHashSeed, bytes.data(), bytes.size()));
    }
  }
}

// DPDK's rte_hash_crc is what a datapath would reach for; berth's hash must equal it so either
// can be used and an independent implementation confirms the values.
TEST(FlowHashTest, EqualsDpdkRteHashCrcOverTheDocumentedBytes) {
  std::mt19937 random(3);
  for (int i = 0; i < 1000; ++i) {
    FlowKey key = i % 2 ? kV4 : kV6;
    for (auto& byte : key.source) byte = static_cast<uint8_t>(random());
    if (key.family == IpFamily::kIpv4) std::fill(key.source.begin() + 4, key.source.end(), 0);
    key.source_port = static_cast<uint16_t>(random());
    const std::vector<uint8_t> bytes = documentedBytes(key, HashFields::kFiveTuple);
    const uint32_t seed = random();
    ASSERT_EQ(flowHash(key, HashFields::kFiveTuple, seed),
              rte_hash_crc(bytes.data(), static_cast<uint32_t>(bytes.size()), seed));
  }
}

// Pinned values: every berth instance behind one router must send a flow to the same backend,
// across versions too. A change here is a breaking change.
TEST(FlowHashTest, PinnedValues) {
  EXPECT_EQ(flowHash(kV4, HashFields::kFiveTuple, kDefaultFlowHashSeed), 0x59ba58c5u);
  EXPECT_EQ(flowHash(kV4, HashFields::kThreeTuple, kDefaultFlowHashSeed), 0xf66c3109u);
  EXPECT_EQ(flowHash(kV4, HashFields::kSourceOnly, kDefaultFlowHashSeed), 0x8f0b2b20u);
  EXPECT_EQ(flowHash(kV6, HashFields::kFiveTuple, kDefaultFlowHashSeed), 0x005a0619u);
  EXPECT_EQ(flowHash(kV4, HashFields::kFiveTuple, 0), 0xd0257679u);
}

TEST(FlowHashTest, ThreeTupleIgnoresPortsOnly) {
  FlowKey other_ports = kV4;
  other_ports.source_port = 1;
  other_ports.destination_port = 2;
  EXPECT_EQ(flowHash(kV4, HashFields::kThreeTuple, 1),
            flowHash(other_ports, HashFields::kThreeTuple, 1));
  EXPECT_NE(flowHash(kV4, HashFields::kFiveTuple, 1),
            flowHash(other_ports, HashFields::kFiveTuple, 1));
  FlowKey other_protocol = kV4;
  other_protocol.protocol = kProtocolUdp;
  EXPECT_NE(flowHash(kV4, HashFields::kThreeTuple, 1),
            flowHash(other_protocol, HashFields::kThreeTuple, 1));
}

TEST(FlowHashTest, SourceOnlyIgnoresEverythingButTheSource) {
  FlowKey other = kV6;
  other.destination[15] ^= 1;
  other.destination_port = 7;
  other.protocol = kProtocolTcp;
  EXPECT_EQ(flowHash(kV6, HashFields::kSourceOnly, 1), flowHash(other, HashFields::kSourceOnly, 1));
  other.source[0] ^= 1;
  EXPECT_NE(flowHash(kV6, HashFields::kSourceOnly, 1), flowHash(other, HashFields::kSourceOnly, 1));
}

TEST(FlowHashTest, SeedChangesTheHash) {
  EXPECT_NE(flowHash(kV4, HashFields::kFiveTuple, 1), flowHash(kV4, HashFields::kFiveTuple, 2));
}

TEST(FlowHashTest, HashFieldsRoundTripThroughTheirConfigSpelling) {
  for (HashFields fields :
       {HashFields::kFiveTuple, HashFields::kThreeTuple, HashFields::kSourceOnly}) {
    EXPECT_EQ(*parseHashFields(toString(fields)), fields);
  }
  EXPECT_FALSE(parseHashFields("4-tuple").ok());
}

}  // namespace
}  // namespace berth
