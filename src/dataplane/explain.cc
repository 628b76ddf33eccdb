#include "berth/dataplane/explain.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/dataplane/proxy_stream.h"
#include "berth/maglev/consistent_hash.h"

namespace berth {

absl::string_view toString(ConnectionState state) {
  switch (state) {
    case ConnectionState::kEmpty:
      return "empty";
    case ConnectionState::kTcpOpening:
      return "tcp_opening";
    case ConnectionState::kTcpEstablished:
      return "tcp_established";
    case ConnectionState::kTcpClosing:
      return "tcp_closing";
    case ConnectionState::kUdp:
      return "udp";
    case ConnectionState::kTcpUnconfirmed:
      return "tcp_unconfirmed";
    case ConnectionState::kUdpUnconfirmed:
      return "udp_unconfirmed";
  }
  return "unknown";
}

uint32_t flowHashOf(const Snapshot& snapshot, uint32_t service, const FlowKey& flow) {
  const SnapshotService& s = snapshot.service(service);
  return flowHash(flow, s.hash_fields, s.hash_seed);
}

ConnectionKey connectionKeyOf(const Snapshot& snapshot, uint32_t service, const FlowKey& flow) {
  const SnapshotService& s = snapshot.service(service);
  return ConnectionKey::of(flow, s.hash_fields, static_cast<uint16_t>(s.counter_id));
}

NatQuestion natQuestionOf(const Snapshot& snapshot, uint32_t service, const FlowKey& flow) {
  NatQuestion question;
  question.client.client = flow.source;
  question.client.client_port = flow.source_port;
  question.client.service = static_cast<uint16_t>(snapshot.service(service).counter_id);
  return question;
}

NatQuestion natReplyQuestionOf(const FlowKey& flow, uint16_t local_address) {
  NatQuestion question;
  question.by_reply = true;
  question.reply.backend = flow.source;
  question.reply.backend_port = flow.source_port;
  question.reply.local_port = flow.destination_port;
  question.reply.local_address = local_address;
  question.reply.protocol = flow.protocol;
  return question;
}

std::optional<uint16_t> natLocalAddressOf(const Snapshot& snapshot, const FlowKey& flow) {
  for (size_t p = 0; p < snapshot.portCount(); ++p) {
    const int32_t id =
        snapshot.port(static_cast<uint32_t>(p)).natAddressId(flow.family, flow.destination);
    if (id >= 0) return static_cast<uint16_t>(id);
  }
  return std::nullopt;
}

std::string describeSession(const Snapshot& snapshot, const NatSession& session) {
  auto endpoint = [](IpFamily family, const std::array<uint8_t, 16>& bytes, uint16_t port) {
    const IpAddress address{family, bytes};
    const uint16_t host_port = static_cast<uint16_t>(port >> 8 | port << 8);
    return family == IpFamily::kIpv6 ? absl::StrCat("[", address.toString(), "]:", host_port)
                                     : absl::StrCat(address.toString(), ":", host_port);
  };
  const uint32_t service = snapshot.serviceIndexOf(session.service);
  const uint32_t backend = snapshot.backendIndexOf(session.backend_id);
  std::string vip = "a removed service";
  if (service != Snapshot::kNoServiceIndex) {
    const SnapshotService& s = snapshot.service(service);
    vip = endpoint(s.vip.family, s.vip.bytes, s.port);
  }
  return absl::StrCat(
      endpoint(session.client_family, session.client, session.client_port), " -> ", vip, " | ",
      endpoint(session.backend_family, snapshot.natLocalAddress(session.local_address).bytes,
               session.local_port),
      " -> ", endpoint(session.backend_family, session.backend, session.backend_port), " (",
      backend == kNoBackendIndex ? "a removed backend" : snapshot.backend(backend).name, "), ",
      toString(session.state), session.client_family != session.backend_family ? ", NAT64" : "",
      session.proxy_header == ProxyHeaderState::kNone
          ? ""
          : absl::StrCat(", PROXY header ", toString(session.proxy_header),
                         " (the client's bytes +", proxyHeaderLength(session.client_family),
                         " toward the backend)"));
}

FlowExplanation explainFlow(const Snapshot& snapshot, const FlowKey& flow,
                            const std::optional<TrackedConnection>& tracked, bool conntrack_enabled,
                            const BackendLoads* loads) {
  FlowExplanation out;
  out.service = snapshot.findService(flow);
  if (!out.service) {
    out.reason = "no service listens there: its packets are dropped as no_service";
    return out;
  }
  const SnapshotService& service = snapshot.service(*out.service);
  out.hash = flowHashOf(snapshot, *out.service, flow);
  out.slot = out.hash % service.table.size();
  const uint16_t entry = service.table.entries()[out.slot];
  out.table_backend = entry == kNoBackend ? kNoBackendIndex : service.first_backend + entry;
  auto tableDecides = [&](absl::string_view why) {
    out.next_backend = out.table_backend;
    out.reason = out.table_backend == kNoBackendIndex
                     ? absl::StrCat(why, "; the table has no backend at slot ", out.slot,
                                    " (none serving): dropped as no_backend")
                     : absl::StrCat(why, "; the table's backend at slot ", out.slot);
    // A flow that starts anew under bounded load goes past a backend at its bound, by the
    // pipeline's rule (pipeline.cc, boundedLoadPick), with the loads last published.
    if (!conntrack_enabled || service.bounded_load <= 0 || loads == nullptr ||
        out.table_backend == kNoBackendIndex) {
      return;
    }
    const double total_and_this_one =
        static_cast<double>(
            loads->serving_total[service.counter_id].load(std::memory_order_relaxed)) +
        1;
    auto activeOf = [&](const SnapshotBackend& backend) {
      return loads->active[backend.counter_id].load(std::memory_order_relaxed);
    };
    const uint16_t pick = boundedLoadChoice(
        service.table.entries().data(), service.table.size(), out.slot, [&](uint16_t candidate) {
          const SnapshotBackend& backend = snapshot.backend(service.first_backend + candidate);
          return static_cast<double>(activeOf(backend)) < backend.load_share * total_and_this_one;
        });
    if (pick == entry) {
      absl::StrAppendFormat(&out.reason, ", under its bounded-load limit (%u active flows)",
                            activeOf(snapshot.backend(out.table_backend)));
      return;
    }
    const SnapshotBackend& full = snapshot.backend(out.table_backend);
    out.fell_back = true;
    out.next_backend = service.first_backend + pick;
    absl::StrAppendFormat(&out.reason,
                          ", %s, holds %u active flows, at its bound of %.1f (bounded_load %.2f, "
                          "by the loads last published): the flow goes on to %s, the first "
                          "backend under its bound after slot %u",
                          full.name, activeOf(full), full.load_share * total_and_this_one,
                          service.bounded_load, snapshot.backend(out.next_backend).name, out.slot);
  };

  if (service.forwarding == Forwarding::kFullNat) {
    // Full-NAT (docs/fullnat.md): the worker's session decides; without one only a SYN or a
    // datagram opens one, on the table's pick.
    const char* opens = flow.protocol == kProtocolUdp
                            ? "its next datagram opens a session"
                            : "a SYN opens a session (any other TCP packet is dropped as "
                              "nat_client_no_session)";
    if (!tracked || !tracked->session || tracked->expired) {
      tableDecides(absl::StrCat(tracked && tracked->session
                                    ? "its Full-NAT session expired: "
                                    : "no worker holds a Full-NAT session for it: ",
                                opens));
      return out;
    }
    const NatSession& session = *tracked->session;
    const std::string held =
        absl::StrFormat("worker %u's session (%s, idle %u ms)", tracked->worker,
                        toString(session.state), tracked->idle_ms);
    const uint32_t backend = snapshot.backendIndexOf(session.backend_id);
    if (backend == kNoBackendIndex || !keepsConnection(service, snapshot.backend(backend))) {
      tableDecides(absl::StrCat(held,
                                " is to a backend that left or failed: its next packet "
                                "ends it (nat_backend_gone), and then ",
                                opens));
      return out;
    }
    out.tracked = true;
    out.next_backend = backend;
    out.reason = absl::StrCat(held, ": the connection stays on ", snapshot.backend(backend).name,
                              backend == out.table_backend ? ", which is also the table's pick"
                                                           : ", not the table's pick");
    return out;
  }
  if (!conntrack_enabled) {
    tableDecides("connection tracking is off");
    return out;
  }
  if (!tracked) {
    tableDecides("no worker tracks this flow: it is new, and its first packet is recorded");
    return out;
  }
  const Connection& connection = tracked->connection;
  if (tracked->expired) {
    tableDecides(absl::StrFormat("worker %u's entry expired (%s, idle %u ms): a new flow",
                                 tracked->worker, toString(connection.state), tracked->idle_ms));
    return out;
  }
  const uint32_t backend = snapshot.backendIndexOf(connection.backend);
  const std::string held = absl::StrFormat("worker %u tracks it (%s, idle %u ms)", tracked->worker,
                                           toString(connection.state), tracked->idle_ms);
  if (backend == kNoBackendIndex) {
    tableDecides(absl::StrCat(held, ", but its backend was removed: re-picked"));
    return out;
  }
  const SnapshotBackend& current = snapshot.backend(backend);
  if (!keepsConnection(service, current)) {
    tableDecides(absl::StrCat(
        held, ", but its backend ", current.name,
        current.healthy ? " is drained and the service re-picks" : " is unhealthy", ": re-picked"));
    return out;
  }
  out.tracked = true;
  out.next_backend = backend;
  out.reason = absl::StrCat(
      held, ": the connection stays on ", current.name,
      current.drained ? " (drained; established connections finish)" : "",
      backend == out.table_backend ? ", which is also the table's pick" : ", not the table's pick");
  if (connection.state == ConnectionState::kTcpClosing) {
    absl::StrAppend(&out.reason, "; a new SYN from this port would open a new connection");
  }
  return out;
}

}  // namespace berth
