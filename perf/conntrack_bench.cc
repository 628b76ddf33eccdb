// The per-core connection table at datapath sizes, looked up as the datapath does: in bursts of
// 32, every bucket prefetched before the first lookup. At 1M connections the table (32 MiB) is
// larger than L3, so a lone lookup is a DRAM miss; the burst overlaps them.
//
// Flows are random IPv4 5-tuples; each lookup computes its bucket's keyed hash, as the datapath
// does. Run through perf/run-benchmarks.sh.

#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "berth/dataplane/conntrack.h"
#include "berth/dataplane/nat_sessions.h"
#include "berth/net/flow_hash.h"
#include "berth/net/packet_parser.h"

namespace berth {
namespace {

constexpr size_t kBurst = 32;

// Zeroed memory on 2 MiB pages where the kernel grants them (transparent huge pages on
// madvise), as a worker's tables are on DPDK's hugepages: with 4 KiB pages every lookup of a
// table this size also misses the TLB, which is not what the datapath pays.
template <typename T>
class HugeArray {
 public:
  explicit HugeArray(size_t count) : count_(count), bytes_(roundUp(count * sizeof(T))) {
    void* memory =
        mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) std::abort();
    madvise(memory, bytes_, MADV_HUGEPAGE);
    data_ = static_cast<T*>(memory);
    for (size_t i = 0; i < count; ++i) new (&data_[i]) T{};
  }
  ~HugeArray() { munmap(data_, bytes_); }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  T* data() const { return data_; }
  size_t size() const { return count_; }

