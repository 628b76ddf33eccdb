#include "berth/dataplane/service_map.h"

namespace berth {

bool ServiceMap::insert(const ServiceKey& key, uint32_t service) {
  const uint32_t rest = packedRest(key.port, key.protocol, key.family);
  if (find(key.address, rest).has_value()) return false;
  // At most half full, so that a lookup of an absent key meets an empty slot within a few.
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.service != kEmpty) place(slot);
    }
  }
  Slot slot;
  std::memcpy(slot.address, key.address.data(), 16);
  slot.rest = rest;
  slot.service = service;
  place(slot);
  ++size_;
  return true;
}

void ServiceMap::place(const Slot& slot) {
  size_t i = slotOf(slot.address, slot.rest);
  while (slots_[i].service != kEmpty) i = (i + 1) & mask_;
  slots_[i] = slot;
}

}  // namespace berth
