#pragma once

// What the fleet's stored JSON values share (store.cc, generation.cc): the format every value
// carries, typed fields that never throw, and the lists of names and pieces both kinds of
// manifest hold. They are read with nlohmann and written with util/json_writer.h.

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "berth/fleet/store.h"
#include "berth/net/crc32c.h"
#include "berth/util/json_writer.h"

namespace berth::fleet_json {

using Json = nlohmann::json;

inline constexpr int kFormat = 1;  // of every stored value; a newer one is refused

inline uint32_t crcOf(absl::string_view bytes) {
  return crc32cPortable(0, bytes.data(), bytes.size());
}

// `text` as a JSON object of kFormat; DataLoss naming `what` otherwise.
inline absl::StatusOr<Json> parseObject(absl::string_view text, absl::string_view what) {
  Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return absl::DataLossError(absl::StrCat(what, " is not a JSON object"));
  if (json.value("format", 0) != kFormat) {
    return absl::DataLossError(absl::StrCat(what, " has format ", json.value("format", 0),
                                            ", this berth reads format ", kFormat));
  }
  return json;
}

// A field that must be there with this type: the value, or DataLoss naming `what` and the field.
template <typename T>
absl::StatusOr<T> required(const Json& json, const char* field, absl::string_view what) {
  const auto it = json.find(field);
  if (it == json.end()) return absl::DataLossError(absl::StrCat(what, " has no ", field));
  if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) return it->template get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (it->is_boolean()) return it->template get<bool>();
  } else if constexpr (std::is_unsigned_v<T>) {
    if (it->is_number_unsigned() && it->template get<uint64_t>() <= std::numeric_limits<T>::max())
      return static_cast<T>(it->template get<uint64_t>());
  } else {
    if (it->is_number_integer()) return static_cast<T>(it->template get<int64_t>());
  }
  return absl::DataLossError(absl::StrCat(what, ": ", field, " has the wrong type"));
}

// Opens a stored value's object, with its format.
inline JsonWriter& beginValue(JsonWriter& json) {
  return json.beginObject().key("format").value(kFormat);
}

// The strings of the list `field`, appended to `out`; DataLoss naming `what` and the field
// otherwise.
absl::Status readNames(const Json& json, const char* field, absl::string_view what,
                       std::vector<std::string>& out);

// A manifest's pieces, at its "pieces". `service`: the service every piece belongs to (a
// table's pieces), or null where each piece names its own (a version's).
void writePieces(JsonWriter& json, const std::vector<VersionPiece>& pieces, bool with_service);
absl::Status readPieces(const Json& json, absl::string_view what, const std::string* service,
                        std::vector<VersionPiece>& out);

}  // namespace berth::fleet_json

// Assigns a required field to `target`, or returns its error from the enclosing function.
#define BERTH_FIELD(target, type, json, field, what)                                        \
  do {                                                                                      \
    absl::StatusOr<type> value_or = ::berth::fleet_json::required<type>(json, field, what); \
    if (!value_or.ok()) return value_or.status();                                           \
    target = *std::move(value_or);                                                          \
  } while (0)
