#include "berth/fleet/flow_records.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "berth/config/config.h"
#include "berth/maglev/name_hash.h"
#include "berth/util/status_macros.h"
#include "berth/util/whole_file.h"

namespace berth {
namespace {

constexpr uint8_t kMagic[4] = {'B', 'R', 'S', '1'};
constexpr uint8_t kVersion = 1;

void putU64(uint8_t* at, uint64_t value) {
  for (int i = 7; i >= 0; --i) {
    at[i] = static_cast<uint8_t>(value);
    value >>= 8;
  }
}
void putU32(uint8_t* at, uint32_t value) {
  for (int i = 3; i >= 0; --i) {
    at[i] = static_cast<uint8_t>(value);
    value >>= 8;
  }
}
uint64_t getU64(const uint8_t* at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = value << 8 | at[i];
  return value;
}
uint32_t getU32(const uint8_t* at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = value << 8 | at[i];
  return value;
}

// HMAC-SHA256 of `data` under `secret` into `mac`; false if OpenSSL fails.
bool sign(const std::vector<uint8_t>& secret, const uint8_t* data, size_t length,
          uint8_t (&mac)[kFlowDatagramMacBytes]) {
  unsigned mac_length = 0;
  const unsigned char* result = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                                     data, length, mac, &mac_length);
  return result != nullptr && mac_length == kFlowDatagramMacBytes;
}

bool validState(uint8_t state) { return state <= static_cast<uint8_t>(FlowRecordState::kUdp); }

// A record as it arrived, or nullopt if one of its fields cannot be.
std::optional<FlowRecord> readRecord(const uint8_t* at) {
  FlowRecord record;
  record.service = getU64(at);
  record.backend = getU64(at + 8);
  std::memcpy(record.source.data(), at + 16, 16);
  std::memcpy(&record.source_port, at + 32, 2);
  record.family = at[34];
  const uint8_t state = at[35];
  record.lifetime_ms = getU32(at + 36);
  if (record.family != 4 && record.family != 6) return std::nullopt;
  if (!validState(state)) return std::nullopt;
  record.state = static_cast<FlowRecordState>(state);
  if (record.lifetime_ms > kMaxFlowRecordLifetimeMs) return std::nullopt;
  if (record.family == 4) {
    // The flow key's layout: an IPv4 address leaves the rest of its array zero.
    for (size_t i = 4; i < 16; ++i) {
      if (record.source[i] != 0) return std::nullopt;
    }
  }
  return record;
}

absl::StatusOr<FlowSyncKey> readKey(const SyncKeyConfig& config, size_t index) {
  const std::string field =
      absl::StrCat("sync.keys[", index, "].file (line ", config.line.number, ")");
  absl::StatusOr<std::string> read = readFileWhole(config.file);
  if (!read.ok()) {
    return absl::NotFoundError(absl::StrCat(field, ": cannot read '", config.file, "'"));
  }
  std::string secret = *std::move(read);
  // An editor's final newline is not part of the secret: every instance reads the same bytes.
  while (!secret.empty() && absl::ascii_isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.size() < FlowSyncKey::kMinSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", config.file, "' holds ", secret.size(), " bytes; a key needs ",
                     FlowSyncKey::kMinSecretBytes, " or more (head -c 32 /dev/urandom > FILE)"));
  }
  FlowSyncKey key;
  key.id = config.id;
  key.secret.assign(secret.begin(), secret.end());
  return key;
}

}  // namespace

uint64_t flowRecordName(absl::string_view name) { return nameHash64(name, kFlowRecordNameSeed); }

absl::string_view toString(FlowDatagramRefusal refusal) {
  static constexpr absl::string_view kNames[] = {
      BERTH_FLOW_DATAGRAM_REFUSALS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, refusal);
}

absl::StatusOr<std::vector<uint8_t>> encodeFlowDatagram(const FlowDatagramHeader& header,
                                                        absl::Span<const FlowRecord> records,
                                                        const FlowSyncKey& key) {
  if (records.size() > kMaxRecordsPerDatagram) {
    return absl::InvalidArgumentError(absl::StrCat("flow datagram: ", records.size(),
                                                   " records, at most ", kMaxRecordsPerDatagram));
  }
  if (key.secret.size() < FlowSyncKey::kMinSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("flow datagram: key ", key.id, " is ",
                                                   key.secret.size(), " bytes, at least ",
                                                   FlowSyncKey::kMinSecretBytes));
  }
  const size_t body = kFlowDatagramHeaderBytes + records.size() * kFlowRecordBytes;
  std::vector<uint8_t> bytes(body + kFlowDatagramMacBytes, 0);
  uint8_t* at = bytes.data();
  std::memcpy(at, kMagic, 4);
  at[4] = kVersion;
  at[5] = key.id;
  at[6] = static_cast<uint8_t>(records.size());
  at[7] = 0;
  putU64(at + 8, header.sender);
  putU64(at + 16, header.epoch);
  putU64(at + 24, header.sequence);
  at += kFlowDatagramHeaderBytes;
  for (const FlowRecord& record : records) {
    putU64(at, record.service);
    putU64(at + 8, record.backend);
    std::memcpy(at + 16, record.source.data(), 16);
    std::memcpy(at + 32, &record.source_port, 2);
    at[34] = record.family;
    at[35] = static_cast<uint8_t>(record.state);
    putU32(at + 36, record.lifetime_ms);
    at += kFlowRecordBytes;
  }
  uint8_t mac[kFlowDatagramMacBytes];
  if (!sign(key.secret, bytes.data(), body, mac)) {
    return absl::InternalError("flow datagram: HMAC-SHA256 failed");
  }
  std::memcpy(bytes.data() + body, mac, kFlowDatagramMacBytes);
  return bytes;
}

