#include "cli/src/autoscaler_cmd.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "autoscaler/internal/autoscaler.h"
#include "cli/src/head_request.h"
#include "cli/src/inspect.h"
#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"

namespace orrery::cli {

void AddAutoscalerCommand(CLI::App& app, AutoscalerCommand* c) {
  c->app = app.add_subcommand(
      "autoscaler", "add nodes for waiting demands and remove idle ones (docs/autoscaler.md)");
  c->app->add_option("--config", c->config, "the node groups and provider (YAML)")->required();
  c->app->add_option("--address", c->address,
                     "the head (host:port); default $ORRERY_ADDRESS, else this host's latest "
                     "session");
  c->app->add_flag("--check", c->check, "validate the config, print the groups, and exit");
  AddCredentialFlags(c->app, &c->credentials);
}

namespace {

void PrintGroups(const autoscaler::Config& config) {
  for (const auto& g : config.groups) {
    std::printf(
        "group %s: %s%s, min %d, max %d %s, idle timeout %.0f s, provider %s\n", g.name.c_str(),
        ToString(g.resources).c_str(), g.labels.empty() ? "" : (" " + ToString(g.labels)).c_str(),
        g.min, g.max,
        g.is_tpu
            ? ("slices of " + std::to_string(g.hosts()) + " " + g.tpu.pod_type + " hosts").c_str()
            : "nodes",
        g.idle_timeout_s, g.provider.type.c_str());
  }
}

}  // namespace

int RunAutoscalerCommand(AutoscalerCommand& c) {
  auto config = autoscaler::LoadConfig(c.config);
  if (!config.ok()) {
    std::cerr << "orrery autoscaler: " << config.status().message() << "\n";
    return 2;
  }
  if (c.check) {
    PrintGroups(config.value());
    return 0;
  }
  InspectFlags where;
  where.address = c.address;
  FindCluster(where);
  if (where.address.empty()) {
    std::cerr << "orrery autoscaler: no head known: pass --address H:P\n";
    return 2;
  }
  auto token = UseDaemonCredentials(c.credentials, where.address);
  if (!token.ok()) {
    std::cerr << "orrery autoscaler: " << token.status().message() << "\n";
    return 2;
  }
  autoscaler::Options o;
  o.head = where.address;
  o.config = config.value();
  char exe[4096] = {0};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  o.orrery_path = n > 0 ? std::string(exe, size_t(n)) : "orrery";
  if (!token.value().empty()) o.env["ORRERY_TOKEN_FILE"] = token.value();
  if (token.value().empty()) o.node_args.push_back("--insecure");
  o.answer_host = AnswerHost();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  log::SetLevel("info");
  log::SetProcessTag("autoscaler");
  PrintGroups(o.config);
  std::string head = o.head;
  autoscaler::Autoscaler scaler(std::move(o));
  RateLimitedLog unreachable(30.0);
  timespec wait{};
  double interval = config.value().interval_s;
  for (bool synced = false;;) {
    orrery::Status s = scaler.Tick(MonotonicSeconds());
    if (s.ok() && !synced) {  // the head knows the groups from now on
      synced = true;
      std::printf("autoscaler for the head at %s, every %.1f s\n", head.c_str(), interval);
      std::fflush(stdout);
    }
    uint64_t suppressed = 0;
    if (!s.ok() && unreachable.ShouldLog(&suppressed))
      LOG_WARN("autoscaler: the head did not answer: " + s.message() +
               RateLimitedLog::More(suppressed));
    wait.tv_sec = time_t(interval);
    wait.tv_nsec = long((interval - double(wait.tv_sec)) * 1e9);
    if (sigtimedwait(&set, nullptr, &wait) > 0) break;
  }
  scaler.Shutdown();
  return 0;
}

}  // namespace orrery::cli
