// libFuzzer target for the packet parser: any bytes, any length. Besides the sanitizers'
// checks, the offsets the parser reports for a frame it accepts must lie inside the frame.

#include <cstddef>
#include <cstdint>

#include "berth/net/packet_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::ParsedPacket packet;
  const berth::ParseError error = berth::parsePacket(data, size, packet);
  if (static_cast<size_t>(error) >= berth::kParseErrorCount) __builtin_trap();
  if (error == berth::ParseError::kNone && packet.type == berth::FrameType::kIp) {
    if (size_t{packet.l3_offset} + packet.ip_length > size) __builtin_trap();
    if (packet.l4_offset > size) __builtin_trap();
    if (packet.l4_offset != 0 && packet.l4_offset < packet.l3_offset) __builtin_trap();
  }
  return 0;
}
