#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace berth {

// Appends `text` to `out` as the inside of a JSON string (escaped, without the quotes): for
// writers that produce one long string in pieces.
void appendJsonEscaped(std::string& out, absl::string_view text);

// Builds one JSON document into a string, inserting commas itself. For operator output
// (berthctl, the control socket, metrics) and for what the fleet stores in etcd; the caller
// keeps begin/end calls balanced.
class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  // The key for the next value inside an object.
  JsonWriter& key(absl::string_view name);
  JsonWriter& value(absl::string_view text);
  JsonWriter& value(const char* text) { return value(absl::string_view(text)); }
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(unsigned number) { return value(static_cast<uint64_t>(number)); }
  JsonWriter& value(double number);  // non-finite numbers are written as null
  JsonWriter& value(bool flag);
  JsonWriter& null();
  // A value written already (by another JsonWriter, or stored), inserted as it stands.
  JsonWriter& raw(absl::string_view json);
  // An array of strings.
  JsonWriter& strings(const std::vector<std::string>& texts);

  const std::string& str() const { return out_; }

 private:
  void separate();

  std::string out_;
  // One entry per open container: whether it already holds an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace berth
