#include "node/src/process_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/internal/log.h"
#include "core/internal/process_exists.h"

namespace orrery::node {

namespace {

constexpr const char* kPrefix = "orrery-node-";
constexpr int kKillRounds = 100;

// Mount point and root of the cgroup v2 hierarchy, from /proc/self/mountinfo.
bool Cgroup2Mount(std::string* mount, std::string* root) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno;
    if (fields >> id >> parent >> devno >> *root >> *mount) return true;
  }
  return false;
}

// The subdirectories of `dir` (the child cgroups).
std::vector<std::string> Children(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
  }
  closedir(d);
  return out;
}

bool WriteFile(const std::string& path, const char* text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text, std::strlen(text)) == ssize_t(std::strlen(text));
  close(fd);
  return ok;
}

// SIGKILLs every pid listed in `dir` and below; how many there were.
int KillListed(const std::string& dir) {
  int n = 0;
  std::ifstream procs(dir + "/cgroup.procs");
  for (int pid; procs >> pid;) {
    if (pid > 0 && kill(pid, SIGKILL) == 0) ++n;
  }
  for (const std::string& child : Children(dir)) n += KillListed(child);
  return n;
}

bool Populated(const std::string& dir) {
  std::ifstream events(dir + "/cgroup.events");
  std::string key;
  int value = 0;
  while (events >> key >> value) {
    if (key == "populated") return value != 0;
  }
  return false;
}

}  // namespace

std::string OwnCgroupDir() {
  const char* off = std::getenv("ORRERY_NO_CGROUPS");
  if (off && *off && std::string(off) != "0") return "";
  std::string mount, root;
  if (!Cgroup2Mount(&mount, &root)) return "";
  std::ifstream in("/proc/self/cgroup");
  std::string line, own;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) own = line.substr(3);
  }
  if (own.empty() || own.find(" (deleted)") != std::string::npos) return "";
  if (root != "/" && own.rfind(root, 0) == 0) own = own.substr(root.size());
  std::string dir = mount + (own == "/" ? "" : own);
  return access((dir + "/cgroup.procs").c_str(), W_OK) == 0 ? dir : "";
}

bool AnyEnvironEntry(int pid, const std::function<bool(const std::string&)>& match) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (match(entry)) return true;
  }
  return false;
}

namespace {

enum class Environ { kHolds, kLacks, kEmpty };

Environ ReadEnviron(int pid, const std::string& var) {
  bool any = false;
  bool holds = AnyEnvironEntry(pid, [&](const std::string& entry) {
    any = true;
    return entry == var;
  });
  return holds ? Environ::kHolds : any ? Environ::kLacks : Environ::kEmpty;
}

// Whether a process that shows no environment never will: it is gone, a zombie or a
// kernel thread (PF_KTHREAD in the flags of /proc/<pid>/stat). Any other process shows
// none only in the middle of an exec, before the new program's environment is set up.
bool NeverShowsEnviron(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return true;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  char state = line[close + 2];
  if (state == 'Z' || state == 'X') return true;
  std::istringstream fields(line.substr(close + 2));
  std::string skip;
  for (int field = 3; field <= 8; ++field) fields >> skip;  // state .. tpgid
  unsigned long flags = 0;
  fields >> flags;
  constexpr unsigned long kKernelThread = 0x00200000;
  return !fields || (flags & kKernelThread) != 0;
}

// How long ProcessesWithEnv looks again at processes caught in an exec.
constexpr int kExecRetries = 50;
constexpr auto kExecRetryPause = std::chrono::milliseconds(1);

}  // namespace

