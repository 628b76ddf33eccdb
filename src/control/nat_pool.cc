#include "berth/control/nat_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace berth {

const std::vector<uint32_t>& NatPools::sharesFor(const Key& key) {
  auto it = shares_.find(key);
  if (it != shares_.end()) return it->second;
  const ReplySteering& steering = *key.steering;
  const auto entries = static_cast<uint32_t>(steering.reta().size());
  std::vector<uint32_t> shares(size_t{entries} * key.workers, 0);
  for (uint32_t bits = 0; bits < entries; ++bits) {
    for (uint16_t worker = 0; worker < key.workers; ++worker) {
      shares[size_t{bits} * key.workers + worker] =
          steering.shareOf(bits, worker, key.family, key.protocol);
    }
  }
  return shares_.emplace(key, std::move(shares)).first->second;
}

std::vector<NatPoolRow> NatPools::rows(const Snapshot& snapshot, const DataplaneConfig& dataplane,
                                       absl::Span<const ServiceConfig* const> services,
                                       uint16_t workers, size_t max_rows, size_t& omitted) {
  std::vector<NatPoolRow> rows;
  omitted = 0;
  const size_t count = std::min(services.size(), snapshot.serviceCount());
  for (size_t s = 0; s < count; ++s) {
    const ServiceConfig& service_config = *services[s];
    const SnapshotService& service = snapshot.service(static_cast<uint32_t>(s));
    if (service.forwarding != Forwarding::kFullNat || service.name != service_config.name) {
      continue;
    }
    // The ports its traffic may leave through: its own egress, or each receiving port's.
    std::vector<uint32_t> egress;
    for (uint32_t p = 0; p < snapshot.portCount(); ++p) {
      const uint32_t out = snapshot.egressOf(p, service);
      if (std::find(egress.begin(), egress.end(), out) == egress.end()) egress.push_back(out);
    }
    const auto protocol = static_cast<uint8_t>(service_config.protocol);
    const uint32_t backend_count = static_cast<uint32_t>(service.table.backends().size());
    for (uint32_t b = 0; b < backend_count; ++b) {
      const SnapshotBackend& backend = snapshot.backend(service.first_backend + b);
      for (const uint32_t out : egress) {
        const SnapshotPort& port = snapshot.port(out);
        if (port.reply_steering == nullptr || port.natAddresses(backend.address.family).empty()) {
          continue;
        }
        const ReplySteering& steering = *port.reply_steering;
        const std::vector<uint32_t>& shares =
            sharesFor({port.reply_steering, backend.address.family, protocol, workers});
        const uint32_t mask = static_cast<uint32_t>(steering.reta().size() - 1);
        for (const NatLocalAddress& local : port.natAddresses(backend.address.family)) {
          if (rows.size() >= max_rows) {
            ++omitted;
            continue;
          }
          const uint32_t bits =
              steering.baseOf(backend.address, service_config.port, local.address, protocol) & mask;
          NatPoolRow row;
          row.port = out < dataplane.ports.size() ? dataplane.ports[out].name : absl::StrCat(out);
          row.address = local.address.toString();
          row.service = service.name;
          row.backend = backend.name;
          row.ports = steering.rangeSize();
          row.worker_ports.assign(shares.begin() + size_t{bits} * workers,
                                  shares.begin() + size_t{bits + 1} * workers);
          rows.push_back(std::move(row));
        }
      }
    }
  }
  return rows;
}

}  // namespace berth
