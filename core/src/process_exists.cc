// Removing the folders of processes that ended (core/internal/process_exists.h).
#include "core/internal/process_exists.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/internal/log.h"

namespace orrery {

namespace fs = std::filesystem;

int RemoveFoldersOfEndedProcesses(const std::string& parent,
                                  const std::function<long(const std::string& name)>& pid_of,
                                  double min_age_s) {
  std::error_code ec;
  int removed = 0;
  const auto touched_before =
      fs::file_time_type::clock::now() - std::chrono::duration_cast<fs::file_time_type::duration>(
                                             std::chrono::duration<double>(min_age_s));
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    long pid = pid_of(e.path().filename().string());
    struct stat st;
    if (pid <= 0 || lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid())
      continue;
    if (e.last_write_time(ec) > touched_before || ec || ProcessExists(pid)) continue;
    fs::remove_all(e.path(), ec);
    if (ec) {
      LOG_WARN("cannot remove " + e.path().string() + ", left by process " + std::to_string(pid) +
               " which ended: " + ec.message());
      continue;
    }
    ++removed;
  }
  return removed;
}

}  // namespace orrery
