#include "tests/chaos/processes.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace orrery_chaos {

namespace fs = std::filesystem;

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The NUL-separated entries of /proc/PID/cmdline or /proc/PID/environ.
std::vector<std::string> Entries(const std::string& path) {
  std::vector<std::string> out;
  std::string all = ReadAll(path);
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    out.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// State and parent from /proc/PID/stat ("pid (comm) S ppid ..."; comm may hold spaces).
bool StatOf(int pid, char* state, int* ppid) {
  std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(stat.substr(close + 1));
  return bool(rest >> *state >> *ppid);
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kRedis:
      return "redis-server";
    case Role::kHead:
      return "head";
    case Role::kNode:
      return "node";
    case Role::kZygote:
      return "zygote";
    case Role::kWorker:
      return "worker";
    case Role::kOther:
      return "other";
  }
  return "?";
}

std::vector<Proc> MarkedProcesses(const std::string& marker, const std::string& cwd) {
  std::vector<Proc> out;
  std::map<int, bool> zygote_env;  // pid -> ORRERY_ROLE=zygote
  const int self = getpid();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    int pid = std::atoi(name.c_str());
    if (pid == self) continue;
    bool marked = false, zygote = false;
    for (const auto& e : Entries("/proc/" + name + "/environ")) {
      marked = marked || e == marker;
      zygote = zygote || e == "ORRERY_ROLE=zygote";
    }
    if (!marked && !cwd.empty()) {
      std::error_code cwd_ec;
      marked = fs::read_symlink("/proc/" + name + "/cwd", cwd_ec) == fs::path(cwd);
    }
    if (!marked) continue;
    char state = '?';
    Proc p;
    p.pid = pid;
    if (!StatOf(pid, &state, &p.ppid) || state == 'Z' || state == 'X') continue;
    std::vector<std::string> argv = Entries("/proc/" + name + "/cmdline");
    for (const auto& a : argv) p.cmdline += (p.cmdline.empty() ? "" : " ") + a;
    if (!argv.empty() && argv[0].find("redis-server") != std::string::npos) {
      p.role = Role::kRedis;
    } else if (argv.size() > 1 && argv[1] == "head") {
      p.role = Role::kHead;
    } else if (argv.size() > 1 && argv[1] == "node") {
      p.role = Role::kNode;
    } else if (zygote) {
      p.role = Role::kZygote;
    }
    zygote_env[pid] = zygote;
    out.push_back(p);
  }
  for (auto& p : out) {
    if (p.role == Role::kZygote && zygote_env.count(p.ppid) && zygote_env[p.ppid])
      p.role = Role::kWorker;
  }
  return out;
}

bool DescendsFrom(int pid, int ancestor) {
  for (int hops = 0; pid > 1 && hops < 64; ++hops) {
    if (pid == ancestor) return true;
    char state;
    int ppid;
    if (!StatOf(pid, &state, &ppid)) return false;
    pid = ppid;
  }
  return false;
}

int CountFds(int pid) {
  std::error_code ec;
  int n = 0;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++n;
  return ec ? -1 : n;
}

std::set<std::string> ShmEntries() {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev/shm", ec))
    out.insert(entry.path().filename().string());
  return out;
}

std::string Describe(const std::vector<Proc>& procs) {
  std::string out;
  for (const auto& p : procs) {
    out += "  " + std::to_string(p.pid) + " (parent " + std::to_string(p.ppid) + ") " +
           RoleName(p.role) + ": " + p.cmdline.substr(0, 160) + "\n";
  }
  return out;
}

}  // namespace orrery_chaos
