#include "berth/api/request.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

using Json = nlohmann::json;

// Reads a request as nlohmann's parser walks it, refusing at the first token that cannot be part
// of a flat object of strings, so that the error says what is wrong where a person would look:
// the key whose value is not a string, the key given twice, the byte where the syntax broke.
class RequestReader : public nlohmann::json_sax<Json> {
 public:
  explicit RequestReader(ControlRequest& request) : request_(request) {}

  // Why the request was refused; OK when it was read whole.
  const absl::Status& error() const { return error_; }
  bool hasCommand() const { return has_command_; }

  bool start_object(std::size_t) override {
    if (state_ != State::kBeforeObject) return notAString();
    state_ = State::kExpectKey;
    return true;
  }
  bool key(string_t& key) override {
    key_ = std::move(key);
    state_ = State::kExpectValue;
    return true;
  }
  bool string(string_t& value) override {
    if (state_ != State::kExpectValue) return refuse("expected a JSON object");
    state_ = State::kAfterValue;
    if (key_ == "command") {
      if (has_command_) return refuse("\"command\" given twice");
      has_command_ = true;
      request_.command = std::move(value);
      return true;
    }
    if (!request_.fields.emplace(std::move(key_), std::move(value)).second) {
      return refuse("a key given twice");
    }
    return true;
  }
  bool end_object() override {
    state_ = State::kDone;
    return true;
  }
  bool null() override { return notAString(); }
  bool boolean(bool) override { return notAString(); }
  bool number_integer(number_integer_t) override { return notAString(); }
  bool number_unsigned(number_unsigned_t) override { return notAString(); }
  bool number_float(number_float_t, const string_t&) override { return notAString(); }
  bool binary(binary_t&) override { return notAString(); }
  bool start_array(std::size_t) override { return notAString(); }
  bool end_array() override { return notAString(); }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& exception) override {
    return refuse(absl::StrCat(syntaxError(exception.what()), " at byte ", position));
  }

 private:
  enum class State { kBeforeObject, kExpectKey, kExpectValue, kAfterValue, kDone };

  bool notAString() {
    if (state_ != State::kExpectValue) return refuse("expected a JSON object");
    return refuse(absl::StrCat("the value of \"", key_, "\" must be a string"));
  }
  bool refuse(absl::string_view what) {
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(absl::StrCat("request: ", what));
    }
    return false;
  }
  // The parser's complaint, in the words of the rest of berth's control socket.
  std::string syntaxError(absl::string_view what) const {
    if (absl::StrContains(what, "missing closing quote")) {
      return "a string without its closing quote";
    }
    if (absl::StrContains(what, "control character")) return "control character in a string";
    if (absl::StrContains(what, "surrogate")) return "a surrogate \\u escape";
    if (absl::StrContains(what, "'\\u' must be followed")) return "a bad \\u escape";
    if (absl::StrContains(what, "after backslash")) return "a bad escape";
    switch (state_) {
      case State::kBeforeObject:
        return "expected a JSON object";
      case State::kExpectKey:
        return "expected a string";
      case State::kExpectValue:
        return absl::StrContains(what, "expected ':'")
                   ? "expected ':'"
                   : absl::StrCat("the value of \"", key_, "\" must be a string");
      case State::kAfterValue:
        return "expected ',' or '}'";
      case State::kDone:
        return "text after the object";
    }
    return std::string(what);
  }

  ControlRequest& request_;
  State state_ = State::kBeforeObject;
  std::string key_;
  bool has_command_ = false;
  absl::Status error_;
};

}  // namespace

const std::string& ControlRequest::field(absl::string_view key) const {
  static const std::string kEmpty;
  auto it = fields.find(key);
  return it == fields.end() ? kEmpty : it->second;
}

absl::StatusOr<ControlRequest> parseControlRequest(absl::string_view line) {
  if (line.size() > kMaxControlRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: longer than ", kMaxControlRequestBytes, " bytes"));
  }
  ControlRequest request;
  RequestReader reader(request);
  if (!Json::sax_parse(line.begin(), line.end(), &reader)) {
    if (!reader.error().ok()) return reader.error();
    return absl::InvalidArgumentError("request: expected a JSON object");
  }
  if (!reader.hasCommand()) return absl::InvalidArgumentError("request: no \"command\"");
  return request;
}

absl::StatusOr<ControlReply> parseControlReply(absl::string_view line) {
  const Json reply = Json::parse(line.begin(), line.end(), nullptr, false);
  if (reply.is_discarded()) return absl::InvalidArgumentError("reply: not JSON");
  if (!reply.is_object()) return absl::InvalidArgumentError("reply: expected a JSON object");
  ControlReply parsed;
  for (const auto& [key, value] : reply.items()) {
    if (key == "ok") {
      if (!value.is_boolean())
        return absl::InvalidArgumentError("reply: \"ok\" must be true or false");
      parsed.ok = value.get<bool>();
    } else if (value.is_string()) {
      parsed.strings[key] = value.get<std::string>();
    }
  }
  return parsed;
}

}  // namespace berth
