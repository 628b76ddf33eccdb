#pragma once

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace berth {

// An EAL for integration tests: --no-huge with its own memory and no shared config, so tests run
// side by side, on lcore 0 only, leaving nothing behind (even with --no-shconf the EAL makes a
// runtime directory, which TearDown removes).
class EalEnvironment : public ::testing::Environment {
 public:
  explicit EalEnvironment(std::string program) : program_(std::move(program)) {}
  void SetUp() override {
    const std::string prefix = program_ + "-" + std::to_string(getpid());
    std::vector<std::string> args = {program_,      "--no-huge",     "-m",   "64", "--no-pci",
                                     "--no-shconf", "--file-prefix", prefix, "-l", "0",
                                     "--log-level", "lib.eal:error"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    ASSERT_GE(rte_eal_init(static_cast<int>(argv.size()), argv.data()), 0)
        << "EAL: " << rte_strerror(rte_errno);
  }
  void TearDown() override {
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ignored;
    std::filesystem::remove_all(runtime_dir, ignored);
  }

 private:
  std::string program_;
};

}  // namespace berth
