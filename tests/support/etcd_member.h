#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/fleet/etcd_client.h"
#include "support/loopback.h"

namespace berth {

// One etcd member on free loopback ports, in a temporary directory, killed by PID at the end.
// stop() kills it and start() brings it back on the same ports and data, as an outage would.
class EtcdMember {
 public:
  EtcdMember() {
    static int serial = 0;
    directory_ = std::filesystem::temp_directory_path() /
                 absl::StrCat("berth-etcd-", getpid(), "-", serial++);
    std::filesystem::create_directories(directory_);
    // Ports the kernel just handed out and took back: free for etcd to bind a moment later.
    url_ = absl::StrCat("http://127.0.0.1:", closedPort());
    peer_url_ = absl::StrCat("http://127.0.0.1:", closedPort());
    start();
  }
  ~EtcdMember() {
    stop();
    std::filesystem::remove_all(directory_);
  }
  const std::string& url() const { return url_; }

  void start() {
    const std::vector<std::string> args = {"etcd",
                                           "--name",
                                           "e1",
                                           "--data-dir",
                                           (directory_ / "data").string(),
                                           "--listen-client-urls",
                                           url_,
                                           "--advertise-client-urls",
                                           url_,
                                           "--listen-peer-urls",
                                           peer_url_,
                                           "--initial-advertise-peer-urls",
                                           peer_url_,
                                           "--initial-cluster",
                                           absl::StrCat("e1=", peer_url_),
                                           "--initial-cluster-state",
                                           "new",
                                           "--logger",
                                           "zap"};
    const std::string log = (directory_ / "etcd.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      std::vector<char*> argv;
      for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      execvp("etcd", argv.data());
      _exit(127);
    }
  }

  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Waits until the member answers (up to 30 s); false if it never did.
  bool waitReady() const {
    EtcdSettings settings;
    settings.endpoints = {url_};
    settings.call_timeout = absl::Seconds(1);
    absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::create(settings);
    if (!client.ok()) return false;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::optional<bool> answered;
      (*client)->call(
          "maintenance/status", "{}",
          [&](const absl::StatusOr<EtcdClient::Json>& reply) { answered = reply.ok(); });
      (*client)->runUntilIdle(absl::Now() + absl::Seconds(5));
      if (answered.value_or(false)) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

 private:
  std::filesystem::path directory_;
  std::string url_;
  std::string peer_url_;
  pid_t pid_ = -1;
};

}  // namespace berth
