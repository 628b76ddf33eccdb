#pragma once

// Reading YAML maps field by field, with every error naming source:line:column and the field's
// path. Shared by the config loader's sections.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/net/ip_address.h"
#include "berth/net/mac_address.h"

namespace berth {

// Every loader error carries where it happened: source:line:column: field.path: message.
class ErrorSite {
 public:
  ErrorSite(absl::string_view source, std::string path, const YAML::Mark& mark)
      : source_(source), path_(std::move(path)), mark_(mark) {
    // An empty document has no position; point at its start.
    if (mark_.line < 0 || mark_.column < 0) mark_.line = mark_.column = 0;
  }

  absl::Status error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", mark_.line + 1, ":",
                                                   mark_.column + 1, ": ", path_, ": ", message));
  }
  // "file:line: path: message", for advice and for what the loader chose.
  std::string warning(absl::string_view message) const {
    return absl::StrCat(source_, ":", mark_.line + 1, ": ", path_, ": ", message);
  }
  std::string note(absl::string_view message) const { return warning(message); }
  int line() const { return mark_.line + 1; }

 private:
  absl::string_view source_;
  std::string path_;
  YAML::Mark mark_;
};

// The loader's errors, gathered so that one pass reports every one: a part that fails is
// recorded and the parse goes on with the next (each field, port, service and backend). A check
// that depends on fields runs only while they parsed, so that one mistake is reported once.
class ErrorList {
 public:
  // Records `status` unless it is OK; true when it was OK.
  bool record(const absl::Status& status) {
    if (status.ok()) return true;
    messages_.emplace_back(status.message());
    return false;
  }
  // Moves the value into `target`, or records the error and leaves `target` as it was.
  template <typename T, typename U>
  bool assign(T& target, absl::StatusOr<U> result) {
    if (!result.ok()) return record(result.status());
    target = *std::move(result);
    return true;
  }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  // OK, or one InvalidArgument error with every message, a line each, in the order found.
  absl::Status status() const {
    if (messages_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(messages_, "\n"));
  }

 private:
  std::vector<std::string> messages_;
};

// A YAML map whose keys have been checked against the allowed set, with each value's position.
class Fields {
 public:
  struct Field {
    YAML::Node value;
    YAML::Mark key_mark;
  };

