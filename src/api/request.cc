#include "berth/api/request.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

class Reader {
 public:
  explicit Reader(absl::string_view text) : text_(text) {}

  void skipSpace() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\r' || text_[at_] == '\n')) {
      ++at_;
    }
  }
  bool consume(char expected) {
    skipSpace();
    if (at_ < text_.size() && text_[at_] == expected) {
      ++at_;
      return true;
    }
    return false;
  }
  char peek() {
    skipSpace();
    return at_ < text_.size() ? text_[at_] : '\0';
  }
  bool literal(absl::string_view word) {
    skipSpace();
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool number() {
    skipSpace();
    const size_t start = at_;
    while (at_ < text_.size() &&
           absl::string_view("+-.eE0123456789").find(text_[at_]) != absl::string_view::npos) {
      ++at_;
    }
    return at_ > start;
  }
  bool startsString() {
    skipSpace();
    return at_ < text_.size() && text_[at_] == '"';
  }
  bool atEnd() {
    skipSpace();
    return at_ == text_.size();
  }
  absl::Status error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("request: ", what, " at byte ", at_));
  }

  absl::StatusOr<std::string> string() {
    if (!consume('"')) return error("expected a string");
    std::string out;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (at_ >= text_.size()) break;
      const char escape = text_[at_++];
      switch (escape) {
        case '"':
        case '\\':
        case '/':
          out.push_back(escape);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          if (at_ + 4 > text_.size()) return error("a \\u escape cut short");
          uint32_t code = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = text_[at_++];
            const int digit = h >= '0' && h <= '9'   ? h - '0'
                              : h >= 'a' && h <= 'f' ? h - 'a' + 10
                              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                     : -1;
            if (digit < 0) return error("a bad \\u escape");
            code = code << 4 | static_cast<uint32_t>(digit);
          }
          // Names and addresses are ASCII; a code point is kept as UTF-8, surrogates refused.
          if (code >= 0xD800 && code <= 0xDFFF) return error("a surrogate \\u escape");
          if (code < 0x80) {
            out.push_back(static_cast<char>(code));
          } else if (code < 0x800) {
            out.push_back(static_cast<char>(0xC0 | code >> 6));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
          } else {
            out.push_back(static_cast<char>(0xE0 | code >> 12));
            out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
          }
          break;
        }
        default:
          return error("a bad escape");
      }
    }
    return error("a string without its closing quote");
  }

 private:
  absl::string_view text_;
  size_t at_ = 0;
};

// Skips one JSON value of any kind; false if it is malformed.
bool skipValue(Reader& reader, int depth);

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
  Reader reader(line);
  if (!reader.consume('{')) return reader.error("expected a JSON object");
  ControlRequest request;
  bool has_command = false;
  if (!reader.consume('}')) {
    for (;;) {
      absl::StatusOr<std::string> key = reader.string();
      if (!key.ok()) return key.status();
      if (!reader.consume(':')) return reader.error("expected ':'");
      if (!reader.startsString()) {
        return reader.error(absl::StrCat("the value of \"", *key, "\" must be a string"));
      }
      absl::StatusOr<std::string> value = reader.string();
      if (!value.ok()) return value.status();
      if (*key == "command") {
        if (has_command) return reader.error("\"command\" given twice");
        has_command = true;
        request.command = *std::move(value);
      } else if (!request.fields.emplace(*std::move(key), *std::move(value)).second) {
        return reader.error("a key given twice");
      }
      if (reader.consume(',')) continue;
      if (reader.consume('}')) break;
      return reader.error("expected ',' or '}'");
    }
  }
  if (!reader.atEnd()) return reader.error("text after the object");
  if (!has_command) return absl::InvalidArgumentError("request: no \"command\"");
  return request;
}

}  // namespace berth

namespace berth {
namespace {

bool skipValue(Reader& reader, int depth) {
  if (depth > 32) return false;
  const char next = reader.peek();
  if (next == '"') return reader.string().ok();
  if (next == '{' || next == '[') {
    const char close = next == '{' ? '}' : ']';
    reader.consume(next);
    if (reader.consume(close)) return true;
    for (;;) {
      if (next == '{') {
        if (!reader.string().ok() || !reader.consume(':')) return false;
      }
      if (!skipValue(reader, depth + 1)) return false;
      if (reader.consume(',')) continue;
      return reader.consume(close);
    }
  }
  return reader.literal("true") || reader.literal("false") || reader.literal("null") ||
         reader.number();
}

}  // namespace

absl::StatusOr<ControlReply> parseControlReply(absl::string_view line) {
  Reader reader(line);
  if (!reader.consume('{')) return reader.error("expected a JSON object");
  ControlReply reply;
  if (!reader.consume('}')) {
    for (;;) {
      absl::StatusOr<std::string> key = reader.string();
      if (!key.ok()) return key.status();
      if (!reader.consume(':')) return reader.error("expected ':'");
      if (*key == "ok") {
        if (reader.literal("true")) {
          reply.ok = true;
        } else if (!reader.literal("false")) {
          return reader.error("\"ok\" must be true or false");
        }
      } else if (reader.startsString()) {
        absl::StatusOr<std::string> value = reader.string();
        if (!value.ok()) return value.status();
        reply.strings[*key] = *std::move(value);
      } else if (!skipValue(reader, 0)) {
        return reader.error("a malformed value");
      }
      if (reader.consume(',')) continue;
      if (reader.consume('}')) break;
      return reader.error("expected ',' or '}'");
    }
  }
  if (!reader.atEnd()) return reader.error("text after the object");
  return reply;
}

}  // namespace berth
