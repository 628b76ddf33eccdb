#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/maglev/table.h"

namespace berth {

// A Maglev table as a generation stores it: the backends with the weights it was made for (in
// name order, as entries index them), the ones failed or drained, and every slot's backend.
struct StoredTable {
  std::string service;
  std::vector<Backend> backends;
  std::vector<std::string> failed;
  std::vector<std::string> drained;
  std::vector<uint16_t> entries;

  friend bool operator==(const StoredTable&, const StoredTable&) = default;
};
StoredTable storedTableOf(absl::string_view service, const Table& table);
// The table again (restoreGeneration()); errors name the service.
absl::StatusOr<Table> tableOf(const StoredTable& stored);

// The stored form: one line of JSON (format, service, M, backends, failed, drained, the bits per
// entry and the entries' CRC32-C), a newline, then the entries packed at the fewest bits that
// hold every backend index and kNoBackend: 7 bits a slot for 100 backends, 10 for 1,000, so a
// table of 1,000 backends at M = 65537 takes 82 KB. decodeStoredTable() checks every field, the
// packed length and the CRC, and names what is wrong (DataLoss).
std::string encodeStoredTable(const StoredTable& table);
absl::StatusOr<StoredTable> decodeStoredTable(absl::string_view bytes);

}  // namespace berth
