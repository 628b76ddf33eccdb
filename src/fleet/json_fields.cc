#include "fleet/json_fields.h"

namespace berth::fleet_json {

absl::Status readNames(const Json& json, const char* field, absl::string_view what,
                       std::vector<std::string>& out) {
  const auto it = json.find(field);
  if (it == json.end() || !it->is_array()) {
    return absl::DataLossError(absl::StrCat(what, " has no list ", field));
  }
  for (const Json& name : *it) {
    if (!name.is_string()) return absl::DataLossError(absl::StrCat(what, ": ", field));
    out.push_back(name.get<std::string>());
  }
  return absl::OkStatus();
}

void writePieces(JsonWriter& json, const std::vector<VersionPiece>& pieces, bool with_service) {
  json.key("pieces").beginArray();
  for (const VersionPiece& piece : pieces) {
    json.beginObject().key("key").value(piece.key);
    if (with_service) json.key("service").value(piece.service);
    json.key("bytes").value(piece.bytes).key("crc32c").value(piece.crc32c).endObject();
  }
  json.endArray();
}

absl::Status readPieces(const Json& json, absl::string_view what, const std::string* service,
                        std::vector<VersionPiece>& out) {
  const auto pieces = json.find("pieces");
  if (pieces == json.end() || !pieces->is_array()) {
    return absl::DataLossError(absl::StrCat(what, " has no list pieces"));
  }
  for (const Json& entry : *pieces) {
    if (!entry.is_object()) return absl::DataLossError(absl::StrCat(what, ": a piece"));
    VersionPiece piece;
    BERTH_FIELD(piece.key, std::string, entry, "key", what);
    if (service != nullptr) {
      piece.service = *service;
    } else {
      BERTH_FIELD(piece.service, std::string, entry, "service", what);
    }
    BERTH_FIELD(piece.bytes, uint64_t, entry, "bytes", what);
    BERTH_FIELD(piece.crc32c, uint32_t, entry, "crc32c", what);
    out.push_back(std::move(piece));
  }
  return absl::OkStatus();
}

}  // namespace berth::fleet_json