 private:
  static size_t roundUp(size_t bytes) { return (bytes + (2 << 20) - 1) & ~size_t{(2 << 20) - 1}; }
  T* data_;
  size_t count_;
  size_t bytes_;
};
constexpr uint16_t kService = 1;

// Every iteration is a burst: items and nanoseconds per packet.
void countPackets(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

struct Flow {
  ConnectionKey key;
};

std::vector<Flow> randomFlows(size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<Flow> flows(count);
  for (Flow& flow : flows) {
    const uint32_t client = random();
    const FlowKey key = FlowKey::make(
        IpAddress::v4(static_cast<uint8_t>(client >> 24), static_cast<uint8_t>(client >> 16),
                      static_cast<uint8_t>(client >> 8), static_cast<uint8_t>(client)),
        IpAddress::v4(198, 18, 100, 1), static_cast<uint16_t>(random()), 80, kProtocolTcp);
    flow.key = ConnectionKey::of(key, HashFields::kFiveTuple, kService);
  }
  return flows;
}

struct Fixture {
  explicit Fixture(uint32_t entries)
      : buckets(ConnectionTable::bucketsFor(entries)),
        table(buckets.data(), buckets.size(), ConntrackTimeouts{}, 0, &counters, secret()) {}
  static ConnectionHashKey secret() {
    std::mt19937_64 random(7);
    ConnectionHashKey key;
    for (uint64_t& multiplier : key.multipliers) multiplier = random();
    return key;
  }
  uint32_t hashOf(const Flow& flow) const { return table.bucketHash(flow.key); }
  HugeArray<ConnectionBucket> buckets;
  ConntrackCounters counters;
  ConnectionTable table;
};

// Lookups of connections the table holds, in random order. Arg: table capacity.
void BM_ConntrackHit(benchmark::State& state) {
  const auto entries = static_cast<uint32_t>(state.range(0));
  Fixture fixture(entries);
  std::vector<Flow> flows = randomFlows(entries, 1);
  for (const Flow& flow : flows) {
    fixture.table.insert(flow.key, fixture.hashOf(flow), 1, ConnectionState::kTcpEstablished, 0);
  }
  // A full 4-way table keeps about nine in ten of as many random flows: look up those it kept.
  std::erase_if(flows, [&](const Flow& flow) {
    return fixture.table.find(flow.key, fixture.hashOf(flow), 1) == nullptr;
  });
  std::shuffle(flows.begin(), flows.end(), std::mt19937(2));
  const size_t bursts = flows.size() / kBurst;
  size_t burst = 0;
  uint64_t found = 0;
  for (auto _ : state) {
    const Flow* batch = &flows[burst * kBurst];
    uint32_t hashes[kBurst];
    for (size_t i = 0; i < kBurst; ++i) {
      hashes[i] = fixture.hashOf(batch[i]);
      fixture.table.prefetch(hashes[i]);
    }
    for (size_t i = 0; i < kBurst; ++i) {
      Connection* connection = fixture.table.find(batch[i].key, hashes[i], 2);
      found += connection != nullptr;
      benchmark::DoNotOptimize(connection);
    }
    burst = burst + 1 == bursts ? 0 : burst + 1;
  }
  countPackets(state);
  state.counters["hit_share"] =
      static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
  state.counters["kept_share"] = static_cast<double>(flows.size()) / entries;
  state.counters["bytes_per_entry"] =
      static_cast<double>(sizeof(ConnectionBucket) * fixture.buckets.size()) / entries;
  state.counters["table_mib"] =
      static_cast<double>(sizeof(ConnectionBucket) * fixture.buckets.size()) / (1 << 20);
}
BENCHMARK(BM_ConntrackHit)->Arg(1 << 20)->Arg(8 << 20)->Unit(benchmark::kNanosecond);

// A new flow: the lookup misses and the connection is inserted, into a table already full of
// other connections, so most inserts evict. Arg: table capacity.
void BM_ConntrackMissAndInsert(benchmark::State& state) {
  const auto entries = static_cast<uint32_t>(state.range(0));
  Fixture fixture(entries);
  for (const Flow& flow : randomFlows(entries, 1)) {
    fixture.table.insert(flow.key, fixture.hashOf(flow), 1, ConnectionState::kTcpEstablished, 0);
  }
  const std::vector<Flow> fresh = randomFlows(size_t{1} << 22, 3);
  const size_t bursts = fresh.size() / kBurst;
  size_t burst = 0;
  uint32_t now = 1;
  for (auto _ : state) {
    const Flow* batch = &fresh[burst * kBurst];
    uint32_t hashes[kBurst];
    for (size_t i = 0; i < kBurst; ++i) {
      hashes[i] = fixture.hashOf(batch[i]);
      fixture.table.prefetch(hashes[i]);
    }
    for (size_t i = 0; i < kBurst; ++i) {
      Connection* connection = fixture.table.find(batch[i].key, hashes[i], now);
      if (connection == nullptr) {
        connection =
            fixture.table.insert(batch[i].key, hashes[i], 2, ConnectionState::kTcpOpening, now);
      }
      benchmark::DoNotOptimize(connection);
    }
    // After one pass the fresh flows are in the table; later passes are a fresh set again, as the
    // time steps past their opening timeout.
    if (++burst == bursts) {
      burst = 0;
      now += 10'000;
    }
  }
  countPackets(state);
}
BENCHMARK(BM_ConntrackMissAndInsert)->Arg(1 << 20)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace berth

namespace berth {
namespace {

// Full-NAT's sessions (nat_sessions.h) at the same sizes, looked up as the datapath will, every
// bucket of a burst prefetched before its first lookup: a client's packet reads its client
// bucket and stores the session's last-seen time without waiting; a backend's reply reads the
// session's bucket. Sessions are of one backend over 32 local addresses of a 64,512-port range
// with no RSS (one worker): 1M sessions take half the pool. Arg: sessions.
struct NatFixture {
  explicit NatFixture(uint32_t count)
      : count(count),
        session_buckets(NatSessionTable::sessionBucketsFor(count)),
        client_buckets(NatSessionTable::clientBucketsFor(count)),
        spaces(NatSessionTable::spacesFor(64)),
        table(memory(), count, ConntrackTimeouts{}, &counters, Fixture::secret()),
        steering(*ReplySteering::build(RssSpread{}, 1024, 65535)) {
    for (uint16_t i = 0; i < 32; ++i) {
      locals.push_back(
          {static_cast<uint16_t>(i + 1), IpAddress::v4(198, 18, 0, static_cast<uint8_t>(100 + i))});
    }
  }
  NatSessionMemory memory() {
    NatSessionMemory memory;
    memory.sessions = session_buckets.data();
    memory.session_buckets = session_buckets.size();
    memory.clients = client_buckets.data();
    memory.client_buckets = client_buckets.size();
    memory.spaces = spaces.data();
    memory.space_count = spaces.size();
    return memory;
  }
  // Opens a session per flow (as many as the pool holds) and returns the client keys and the
  // reply keys of those opened.
  void open(const std::vector<Flow>& flows, std::vector<NatClientKey>& clients,
            std::vector<NatReplyKey>& replies) {
    uint32_t start = 0;
    for (const Flow& flow : flows) {
      NatOpening opening;
      opening.client.client = flow.key.source;
      opening.client.client_port = flow.key.source_port;
      opening.client.service = kService;
      opening.protocol = kProtocolTcp;
      opening.tcp_flags = kTcpSyn;
      opening.backend = IpAddress::v4(198, 18, 1, 10);
      opening.backend_port = 0x5000;  // 80
      opening.backend_id = 1;
      opening.local_addresses = locals.data();
      opening.local_address_count = locals.size();
      opening.steering = &steering;
      opening.start = start++;
      NatClientEntry* entry = table.open(opening, 0);
      if (entry == nullptr) continue;
      NatSession& session = table.sessionOf(*entry);
      table.touchFromBackend(session, kTcpSyn | kTcpAck, 0);
      clients.push_back(opening.client);
      replies.push_back(NatSessionTable::replyKeyOf(session));
    }
  }
  double bytesPerSession() const {
    return static_cast<double>(sizeof(NatSessionBucket) * session_buckets.size() +
                               sizeof(NatClientBucket) * client_buckets.size()) /
           count;
  }
  uint32_t count;
  HugeArray<NatSessionBucket> session_buckets;
  HugeArray<NatClientBucket> client_buckets;
  std::vector<NatPortSpace> spaces;
  NatCounters counters;
  NatSessionTable table;
  ReplySteering steering;
  std::vector<NatLocalAddress> locals;
};

template <bool kReplies>
void natHits(benchmark::State& state) {
  const auto count = static_cast<uint32_t>(state.range(0));
  NatFixture fixture(count);
  std::vector<NatClientKey> clients;
  std::vector<NatReplyKey> replies;
  fixture.open(randomFlows(count, 1), clients, replies);
  // Shuffled in place and read in order, as the connection table's flows are: the keys come to
  // the lookups as a packet's headers do, from cache.
  std::shuffle(clients.begin(), clients.end(), std::mt19937(2));
  std::shuffle(replies.begin(), replies.end(), std::mt19937(2));
  const size_t bursts = clients.size() / kBurst;
  size_t burst = 0;
  uint64_t found = 0;
  for (auto _ : state) {
    const size_t first = burst * kBurst;
    uint64_t hashes[kBurst];
    for (size_t i = 0; i < kBurst; ++i) {
      if constexpr (kReplies) {
        hashes[i] = fixture.table.replyHash(replies[first + i]);
        fixture.table.prefetchReply(hashes[i]);
      } else {
        hashes[i] = fixture.table.clientHash(clients[first + i]);
        fixture.table.prefetchClient(hashes[i]);
      }
    }
    for (size_t i = 0; i < kBurst; ++i) {
      if constexpr (kReplies) {
        NatSession* session = fixture.table.findReply(replies[first + i], hashes[i], 1);
        if (session != nullptr) fixture.table.touchFromBackend(*session, kTcpAck, 1);
        found += session != nullptr;
        benchmark::DoNotOptimize(session);
      } else {
        NatClientEntry* entry = fixture.table.findClient(clients[first + i], hashes[i]);
        if (entry != nullptr) fixture.table.touchFromClient(*entry, kProtocolTcp, kTcpAck, 1);
        found += entry != nullptr;
        benchmark::DoNotOptimize(entry);
      }
    }
    burst = burst + 1 == bursts ? 0 : burst + 1;
  }
  countPackets(state);
  state.counters["hit_share"] =
      static_cast<double>(found) / static_cast<double>(state.iterations() * kBurst);
  state.counters["sessions"] = static_cast<double>(clients.size());
  state.counters["bytes_per_session"] = fixture.bytesPerSession();
}

// Client to backend: the client's bucket, and a store to the session.
void BM_NatSessionClientHit(benchmark::State& state) { natHits<false>(state); }
BENCHMARK(BM_NatSessionClientHit)->Arg(1 << 20)->Unit(benchmark::kNanosecond);

// Backend to client: the session's bucket.
void BM_NatSessionReplyHit(benchmark::State& state) { natHits<true>(state); }
BENCHMARK(BM_NatSessionReplyHit)->Arg(1 << 20)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace berth

BENCHMARK_MAIN();
