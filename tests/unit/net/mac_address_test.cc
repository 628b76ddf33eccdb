#include "berth/net/mac_address.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(MacAddressTest, ParsesSixHexOctetsInEitherCase) {
  absl::StatusOr<MacAddress> mac = MacAddress::parse("02:00:5E:10:0a:FF");
  ASSERT_TRUE(mac.ok()) << mac.status();
  EXPECT_EQ(mac->bytes, (std::array<uint8_t, 6>{0x02, 0x00, 0x5e, 0x10, 0x0a, 0xff}));
  EXPECT_EQ(mac->toString(), "02:00:5e:10:0a:ff");
  EXPECT_FALSE(mac->isMulticast());
  EXPECT_TRUE(MacAddress::parse("01:00:5e:00:00:01")->isMulticast());
}

TEST(MacAddressTest, RejectsAnythingElseNamingTheText) {
  for (const char* text : {"", "02:00:5e:10:00", "02:00:5e:10:00:01:02", "02-00-5e-10-00-01",
                           "2:00:5e:10:00:01", "02:00:5e:10:00:0g", "020:0:5e:10:00:01"}) {
    absl::StatusOr<MacAddress> mac = MacAddress::parse(text);
    ASSERT_FALSE(mac.ok()) << text;
    EXPECT_NE(mac.status().message().find("is not a MAC address"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace berth
