#include "check_command.h"

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "berth/config/drivers.h"
#include "berth/config/loader.h"
#include "berth/fleet/flow_records.h"
#include "berth/maglev/table.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

// What berthd checks beyond the file, and what this host says of the ports' kernel interfaces.
void checkBeyondTheFile(const Config& config, std::vector<std::string>& errors,
                        std::vector<std::string>& warnings, std::vector<std::string>& not_checked) {
  for (const ServiceConfig& service : config.services) {
    absl::StatusOr<Table> tables = buildServingTable(service);
    if (!tables.ok()) {
      errors.push_back(absl::StrCat("service '", service.name, "' (line ", service.line.number,
                                    "): its table: ", tables.status().message()));
    }
  }
  // berthd refuses to start without its sync keys.
  if (config.sync) {
    if (absl::Status keys = readSyncKeys(*config.sync).status(); !keys.ok()) {
      errors.emplace_back(keys.message());
    }
  }
  // Without its TLS files berthd still starts, on its cached version, and cannot reach etcd.
  if (config.fleet) {
    const FleetConfig& fleet = *config.fleet;
    for (const auto& [field, file] :
         {std::pair{"ca", fleet.ca}, std::pair{"cert", fleet.cert}, std::pair{"key", fleet.key}}) {
      if (!file.empty() && !std::ifstream(file)) {
        warnings.push_back(absl::StrCat("fleet.", field, " (line ", fleet.line.number,
                                        "): cannot read '", file,
                                        "': etcd will be out of reach; berthd serves its cached "
                                        "version"));
      }
    }
    not_checked.push_back("fleet: whether the etcd endpoints answer");
  }
  bool pci = false;
  for (const PortConfig& port : config.dataplane.ports) {
    // The vdev string that creates the port's device: an EAL --vdev's, or its own arguments.
    std::string vdev = ealVdevCreating(config.dataplane.eal, port.device);
    if (vdev.empty() && port.device.find(',') != std::string::npos) vdev = port.device;
    const std::string driver = vdevDriver(port.device);
    if (driver.empty()) {
      pci = true;
    } else if (vdev.empty()) {
      not_checked.push_back(absl::StrCat(
          "port '", port.name, "': device '", port.device,
          "' has no arguments and no --vdev in dataplane.eal creates it; berthd's command "
          "line must (--vdev ",
          port.device, ",...)"));
    }
    const std::string iface = vdevArgument(vdev, "iface");
    if ((driver == "net_af_xdp" || driver == "net_af_packet") && !iface.empty() &&
        !std::ifstream(absl::StrCat("/sys/class/net/", iface, "/ifindex"))) {
      warnings.push_back(absl::StrCat(
          "port '", port.name, "' (line ", port.line.number, "): no interface '", iface,
          "' on this host (/sys/class/net), which ", driver, " needs; right where berthd runs?"));
    }
  }
  not_checked.push_back(
      "EAL: whether this host has the hugepages, CPUs and memory the EAL options ask for; "
      "berthd's start-up says, and names the cause when the EAL fails");
  if (pci) {
    not_checked.push_back(
        "PCI ports: whether each device is present and bound to a driver DPDK can use "
        "(dpdk-devbind.py --status shows it; mlx5 stays on its kernel driver)");
  }
  if (!config.services.empty()) {
    not_checked.push_back(
        "backends: whether each is set up for its service's forwarding mode (decapsulation, "
        "the VIP on loopback, arp_ignore, arp_announce and rp_filter) and its health check "
        "answers");
  }
}

void writeLines(JsonWriter& json, const char* key, const std::vector<std::string>& lines) {
  json.key(key).beginArray();
  for (const std::string& line : lines) json.value(line);
  json.endArray();
}

}  // namespace

CheckOutcome checkFile(const std::string& path, bool json) {
  std::vector<std::string> errors, warnings, notes, not_checked;
  absl::StatusOr<Config> config = loadConfigFile(path);
  size_t backends = 0;
  if (!config.ok()) {
    errors = absl::StrSplit(config.status().message(), '\n');
  } else {
    warnings = config->warnings;
    notes = config->notes;
    checkBeyondTheFile(*config, errors, warnings, not_checked);
    for (const ServiceConfig& service : config->services) backends += service.backends.size();
  }
  CheckOutcome outcome;
  outcome.exit_code = errors.empty() ? 0 : 1;
  if (json) {
    JsonWriter writer;
    writer.beginObject().key("file").value(path).key("valid").value(errors.empty());
    if (config.ok()) {
      writer.key("services").value(uint64_t{config->services.size()});
      writer.key("backends").value(uint64_t{backends});
      writer.key("services_from_fleet").value(config->fleet.has_value());
    }
    writeLines(writer, "errors", errors);
    writeLines(writer, "warnings", warnings);
    writeLines(writer, "notes", notes);
    writeLines(writer, "not_checked", not_checked);
    writer.endObject();
    outcome.out = absl::StrCat(writer.str(), "\n");
    return outcome;
  }
  if (!errors.empty()) {
    absl::StrAppend(&outcome.err, path, ": ", errors.size(),
                    " error(s); berthd would refuse this file:\n");
    for (const std::string& error : errors) absl::StrAppend(&outcome.err, "  ", error, "\n");
  } else {
    absl::StrAppend(&outcome.out, path, ": valid: ", config->services.size(), " service(s), ",
                    backends, " backend(s)",
                    config->fleet ? "; the services to come from the fleet" : "", "\n");
  }
  for (const std::string& warning : warnings)
    absl::StrAppend(&outcome.out, "warning: ", warning, "\n");
  for (const std::string& note : notes) absl::StrAppend(&outcome.out, "note: ", note, "\n");
  for (const std::string& line : not_checked) {
    absl::StrAppend(&outcome.out, "not checked: ", line, "\n");
  }
  return outcome;
}

}  // namespace berth
