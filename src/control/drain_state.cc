#include "berth/control/drain_state.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/util/json_writer.h"
#include "berth/util/whole_file.h"

namespace berth {

std::string renderDrainState(const DrainsByService& drains) {
  std::vector<std::string> services;
  for (const auto& [service, backends] : drains) {
    if (!backends.empty()) services.push_back(service);
  }
  std::sort(services.begin(), services.end());
  JsonWriter json;
  json.beginObject().key("version").value(kDrainStateVersion).key("drains").beginObject();
  for (const std::string& service : services) {
    const auto& set = drains.at(service);
    std::vector<std::string> backends(set.begin(), set.end());
    std::sort(backends.begin(), backends.end());
    json.key(service).beginArray();
    for (const std::string& backend : backends) json.value(backend);
    json.endArray();
  }
  json.endObject().endObject();
  return json.str() + "\n";
}

absl::StatusOr<DrainsByService> parseDrainState(absl::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON: ", error.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("not a JSON object");
  const YAML::Node version = root["version"];
  int number = 0;
  if (!version || !version.IsScalar() || !YAML::convert<int>::decode(version, number)) {
    return absl::InvalidArgumentError("version: missing or not a number");
  }
  if (number != kDrainStateVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("version ", number, ": this berthd reads only ", kDrainStateVersion));
  }
  DrainsByService drains;
  const YAML::Node services = root["drains"];
  if (!services) return drains;
  if (!services.IsMap()) return absl::InvalidArgumentError("drains: not an object");
  for (const auto& entry : services) {
    const std::string service = entry.first.as<std::string>();
    if (!entry.second.IsSequence()) {
      return absl::InvalidArgumentError(absl::StrCat("drains.", service, ": not a list"));
    }
    for (const YAML::Node& backend : entry.second) {
      if (!backend.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat("drains.", service, ": a backend that is not a name"));
      }
      drains[service].insert(backend.as<std::string>());
    }
  }
  return drains;
}

absl::StatusOr<DrainsByService> loadDrainState(const std::string& path) {
  const absl::StatusOr<std::string> text = readFileWhole(path);
  if (absl::IsNotFound(text.status())) return DrainsByService();
  if (!text.ok()) return text.status();
  absl::StatusOr<DrainsByService> drains = parseDrainState(*text);
  if (!drains.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", drains.status().message()));
  }
  return drains;
}

}  // namespace berth
