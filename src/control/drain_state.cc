#include "berth/control/drain_state.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON: ", error.what()));
  }
  if (!root.is_object()) return absl::InvalidArgumentError("not a JSON object");
  const auto version = root.find("version");
  if (version == root.end() || !version->is_number_integer()) {
    return absl::InvalidArgumentError("version: missing or not a number");
  }
  if (const int64_t number = version->get<int64_t>(); number != kDrainStateVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("version ", number, ": this berthd reads only ", kDrainStateVersion));
  }
  DrainsByService drains;
  const auto services = root.find("drains");
  if (services == root.end()) return drains;
  if (!services->is_object()) return absl::InvalidArgumentError("drains: not an object");
  for (const auto& [service, backends] : services->items()) {
    if (!backends.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat("drains.", service, ": not a list"));
    }
    for (const nlohmann::json& backend : backends) {
      if (!backend.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("drains.", service, ": a backend that is not a name"));
      }
      drains[service].insert(backend.get<std::string>());
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

DrainsByService DrainStateWriter::restore(
    const std::vector<ServiceConfig>& services,
    const std::function<void(const std::string&)>& log) const {
  const std::string& path = file_.path();
  absl::StatusOr<DrainsByService> drains = loadDrainState(path);
  if (!drains.ok()) {
    const std::string aside = path + ".unreadable";
    const bool kept = std::rename(path.c_str(), aside.c_str()) == 0;
    log(absl::StrCat("warning: drains not restored: ", drains.status().message(),
                     kept ? absl::StrCat("; kept as ", aside) : std::string()));
    return {};
  }
  std::vector<std::string> restored;
  for (const ServiceConfig& service : services) {
    const auto found = drains->find(service.name);
    if (found == drains->end()) continue;
    for (const BackendConfig& backend : service.backends) {
      if (found->second.contains(backend.name)) {
        restored.push_back(absl::StrCat(service.name, "/", backend.name));
      }
    }
  }
  if (!restored.empty()) {
    log(absl::StrCat("drains restored from ", path, ": ", absl::StrJoin(restored, ", ")));
  }
  return *std::move(drains);
}

}  // namespace berth
