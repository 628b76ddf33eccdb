#include "berth/net/flow_hash.h"

#include "absl/strings/str_cat.h"

namespace berth {

absl::string_view toString(HashFields fields) {
  switch (fields) {
    case HashFields::kFiveTuple:
      return "5-tuple";
    case HashFields::kThreeTuple:
      return "3-tuple";
    case HashFields::kSourceOnly:
      return "source";
  }
  return "unknown";
}

absl::StatusOr<HashFields> parseHashFields(absl::string_view text) {
  for (HashFields fields :
       {HashFields::kFiveTuple, HashFields::kThreeTuple, HashFields::kSourceOnly}) {
    if (text == toString(fields)) return fields;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is not a hash field set; use 5-tuple, 3-tuple or source"));
}

}  // namespace berth
