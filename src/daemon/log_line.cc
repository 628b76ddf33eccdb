#include "berth/daemon/log_line.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "berth/util/async_log.h"

namespace berth {
namespace {

// Set while the management loop may run: from the lcores' start to their stop.
std::unique_ptr<AsyncLog>& asyncLog() {
  static auto* log = new std::unique_ptr<AsyncLog>();
  return *log;
}

}  // namespace

uint64_t logLinesDropped() { return asyncLog() == nullptr ? 0 : asyncLog()->dropped(); }

void logLine(absl::string_view line) {
  std::string text = absl::StrCat("berthd: ", line, "\n");
  if (asyncLog() != nullptr) {
    asyncLog()->write(std::move(text));
  } else {
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
}

void startLogThread() { asyncLog() = std::make_unique<AsyncLog>(STDERR_FILENO, "berthd: "); }

void stopLogThread() { asyncLog().reset(); }

}  // namespace berth
