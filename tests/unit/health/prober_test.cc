// The prober against real listeners on loopback: one that accepts and closes, HTTP servers that
// answer 200 and 500, one that accepts and never answers, and a port nobody listens on.

#include "berth/health/prober.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "support/loopback.h"

namespace berth {
namespace {

ProbeTarget target(HealthCheckType type, uint16_t port, uint32_t timeout_ms = 1000) {
  ProbeTarget target;
  target.type = type;
  target.address = IpAddress::v4(127, 0, 0, 1);
  target.port = port;
  target.timeout_ms = timeout_ms;
  return target;
}

// Starts the probes and polls until every probe started has a result (or 10 s pass).
std::map<uint64_t, ProbeResult> run(Prober& prober, const std::vector<ProbeTarget>& targets) {
  std::map<uint64_t, ProbeResult> results;
  for (const ProbeTarget& t : targets) prober.start(t);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((prober.inFlight() > 0 || results.empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    for (ProbeResult& result : prober.poll(50)) results[result.probe] = result;
  }
  return results;
}

ProbeResult runOne(const ProbeTarget& t) {
  std::unique_ptr<Prober> prober = *Prober::create();
  std::map<uint64_t, ProbeResult> results = run(*prober, {t});
  EXPECT_EQ(results.size(), 1u);
  return results.begin()->second;
}

TEST(ProberTest, TcpSucceedsWhenTheConnectDoes) {
  Listener closes(nullptr);
  const ProbeResult result = runOne(target(HealthCheckType::kTcp, closes.port()));
  EXPECT_TRUE(result.success) << result.detail;
  EXPECT_EQ(result.detail, "connected");
}

TEST(ProberTest, TcpFailsOnARefusedConnect) {
  const ProbeResult result = runOne(target(HealthCheckType::kTcp, closedPort()));
  EXPECT_FALSE(result.success);
  EXPECT_EQ(result.detail, "connect: Connection refused");
}

TEST(ProberTest, HttpSucceedsOnAnExpectedStatusAndFailsOnOthers) {
  Listener ok("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  Listener error("HTTP/1.1 500 Internal Server Error\r\n\r\n");
  const ProbeResult good = runOne(target(HealthCheckType::kHttp, ok.port()));
  EXPECT_TRUE(good.success) << good.detail;
  EXPECT_EQ(good.detail, "HTTP 200");
  const ProbeResult bad = runOne(target(HealthCheckType::kHttp, error.port()));
  EXPECT_FALSE(bad.success);
  EXPECT_EQ(bad.detail, "HTTP status 500");
  ProbeTarget wide = target(HealthCheckType::kHttp, error.port());
  wide.expect_low = 200;
  wide.expect_high = 599;
  EXPECT_TRUE(runOne(wide).success) << "500 within an expected range of 200-599";
}

// A backend that reads the PROXY protocol expects a header before the request: a probe of such a
// service sends the LOCAL command's (the balancer's own connection, no client to name).
TEST(ProberTest, AnHttpProbeOfAProxyProtocolServiceStartsWithALocalHeader) {
  Listener ok("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  ProbeTarget proxied = target(HealthCheckType::kHttp, ok.port());
  proxied.proxy_header = true;
  const ProbeResult result = runOne(proxied);
  EXPECT_TRUE(result.success) << result.detail;
  const std::string request = ok.lastRequest();
  const std::string local("\r\n\r\n\0\r\nQUIT\n\x20\0\0\0", 16);
  EXPECT_EQ(request.substr(0, 16), local);
  EXPECT_EQ(request.substr(16, 4), "GET ");
  EXPECT_EQ(runOne(target(HealthCheckType::kHttp, ok.port())).success, true);
  EXPECT_EQ(ok.lastRequest().substr(0, 4), "GET ") << "without the option, no header";
}

TEST(ProberTest, HttpFailsWhenTheServerClosesWithoutAStatusLine) {
  Listener closes(nullptr);
  const ProbeResult result = runOne(target(HealthCheckType::kHttp, closes.port()));
  EXPECT_FALSE(result.success);
  // Closed before or after the request went out: either way no status line came back.
  const bool explained = result.detail.find("without an HTTP status line") != std::string::npos ||
                         result.detail.rfind("send: ", 0) == 0;
  EXPECT_TRUE(explained) << result.detail;
}

// Probes sent `via` a port leave through its kernel interface (SO_BINDTODEVICE); when the
// interface is missing the probe did not run, which says nothing of the backend.
TEST(ProberTest, AProbeBoundToAnInterfaceLeavesThroughItOrDoesNotRun) {
  Listener closes(nullptr);
  ProbeTarget through_loopback = target(HealthCheckType::kTcp, closes.port());
  through_loopback.interface = "lo";
  const ProbeResult reached = runOne(through_loopback);
  EXPECT_TRUE(reached.success) << reached.detail;
  ProbeTarget through_nothing = through_loopback;
  through_nothing.interface = "berth-none0";
  const ProbeResult not_run = runOne(through_nothing);
  EXPECT_FALSE(not_run.ran);
  EXPECT_FALSE(not_run.success);
  EXPECT_EQ(not_run.detail.rfind("bind to berth-none0: ", 0), 0u) << not_run.detail;
  EXPECT_EQ(through_loopback.toString(), absl::StrCat("tcp 127.0.0.1:", closes.port(), " via lo"));
}

// A fullnat service's probes: from the local address, on the range's ports in turn, each closed
// with a reset so that neither end keeps a TIME_WAIT for the next probe that takes its port.
TEST(ProberTest, ASourcedProbeComesFromItsAddressOnThePortsInTurnAndResetsOnClose) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  ASSERT_EQ(listen(listener, 16), 0);

  ProbeTarget sourced = target(HealthCheckType::kTcp, ntohs(address.sin_port));
  sourced.source = IpAddress::v4(127, 0, 0, 2);
  sourced.source_first_port = 47001;
  sourced.source_ports = 2;
  EXPECT_EQ(sourced.toString(),
            absl::StrCat("tcp 127.0.0.1:", ntohs(address.sin_port), " from 127.0.0.2"));
  std::unique_ptr<Prober> prober = *Prober::create();
  for (int i = 0; i < 3; ++i) {
    const std::map<uint64_t, ProbeResult> results = run(*prober, {sourced});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_TRUE(results.begin()->second.success) << results.begin()->second.detail;
  }
  std::vector<uint16_t> ports;
  for (int i = 0; i < 3; ++i) {
    sockaddr_in peer{};
    socklen_t peer_length = sizeof(peer);
    const int accepted =
        accept4(listener, reinterpret_cast<sockaddr*>(&peer), &peer_length, SOCK_NONBLOCK);
    ASSERT_GE(accepted, 0) << strerror(errno);
    EXPECT_EQ(ntohl(peer.sin_addr.s_addr), 0x7f000002u);
    ports.push_back(ntohs(peer.sin_port));
    char byte = 0;
    EXPECT_EQ(recv(accepted, &byte, 1, 0), -1);
    EXPECT_EQ(errno, ECONNRESET) << "closed by a reset, not a FIN";
    close(accepted);
  }
  EXPECT_EQ(ports, (std::vector<uint16_t>{47001, 47002, 47001}));
  close(listener);

  // An address the host does not hold (the kernel interface not up yet): the probe did not run.
  sourced.source = IpAddress::v4(198, 18, 5, 5);
  const ProbeResult not_run = runOne(sourced);
  EXPECT_FALSE(not_run.ran);
  EXPECT_EQ(not_run.detail, "bind to 198.18.5.5:47001: Cannot assign requested address");
}

TEST(ProberTest, AProbeThatGetsNoAnswerTimesOut) {
  Listener silent("");
  const auto start = std::chrono::steady_clock::now();
  const ProbeResult result = runOne(target(HealthCheckType::kHttp, silent.port(), 200));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(result.success);
  EXPECT_EQ(result.detail, "timed out after 200 ms waiting for the response");
  EXPECT_GE(waited, std::chrono::milliseconds(200));
}

TEST(ProberTest, OneThreadRunsHundredsOfProbesAtOnce) {
  Listener ok("HTTP/1.0 204 No Content\r\n\r\n");
  std::unique_ptr<Prober> prober = *Prober::create();
  std::vector<ProbeTarget> targets(300, target(HealthCheckType::kHttp, ok.port(), 5000));
  const std::map<uint64_t, ProbeResult> results = run(*prober, targets);
  ASSERT_EQ(results.size(), 300u);
  for (const auto& [id, result] : results) EXPECT_TRUE(result.success) << result.detail;
  EXPECT_EQ(prober->inFlight(), 0u) << "every socket closed";
}

TEST(ProberTest, TargetsComeFromABackendsSettingsAndReadWell) {
  HealthCheckConfig config;
  config.type = HealthCheckType::kHttp;
  config.address = *IpAddress::parse("2001:db8::2");
  config.port = 8080;
  config.http_path = "/healthz";
  const ProbeTarget t = ProbeTarget::of(config);
  EXPECT_EQ(t.toString(), "http [2001:db8::2]:8080/healthz");
  EXPECT_EQ(t, ProbeTarget::of(config)) << "identical settings, one target";
}

// Out of descriptors, a probe does not run: its result says so, and it is no verdict on the
// backend, however many there are.
TEST(ProberTest, ProbesWithoutDescriptorsDidNotRunRatherThanFailed) {
  Listener ok("HTTP/1.0 200 OK\r\n\r\n");
  std::unique_ptr<Prober> prober = *Prober::create();
  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original), 0);
  // What is open now, and room for a handful more.
  size_t open_now = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++open_now;
  }
  rlimit lowered = original;
  lowered.rlim_cur = open_now + 5;
  // Only while the probes start: the listener's thread needs descriptors to answer.
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  for (int i = 0; i < 50; ++i) prober->start(target(HealthCheckType::kHttp, ok.port(), 5000));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &original), 0);
  const std::map<uint64_t, ProbeResult> results = run(*prober, {});
  ASSERT_EQ(results.size(), 50u);
  size_t ran = 0;
  size_t not_run = 0;
  for (const auto& [id, result] : results) {
    if (result.ran) {
      ++ran;
      EXPECT_TRUE(result.success) << result.detail;
    } else {
      ++not_run;
      EXPECT_FALSE(result.success);
      EXPECT_EQ(result.detail, "socket: Too many open files");
    }
  }
  EXPECT_GT(ran, 0u);
  EXPECT_GT(not_run, 0u);
}

TEST(ProberTest, LocalErrorsAreTheHostsAndNetworkErrorsTheBackends) {
  for (int error : {EMFILE, ENFILE, ENOBUFS, ENOMEM, ENOSPC, EADDRNOTAVAIL}) {
    EXPECT_TRUE(isLocalProbeError(error)) << strerror(error);
  }
  for (int error : {ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT, ECONNRESET}) {
    EXPECT_FALSE(isLocalProbeError(error)) << strerror(error);
  }
}

// More sockets ready than one epoll batch (64): one poll handles them all.
TEST(ProberTest, OnePollHandlesEveryReadyProbe) {
  Listener ok(nullptr);
  std::unique_ptr<Prober> prober = *Prober::create();
  for (int i = 0; i < 300; ++i) prober->start(target(HealthCheckType::kTcp, ok.port(), 5000));
  // Let every connect complete, then one poll.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(prober->poll(0).size(), 300u);
}

}  // namespace
}  // namespace berth
