#include "berth/util/json_writer.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth {

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
  }
}

JsonWriter& JsonWriter::beginObject() {
  separate();
  out_ += '{';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_ += '}';
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  separate();
  out_ += '[';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_ += ']';
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::raw(absl::string_view json) {
  separate();
  out_.append(json.data(), json.size());
  return *this;
}

JsonWriter& JsonWriter::strings(const std::vector<std::string>& texts) {
  beginArray();
  for (const std::string& text : texts) value(text);
  return endArray();
}

JsonWriter& JsonWriter::key(absl::string_view name) {
  value(name);
  out_ += ':';
  after_key_ = true;
  return *this;
}

void appendJsonEscaped(std::string& out, absl::string_view text) {
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
}

JsonWriter& JsonWriter::value(absl::string_view text) {
  separate();
  out_ += '"';
  appendJsonEscaped(out_, text);
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(int64_t number) {
  separate();
  absl::StrAppend(&out_, number);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t number) {
  separate();
  absl::StrAppend(&out_, number);
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  separate();
  // The shortest text that reads back as the same double: analyses compare figures exactly.
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof(text), number);
  out_.append(text, written.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

}  // namespace berth