std::vector<int> ProcessesWithEnv(const std::string& var) {
  std::vector<int> found;
  std::vector<int> in_exec;  // showed no environment, and will
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  int self = getpid();
  while (dirent* d = readdir(proc)) {
    int pid = std::atoi(d->d_name);
    if (pid <= 0 || pid == self) continue;
    Environ e = ReadEnviron(pid, var);
    if (e == Environ::kHolds) found.push_back(pid);
    if (e == Environ::kEmpty && !NeverShowsEnviron(pid)) in_exec.push_back(pid);
  }
  closedir(proc);
  // A process that execs (a driver's "exec sleep") has no environment for a moment: the
  // few caught so are read again until they show one, or for at most about 50 ms.
  for (int round = 0; round < kExecRetries && !in_exec.empty(); ++round) {
    std::this_thread::sleep_for(kExecRetryPause);
    std::vector<int> still;
    for (int pid : in_exec) {
      Environ e = ReadEnviron(pid, var);
      if (e == Environ::kHolds) found.push_back(pid);
      if (e == Environ::kEmpty && !NeverShowsEnviron(pid)) still.push_back(pid);
    }
    in_exec.swap(still);
  }
  return found;
}

int OpenCgroupProcs(const std::string& dir) {
  return open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
}

bool EnterCgroup(int procs_fd) { return procs_fd >= 0 && write(procs_fd, "0", 1) == 1; }

void KillCgroup(const std::string& dir) {
  if (WriteFile(dir + "/cgroup.kill", "1")) return;
  // Before Linux 5.14: kill what is listed until nothing is (a fork may race a round).
  for (int round = 0; round < kKillRounds && KillListed(dir) > 0; ++round) {
  }
}

bool WaitCgroupEmpty(const std::string& dir, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int fd = open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // no such cgroup
  bool empty = false;
  while (!(empty = !Populated(dir))) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    // cgroup.events signals POLLPRI when it changes.
    pollfd p{fd, POLLPRI, 0};
    char buf[256];
    [[maybe_unused]] ssize_t n = pread(fd, buf, sizeof(buf), 0);
    poll(&p, 1, int(left.count()));
  }
  close(fd);
  return empty;
}

bool RemoveCgroup(const std::string& dir) {
  bool ok = true;
  for (const std::string& child : Children(dir)) ok = RemoveCgroup(child) && ok;
  if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return ok;
  return false;
}

std::unique_ptr<CgroupTree> CgroupTree::Create() {
  std::string own = OwnCgroupDir();
  if (own.empty()) return nullptr;
  for (const std::string& dir : Children(own)) {
    std::string name = dir.substr(dir.rfind('/') + 1);
    if (name.rfind(kPrefix, 0) != 0) continue;
    int pid = std::atoi(name.c_str() + std::strlen(kPrefix));
    if (pid <= 0 || (pid != getpid() && ProcessExists(pid))) continue;
    LOG_INFO("node: removing " + dir + ", left by a node that is gone");
    KillCgroup(dir);
    WaitCgroupEmpty(dir, 1000);
    RemoveCgroup(dir);
  }
  std::string path = own + "/" + kPrefix + std::to_string(getpid());
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    LOG_INFO("node: cgroup v2 at " + own + " is not writable (" + std::strerror(errno) +
             "); jobs and workers run without cgroups of their own");
    return nullptr;
  }
  return std::unique_ptr<CgroupTree>(new CgroupTree(path));
}

CgroupTree::~CgroupTree() {
  KillCgroup(path_);
  WaitCgroupEmpty(path_, 2000);
  if (!RemoveCgroup(path_)) LOG_WARN("node: could not remove the cgroup " + path_);
}

std::string CgroupTree::Make(const std::string& name) {
  std::string dir = path_ + "/" + name;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    LOG_WARN("node: cannot make the cgroup " + dir + ": " + std::strerror(errno));
    return "";
  }
  return dir;
}

void CgroupTree::End(const std::string& name) {
  std::string dir = path_ + "/" + name;
  KillCgroup(dir);
  if (!RemoveCgroup(dir)) ending_.insert(dir);
}

void CgroupTree::Sweep() {
  for (auto it = ending_.begin(); it != ending_.end();) {
    it = RemoveCgroup(*it) ? ending_.erase(it) : std::next(it);
  }
}

}  // namespace orrery::node
