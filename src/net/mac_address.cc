#include "berth/net/mac_address.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<MacAddress> MacAddress::parse(absl::string_view text) {
  const std::vector<absl::string_view> octets = absl::StrSplit(text, ':');
  MacAddress mac;
  bool valid = octets.size() == mac.bytes.size();
  for (size_t i = 0; valid && i < octets.size(); ++i) {
    const absl::string_view octet = octets[i];
    valid = octet.size() == 2 && hexDigit(octet[0]) >= 0 && hexDigit(octet[1]) >= 0;
    if (valid) mac.bytes[i] = static_cast<uint8_t>(hexDigit(octet[0]) << 4 | hexDigit(octet[1]));
  }
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a MAC address (six hex octets, as 02:00:5e:10:00:01)"));
  }
  return mac;
}

std::string MacAddress::toString() const {
  return absl::StrFormat("%02x:%02x:%02x:%02x:%02x:%02x", bytes[0], bytes[1], bytes[2], bytes[3],
                         bytes[4], bytes[5]);
}

}  // namespace berth
