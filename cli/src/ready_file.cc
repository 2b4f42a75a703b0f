#include "cli/src/ready_file.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli/src/session.h"
#include "core/internal/process_exists.h"
#include "core/internal/security.h"

namespace orrery::cli {

namespace {

constexpr size_t kMaxReadyFileBytes = 4096;

std::string ReadAtMost(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string text(limit, '\0');
  in.read(text.data(), std::streamsize(limit));
  text.resize(size_t(in.gcount()));
  return text;
}

// Whether `pid` (a child of this process) has exited; reaps it and describes how.
bool Exited(int pid, std::string* how) {
  int status = 0;
  // A child that exited stays a zombie (kill(pid, 0) succeeds) until reaped: reap it here.
  if (waitpid(pid, &status, WNOHANG) == pid) {
    if (WIFEXITED(status)) {
      *how = "exited with status " + std::to_string(WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
      *how = "was killed by signal " + std::to_string(WTERMSIG(status));
    } else {
      *how = "exited";
    }
    return true;
  }
  if (!ProcessExists(pid)) {
    *how = "exited";
    return true;
  }
  return false;
}

std::string WithTail(const std::string& message, const std::string& log) {
  std::string tail = LogTail(log);
  if (tail.empty()) return message + " (its log " + log + " is empty)";
  return message + "; the last lines of " + log + ":\n" + tail;
}

}  // namespace

Status WriteReadyFile(const std::string& path, const std::string& address, int port,
                      const std::map<std::string, std::string>& extra) {
  std::string host_port = address;
  if (size_t scheme = host_port.find("://"); scheme != std::string::npos)
    host_port = host_port.substr(scheme + 3);
  nlohmann::json j = {{"pid", int(getpid())}, {"address", host_port}, {"port", port}};
  for (const auto& [k, v] : extra) j[k] = v;
  return security::WriteSecretFile(path, j.dump());
}

Result<ReadyInfo> ParseReadyFile(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  auto pid = j.find("pid"), address = j.find("address"), port = j.find("port");
  if (pid == j.end() || !pid->is_number_integer() || address == j.end() || !address->is_string() ||
      port == j.end() || !port->is_number_integer()) {
    return Status::InvalidArgument("it lacks an integer pid and port or a string address");
  }
  ReadyInfo info;
  info.pid = pid->get<int>();
  info.address = address->get<std::string>();
  info.port = port->get<int>();
  if (info.pid <= 0 || info.port <= 0 || info.port > 65535 || info.address.empty())
    return Status::InvalidArgument("its pid, port or address is out of range");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.value().is_string() && it.key() != "address")
      info.extra[it.key()] = it.value().get<std::string>();
  }
  return info;
}

Result<ReadyInfo> WaitForReadyFile(const std::string& path, int pid, const std::string& log,
                                   const std::string& what, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    // Renamed into place whole: a file that exists is complete.
    if (access(path.c_str(), F_OK) == 0) {
      auto info = ParseReadyFile(ReadAtMost(path, kMaxReadyFileBytes));
      if (!info.ok()) {
        return Status::Unavailable(WithTail(
            what + " wrote a malformed readiness file " + path + ": " + info.status().message(),
            log));
      }
      if (info->pid != pid) {
        return Status::Unavailable(WithTail("the readiness file " + path + " names pid " +
                                                std::to_string(info->pid) + ", not " + what +
                                                " (pid " + std::to_string(pid) + ")",
                                            log));
      }
      return info;
    }
    std::string how;
    if (Exited(pid, &how)) return Status::Unavailable(WithTail(what + " " + how, log));
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Timeout(WithTail(
          what + " was not ready within " + std::to_string(timeout_ms / 1000) + " s", log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file with a deadline
  }
}

std::string LogTail(const std::string& log, int lines) {
  std::ifstream in(log, std::ios::binary);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size <= 0) return "";
  std::streamoff from = std::max<std::streamoff>(0, size - 16 * 1024);
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> all;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    all.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  for (size_t i = all.size() > size_t(lines) ? all.size() - lines : 0; i < all.size(); ++i)
    out += "  " + all[i] + "\n";
  return out;
}

}  // namespace orrery::cli
