#pragma once

#include <optional>

#include "berth/dataplane/forwarding.h"

namespace berth {

// Answers for address resolution on a port: ARP replies for IPv4 and neighbour advertisements for
// IPv6, for the port's own addresses and the VIPs of services with `announce: arp`. Which
// addresses are berth's is the caller's to decide (from the snapshot); these only read the
// question and write the answer, in place.

// The address a well-formed ARP request or IPv6 neighbour solicitation asks for, or nullopt for
// any other frame (ARP replies, malformed requests, solicitations with a hop limit other than 255
// or for a multicast target: RFC 4861, 7.1.1).
std::optional<IpAddress> neighborQuery(const Frame& frame, const ParsedPacket& packet);

// Rewrites the query into the answer that `target` (the address asked for) is at `mac`, sent back
// to the asker on the same VLAN. An advertisement needs up to 86 bytes after the L2 header; false,
// leaving the frame alone, when the frame and its tailroom are shorter.
bool buildNeighborReply(Frame& frame, const ParsedPacket& packet, const IpAddress& target,
                        const MacAddress& mac);

}  // namespace berth
