#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "berth/api/reply_stream.h"
#include "berth/config/config.h"
#include "berth/maglev/table.h"

namespace berth {

// One service's Maglev table as `berthctl table` shows it, from a config file (offline) or from
// berthd's live tables: the same rendering either way, so the two can be compared line by line.
//
// The rendering comes in pieces of about a given size, so that berthd can send a 655,373-slot
// table (10 MB of JSON) while its management loop keeps turning (reply_stream.h). The renderer
// holds its own copy of what it renders (a table's copy shares its entries), so a table rebuilt
// meanwhile changes nothing in a reply under way.
// A backend's weight as every reply and report shows it: the configured weight, which a drain
// keeps for its undrain, and the weight in use, 0 while drained or unhealthy:
// "weight 3, in use 0 (drained)". A config's `weight: 0` is a drain: "weight 0, in use 0
// (drained)".
std::string weightText(int64_t configured, int64_t effective, bool unhealthy, bool drained);

class TableRenderer {
 public:
  // `note` is appended to the text's header line (such as the unhealthy backends). `service` is
  // as configured (ServiceState::configured()), whose weights a drain keeps.
  // `summary`: no slot lines or entries; a balance line, and with more than
  // kSummaryBackends backends only the most over and under their weight's share.
  TableRenderer(const ServiceConfig& service, Table table, std::string note, bool summary = false);
  static constexpr size_t kSummaryBackends = 20;

  // Append the next piece of the JSON object or of the text to `out`; false once that form is
  // complete. The two forms keep separate positions.
  bool nextJson(std::string& out, size_t budget);
  bool nextText(std::string& out, size_t budget);

 private:
  struct Position {
    int part = 0;
    size_t index = 0;
  };
  void appendBackendJson(std::string& out, size_t b) const;
  void appendBackendLine(std::string& out, size_t b) const;
  void appendSlotLine(std::string& out, uint32_t slot) const;
  int64_t effectiveWeight(size_t b) const;

  Table table_;
  std::string header_json_;             // the JSON object up to its backends array, opened
  std::string header_text_;             // the text's header line and the per-backend heading
  std::vector<std::string> addresses_;  // per backend, in table order
  std::vector<int64_t> weights_;        // as configured (a drain keeps it), in table order
  std::vector<uint32_t> counts_;        // slots per backend
  Position json_;
  Position text_;
  bool summary_;
  std::vector<size_t> text_backends_;  // the backends the text lists, in order
  std::string summary_tail_;           // the summary's last lines
};

// A header line (with `note` appended, such as the unhealthy backends), slots per backend with
// weight and health, then "SLOT BACKEND" for every slot.
std::string tableText(const ServiceConfig& service, const Table& table, absl::string_view note,
                      bool summary = false);

// The same as one JSON object: service, table_size, listener, forwarding, hash_fields, backends
// (name, address, weight, healthy, slots) and entries (a backend index per slot, null for none).
std::string tableJson(const ServiceConfig& service, const Table& table, bool summary = false);

// berthd's reply to `table`, in pieces: {"ok":true,"snapshot_generation":G,"table":{the JSON
// object},"text":"the text"}.
std::unique_ptr<ReplyStream> tableReplyStream(const ServiceConfig& service, Table table,
                                              uint64_t generation, std::string note,
                                              bool summary = false);

}  // namespace berth