  static absl::StatusOr<Fields> read(absl::string_view source, const std::string& path,
                                     const YAML::Node& node,
                                     std::initializer_list<absl::string_view> allowed) {
    ErrorList errors;
    absl::StatusOr<Fields> fields = read(source, path, node, allowed, errors);
    if (!errors.empty()) return errors.status();
    return fields;
  }
  // As above, but an unknown key or one that appears twice is recorded in `errors` and left
  // out, so that the map's other fields are still read; only a node that is no map fails.
  static absl::StatusOr<Fields> read(absl::string_view source, const std::string& path,
                                     const YAML::Node& node,
                                     std::initializer_list<absl::string_view> allowed,
                                     ErrorList& errors) {
    if (!node.IsMap()) {
      return ErrorSite(source, path, node.Mark()).error("expected a map of keys to values");
    }
    Fields fields(source, path, node.Mark());
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      const ErrorSite site(source, path.empty() ? key : absl::StrCat(path, ".", key),
                           it->first.Mark());
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        errors.record(site.error(
            absl::StrCat("unknown key; expected one of: ", absl::StrJoin(allowed, ", "))));
      } else if (!fields.fields_.emplace(key, Field{it->second, it->first.Mark()}).second) {
        errors.record(site.error("key appears twice"));
      }
    }
    return fields;
  }

  bool has(absl::string_view key) const { return fields_.contains(key); }
  const YAML::Node* find(absl::string_view key) const {
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : &it->second.value;
  }
  std::string pathOf(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }
  ErrorSite site(absl::string_view key) const {
    auto it = fields_.find(key);
    // A value's own mark points at the value; an empty value has none, so fall back to its key.
    const YAML::Mark mark = it == fields_.end()                 ? mark_
                            : it->second.value.Mark().is_null() ? it->second.key_mark
                                                                : it->second.value.Mark();
    return ErrorSite(source_, pathOf(key), mark);
  }
  ErrorSite self() const { return ErrorSite(source_, path_, mark_); }

  absl::StatusOr<std::string> requiredString(absl::string_view key) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) return self().error(absl::StrCat("missing required key '", key, "'"));
    if (!node->IsScalar() || node->Scalar().empty()) {
      return site(key).error("expected a non-empty string");
    }
    return node->Scalar();
  }

  // An integer in [low, high], or `fallback` when the key is absent.
  absl::StatusOr<int64_t> integer(absl::string_view key, int64_t low, int64_t high,
                                  std::optional<int64_t> fallback) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) {
      if (fallback) return *fallback;
      return self().error(absl::StrCat("missing required key '", key, "'"));
    }
    int64_t value = 0;
    if (!node->IsScalar() || !absl::SimpleAtoi(node->Scalar(), &value) || value < low ||
        value > high) {
      return site(key).error(absl::StrCat("must be an integer from ", low, " to ", high, ", got '",
                                          node->IsScalar() ? node->Scalar() : "a non-scalar", "'"));
    }
    return value;
  }

  absl::StatusOr<IpAddress> address(absl::string_view key) const {
    absl::StatusOr<std::string> text = requiredString(key);
    if (!text.ok()) return text.status();
    absl::StatusOr<IpAddress> address = IpAddress::parse(*text);
    if (!address.ok()) return site(key).error(address.status().message());
    return address;
  }

  // An address of the given family, or nullopt when the key is absent.
  absl::StatusOr<std::optional<IpAddress>> optionalAddress(absl::string_view key,
                                                           std::optional<IpFamily> family) const {
    if (!has(key)) return std::optional<IpAddress>();
    absl::StatusOr<IpAddress> parsed = address(key);
    if (!parsed.ok()) return parsed.status();
    if (family && parsed->family != *family) {
      return site(key).error(absl::StrCat("must be an IPv", static_cast<int>(*family),
                                          " address, got ", parsed->toString()));
    }
    return std::optional<IpAddress>(*parsed);
  }

  // A MAC address, or nullopt when the key is absent.
  absl::StatusOr<std::optional<MacAddress>> optionalMac(absl::string_view key) const {
    if (!has(key)) return std::optional<MacAddress>();
    absl::StatusOr<std::string> text = requiredString(key);
    if (!text.ok()) return text.status();
    absl::StatusOr<MacAddress> mac = MacAddress::parse(*text);
    if (!mac.ok()) return site(key).error(mac.status().message());
    if (mac->isMulticast()) return site(key).error(absl::StrCat(*text, " is a multicast MAC"));
    return std::optional<MacAddress>(*mac);
  }

  // true or false, or `fallback` when the key is absent.
  absl::StatusOr<bool> boolean(absl::string_view key, bool fallback) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) return fallback;
    if (node->IsScalar() && (node->Scalar() == "true" || node->Scalar() == "false")) {
      return node->Scalar() == "true";
    }
    return site(key).error(absl::StrCat("must be true or false, got '",
                                        node->IsScalar() ? node->Scalar() : "a non-scalar", "'"));
  }

  // One of `choices`, or `fallback` when the key is absent.
  absl::StatusOr<std::string> choice(absl::string_view key,
                                     absl::Span<const absl::string_view> choices,
                                     absl::string_view fallback) const {
    if (!has(key)) return std::string(fallback);
    absl::StatusOr<std::string> text = requiredString(key);
    if (!text.ok()) return text.status();
    if (std::find(choices.begin(), choices.end(), *text) == choices.end()) {
      return site(key).error(
          absl::StrCat("must be one of ", absl::StrJoin(choices, ", "), ", got '", *text, "'"));
    }
    return text;
  }

  // A duration in seconds (decimals allowed) from `low` to `high`, as whole milliseconds, or
  // `fallback_ms` when the key is absent.
  absl::StatusOr<uint32_t> milliseconds(absl::string_view key, double low, double high,
                                        uint32_t fallback_ms) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) return fallback_ms;
    double seconds = 0;
    if (!node->IsScalar() || !absl::SimpleAtod(node->Scalar(), &seconds) || !(seconds >= low) ||
        !(seconds <= high)) {
      return site(key).error(absl::StrCat("must be a number of seconds from ", low, " to ", high,
                                          ", got '",
                                          node->IsScalar() ? node->Scalar() : "a non-scalar", "'"));
    }
    return static_cast<uint32_t>(seconds * 1000 + 0.5);
  }

  // A number above `above` and at most `high`, or nullopt when the key is absent.
  absl::StatusOr<std::optional<double>> optionalNumberAbove(absl::string_view key, double above,
                                                            double high) const {
    const YAML::Node* node = find(key);
    if (node == nullptr) return std::optional<double>();
    double value = 0;
    if (!node->IsScalar() || !absl::SimpleAtod(node->Scalar(), &value) || !(value > above) ||
        !(value <= high)) {
      return site(key).error(absl::StrCat("must be a number above ", above, " and at most ", high,
                                          ", got '",
                                          node->IsScalar() ? node->Scalar() : "a non-scalar", "'"));
    }
    return std::optional<double>(value);
  }

  // A list of strings, empty when the key is absent.
  absl::StatusOr<std::vector<std::string>> stringList(absl::string_view key) const {
    std::vector<std::string> result;
    const YAML::Node* node = find(key);
    if (node == nullptr || node->IsNull()) return result;
    if (!node->IsSequence()) return site(key).error("expected a list of strings");
    for (size_t i = 0; i < node->size(); ++i) {
      const YAML::Node item = (*node)[i];
      if (!item.IsScalar()) {
        return ErrorSite(source_, absl::StrCat(pathOf(key), "[", i, "]"), item.Mark())
            .error("expected a string");
      }
      result.push_back(item.Scalar());
    }
    return result;
  }

 private:
  Fields(absl::string_view source, std::string path, YAML::Mark mark)
      : source_(source), path_(std::move(path)), mark_(mark) {}

  absl::string_view source_;
  std::string path_;
  YAML::Mark mark_;
  absl::flat_hash_map<std::string, Field> fields_;
};

}  // namespace berth
