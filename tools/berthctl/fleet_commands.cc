#include "fleet_commands.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/config/loader.h"
#include "berth/fleet/admin.h"
#include "berth/fleet/agent.h"
#include "berth/fleet/etcd_client.h"
#include "berth/util/whole_file.h"

namespace berth {
namespace {

// A command line tool may wait: long enough for every endpoint to be tried at its timeout.
constexpr absl::Duration kCommandDeadline = absl::Seconds(60);

int fail(absl::string_view message) {
  std::fprintf(stderr, "berthctl: %.*s\n", static_cast<int>(message.size()), message.data());
  return 1;
}

absl::StatusOr<std::unique_ptr<EtcdClient>> clientFor(const FleetConfig& fleet) {
  return EtcdClient::create(etcdSettingsFor(fleet));
}

std::string whoPushes() {
  std::string user = "unknown";
  if (const passwd* entry = getpwuid(geteuid()); entry != nullptr) user = entry->pw_name;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(user, "@", host);
}

}  // namespace

int fleetPush(const FleetConfig& fleet, const std::string& path) {
  absl::StatusOr<std::string> contents = readFileWhole(path);
  if (!contents.ok()) return fail(absl::StrCat("cannot read '", path, "'"));
  PushRequest request;
  request.text = *std::move(contents);
  request.source = path;
  // Everything that needs no instance's ports is checked here; each instance checks the rest
  // against its own ports when it applies the version.
  absl::StatusOr<Config> version = parseFleetVersion(request.text, path);
  if (!version.ok()) return fail(absl::StrCat("push refused: ", version.status().message()));
  for (const ServiceConfig& service : version->services) {
    request.service_lines.emplace_back(service.name, service.line.number);
  }
  for (const std::string& warning : version->warnings) {
    std::fprintf(stderr, "berthctl: warning: %s\n", warning.c_str());
  }
  request.pushed_by = whoPushes();
  request.keep_versions = fleet.keep_versions;

  absl::StatusOr<std::unique_ptr<EtcdClient>> client = clientFor(fleet);
  if (!client.ok()) return fail(client.status().message());
  std::optional<absl::StatusOr<PushOutcome>> outcome;
  pushVersion(**client, FleetKeys(fleet.prefix), std::move(request),
              [&](absl::StatusOr<PushOutcome> done) { outcome = std::move(done); });
  (*client)->runUntilIdle(absl::Now() + kCommandDeadline);
  if (!outcome) return fail("etcd did not answer in time; the push may or may not have landed");
  if (!outcome->ok()) return fail(absl::StrCat("push failed: ", outcome->status().message()));
  std::printf("pushed %s as fleet version %lu (push %s, revision %ld): %zu service(s)\n",
              path.c_str(), static_cast<unsigned long>((*outcome)->version),
              (*outcome)->push_id.c_str(), static_cast<long>((*outcome)->revision),
              version->services.size());
  for (const std::string& note : (*outcome)->notes) std::printf("%s\n", note.c_str());
  return 0;
}

int fleetStatus(const FleetConfig& fleet, bool json) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = clientFor(fleet);
  if (!client.ok()) return fail(client.status().message());
  std::optional<absl::StatusOr<FleetStatus>> status;
  readFleetStatus(
      **client, FleetKeys(fleet.prefix),
      [&](absl::StatusOr<FleetStatus> done) { status = std::move(done); }, fleet.health_quorum);
  (*client)->runUntilIdle(absl::Now() + kCommandDeadline);
  if (!status) return fail("etcd did not answer in time");
  if (!status->ok()) return fail(absl::StrCat("fleet status: ", status->status().message()));
  const std::string text = json ? renderFleetStatusJson(**status) : renderFleetStatus(**status);
  std::fwrite(text.data(), 1, text.size(), stdout);
  const bool agree = !(*status)->instances.empty() && (*status)->agreement().agree;
  return agree ? 0 : 3;
}

}  // namespace berth
