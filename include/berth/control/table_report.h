#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "berth/config/config.h"
#include "berth/maglev/table.h"
#include "berth/util/json_writer.h"

namespace berth {

// One service's Maglev table as `berthctl table` shows it, from a config file (offline) or from
// berthd's live tables: the same rendering either way, so the two can be compared line by line.

// A header line (with `note` appended, such as the unhealthy backends), slots per backend with
// weight and health, then "SLOT BACKEND" for every slot.
std::string tableText(const ServiceConfig& service, const Table& table, absl::string_view note);

// The same as one JSON object: service, table_size, listener, forwarding, hash_fields, backends
// (name, address, weight, healthy, slots) and entries (a backend index per slot, null for none).
void writeTableJson(JsonWriter& json, const ServiceConfig& service, const Table& table);

}  // namespace berth