DecodedFlowDatagram decodeFlowDatagram(absl::Span<const uint8_t> bytes,
                                       absl::Span<const FlowSyncKey> keys) {
  DecodedFlowDatagram decoded;
  auto refuse = [&](FlowDatagramRefusal refusal) {
    decoded.refusal = refusal;
    return decoded;
  };
  if (bytes.size() < kFlowDatagramHeaderBytes + kFlowDatagramMacBytes) {
    return refuse(FlowDatagramRefusal::kMalformed);
  }
  const uint8_t* at = bytes.data();
  if (std::memcmp(at, kMagic, 4) != 0 || at[4] != kVersion) {
    return refuse(FlowDatagramRefusal::kMalformed);
  }
  const size_t count = at[6];
  const size_t body = kFlowDatagramHeaderBytes + count * kFlowRecordBytes;
  if (count > kMaxRecordsPerDatagram || bytes.size() != body + kFlowDatagramMacBytes) {
    return refuse(FlowDatagramRefusal::kMalformed);
  }
  const FlowSyncKey* key = nullptr;
  for (const FlowSyncKey& candidate : keys) {
    if (candidate.id == at[5]) key = &candidate;
  }
  if (key == nullptr) return refuse(FlowDatagramRefusal::kUnknownKey);
  uint8_t mac[kFlowDatagramMacBytes];
  if (!sign(key->secret, at, body, mac) ||
      CRYPTO_memcmp(mac, at + body, kFlowDatagramMacBytes) != 0) {
    return refuse(FlowDatagramRefusal::kBadMac);
  }
  FlowDatagram datagram;
  datagram.header.sender = getU64(at + 8);
  datagram.header.epoch = getU64(at + 16);
  datagram.header.sequence = getU64(at + 24);
  datagram.records.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::optional<FlowRecord> record =
        readRecord(at + kFlowDatagramHeaderBytes + i * kFlowRecordBytes);
    // Signed by a holder of the key, yet not what berth writes: refused whole, not in part.
    if (!record) return refuse(FlowDatagramRefusal::kMalformed);
    datagram.records.push_back(*record);
  }
  decoded.datagram = std::move(datagram);
  return decoded;
}

ReplayWindows::Result ReplayWindows::accept(const FlowDatagramHeader& header) {
  auto refused = [](FlowDatagramRefusal refusal) { return Result{Verdict::kRefused, refusal}; };
  auto it = windows_.find(header.sender);
  if (it == windows_.end()) {
    if (windows_.size() >= max_senders_) return refused(FlowDatagramRefusal::kTooManySenders);
    windows_[header.sender] = Window{header.epoch, header.sequence, 1};
    return Result{Verdict::kAcceptedNewEpoch, FlowDatagramRefusal::kReplayed};
  }
  Window& window = it->second;
  if (header.epoch < window.epoch) return refused(FlowDatagramRefusal::kStaleEpoch);
  if (header.epoch > window.epoch) {
    window = Window{header.epoch, header.sequence, 1};
    return Result{Verdict::kAcceptedNewEpoch, FlowDatagramRefusal::kReplayed};
  }
  if (header.sequence > window.highest) {
    const uint64_t ahead = header.sequence - window.highest;
    window.seen = ahead >= kWindow ? 1 : (window.seen << ahead | 1);
    window.highest = header.sequence;
    return Result{Verdict::kAccepted, FlowDatagramRefusal::kReplayed};
  }
  const uint64_t behind = window.highest - header.sequence;
  if (behind >= kWindow) return refused(FlowDatagramRefusal::kReplayed);
  const uint64_t bit = uint64_t{1} << behind;
  if ((window.seen & bit) != 0) return refused(FlowDatagramRefusal::kReplayed);
  window.seen |= bit;
  return Result{Verdict::kAccepted, FlowDatagramRefusal::kReplayed};
}

absl::StatusOr<std::vector<FlowSyncKey>> readSyncKeys(const SyncConfig& config) {
  std::vector<FlowSyncKey> keys;
  for (size_t i = 0; i < config.keys.size(); ++i) {
    BERTH_ASSIGN_OR_RETURN(FlowSyncKey key, readKey(config.keys[i], i));
    keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace berth
