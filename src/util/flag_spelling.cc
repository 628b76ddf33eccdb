#include "berth/util/flag_spelling.h"

#include <algorithm>
#include <optional>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "berth/util/did_you_mean.h"

namespace berth {
namespace {

const KnownFlag* findFlag(absl::Span<const KnownFlag> known, const std::string& name) {
  for (const KnownFlag& flag : known) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

// The absl spelling of one flag's name as written, and whether it was the old spelling: nullopt
// for a name no flag has.
struct Resolved {
  std::string absl_name;  // with "no" in front for a negated boolean
  bool old_spelling = false;
  std::string new_spelling;  // as it should be written, without the dashes
  bool takes_value = false;  // a flag that is not boolean: its value may be the next argument
};
std::optional<Resolved> resolve(absl::Span<const KnownFlag> known, const std::string& written) {
  const std::string underscored = absl::StrReplaceAll(written, {{"-", "_"}});
  // absl's own flags (--helpfull, --flagfile) and single words are the same in either style.
  if (const KnownFlag* flag = findFlag(known, underscored)) {
    return Resolved{flag->name, written != flagSpelling(flag->name), flagSpelling(flag->name),
                    !flag->boolean};
  }
  // A negated boolean: --no-timing, or absl's --notiming.
  for (const absl::string_view prefix : {"no_", "no"}) {
    if (!absl::StartsWith(underscored, prefix)) continue;
    const KnownFlag* flag = findFlag(known, underscored.substr(prefix.size()));
    if (flag == nullptr || !flag->boolean) continue;
    const std::string spelled = absl::StrCat("no-", flagSpelling(flag->name));
    return Resolved{absl::StrCat("no", flag->name), written != spelled, spelled, false};
  }
  return std::nullopt;
}

}  // namespace

std::string flagSpelling(const std::string& name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

absl::StatusOr<RespelledFlags> respellFlags(std::vector<std::string> arguments,
                                            absl::Span<const KnownFlag> known) {
  RespelledFlags out;
  bool flags_over = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    std::string& argument = arguments[i];
    if (i == 0 || flags_over || argument.size() < 2 || argument[0] != '-') continue;
    if (argument == "--") {
      flags_over = true;
      continue;
    }
    const size_t dashes = argument[1] == '-' ? 2 : 1;
    const size_t equals = argument.find('=');
    const std::string written =
        argument.substr(dashes, equals == std::string::npos ? std::string::npos : equals - dashes);
    const std::optional<Resolved> resolved = resolve(known, written);
    if (!resolved) {
      std::vector<std::string> spellings;
      for (const KnownFlag& flag : known) spellings.push_back(flagSpelling(flag.name));
      const std::optional<std::string> nearest =
          nearestName(absl::StrReplaceAll(written, {{"_", "-"}}), spellings);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", written,
                       nearest ? absl::StrCat("; did you mean --", *nearest, "?")
                               : std::string("; --help lists the flags")));
    }
    if (resolved->old_spelling) {
      out.notes.push_back(absl::StrCat("--", written, " is now spelled --", resolved->new_spelling,
                                       "; the old spelling will go in a later release"));
    }
    argument = absl::StrCat("--", resolved->absl_name,
                            equals == std::string::npos ? "" : argument.substr(equals));
    // `--max-failures -1`: the value is the next argument, whatever it looks like.
    if (resolved->takes_value && equals == std::string::npos) ++i;
  }
  out.arguments = std::move(arguments);
  return out;
}

std::vector<KnownFlag> registeredFlags() {
  std::vector<KnownFlag> known;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    known.push_back({std::string(name), flag->IsOfType<bool>()});
  }
  std::sort(known.begin(), known.end(),
            [](const KnownFlag& a, const KnownFlag& b) { return a.name < b.name; });
  return known;
}

}  // namespace berth
