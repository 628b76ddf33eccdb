#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/config/config.h"

namespace berth {

// Loads and validates a YAML config. All or nothing: either every field is valid and a Config
// comes back, or nothing does and the error names the source, line, column and field path, as in
//   demo.yaml:12:17: services[0].backends[1].weight: must be an integer from 0 to 1000000, got 'x'
// Checked: unknown keys, wrong types, missing required fields, bad addresses and ports, a table
// size that is not prime or too small, and duplicate services, VIPs and backends. Each service's
// backends are also checked exactly as the Maglev build will check them.
absl::StatusOr<Config> parseConfig(absl::string_view yaml_text, absl::string_view source_name);

// A local file with a fleet section has no services: they come from the fleet's versions.

// A fleet version, as `berthctl fleet push` sends it: a YAML map with `services` alone; any other
// section is per instance and refused with its line. Checked for everything that needs no local
// ports: a `via` or `egress` port name, reachability and BGP announcements wait for
// composeFleetConfig on each instance.
absl::StatusOr<Config> parseFleetVersion(absl::string_view yaml_text,
                                         absl::string_view source_name);

// What an instance runs: its local config (with a fleet section; its services are replaced) and
// a fleet version's services, checked against the local ports and bgp section as parseConfig
// checks a whole file. Errors name `source_name` and the line in the version's text.
absl::StatusOr<Config> composeFleetConfig(const Config& local, absl::string_view fleet_text,
                                          absl::string_view source_name);

// As parseConfig, reading the file at `path` (NotFound if it cannot be read).
absl::StatusOr<Config> loadConfigFile(const std::string& path);

}  // namespace berth
