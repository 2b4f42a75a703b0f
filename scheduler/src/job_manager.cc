#include "scheduler/src/job_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include "core/internal/file_hash.h"
#include "core/internal/folder_pack.h"
#include "core/internal/log.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {
// At most this many jobs may be waiting to upload their executable at once (each entry is a
// job that answered NeedBinary and has not uploaded yet).
constexpr size_t kMaxAwaitingUploads = 1024;

double WallSeconds() {
  return double(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count()) /
         1000.0;
}
}  // namespace

Status JobManager::Admit(proto::JobMsg& m) const {
  // Free text from the driver (its path may be any bytes) is kept with invalid UTF-8
  // escaped; the namespace is a name and must be UTF-8.
  if (Status s = records::CheckUtf8("the job's namespace", m.namespace_); !s.ok()) return s;
  m.entrypoint = records::EscapeUtf8(m.entrypoint);
  m.driver_address = records::EscapeUtf8(m.driver_address);
  if (!m.binary_hash.empty() && !IsContentHash(m.binary_hash)) {
    return Status::InvalidArgument(
        "a job's executable is named by its SHA-256 (64 lowercase hex characters)");
  }
  return Status::Ok();
}

void JobManager::OnRegister(const proto::JobMsg& msg, double now) {
  auto it = jobs_.find(msg.job_id);
  // Cumulative: a count never goes down, even from a heartbeat that overtook another.
  if (it != jobs_.end())
    it->second.info.tasks_submitted =
        std::max(it->second.info.tasks_submitted, msg.tasks_submitted);
  if (!msg.alive) {  // the driver's goodbye: acknowledged once the job's resources are free
    if (it != jobs_.end() && it->second.alive) End(msg.job_id, "the driver shut down");
    return ctx_.Ack(msg.reply_to, msg.request_id);
  }
  if (it != jobs_.end()) {  // a heartbeat, or a resent registration
    if (it->second.alive) it->second.last_seen = now;
    return ctx_.Ack(msg.reply_to, msg.request_id);
  }
  proto::JobMsg m = msg;
  if (Status s = Admit(m); !s.ok())
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kConfigError, s.message());
  if (!m.binary_hash.empty() && !HasBinary(m.binary_hash)) {
    // Nodes may need this executable: ask the driver for it before the job starts.
    ExpectUpload(m.job_id, m.binary_hash);
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kNeedBinary,
                    "upload " + m.binary_hash);
  }
  awaiting_upload_.erase(m.job_id);
  JobEntry& j = jobs_[m.job_id];
  j.info = m;
  j.last_seen = now;
  j.start_time = WallSeconds();
  LOG_INFO("job " + Hex(m.job_id) + " started by pid " + std::to_string(m.pid) + " (" +
           m.entrypoint + ")");
  Persist(m.job_id);
  ctx_.Ack(m.reply_to, m.request_id);
}

bool JobManager::HasBinary(const std::string& hash) const {
  return access(BinaryPath(hash).c_str(), R_OK) == 0;
}

void JobManager::ExpectUpload(const std::string& key, const std::string& hash) {
  if (awaiting_upload_.size() >= kMaxAwaitingUploads && !awaiting_upload_.count(key))
    awaiting_upload_.erase(awaiting_upload_.begin());
  awaiting_upload_[key] = hash;
}

std::string JobManager::DriverAddress(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && it->second.alive ? it->second.info.driver_address : "";
}

std::string JobManager::BinaryPath(const std::string& hash) const {
  if (!IsContentHash(hash)) return "/nonexistent";
  return binary_dir_ + "/" + hash;
}

Status JobManager::StoreBinary(const std::string& path, const std::string& bytes) const {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) return Status::Internal("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Internal(ec.message());
  LOG_INFO("stored " + std::to_string(bytes.size()) + " bytes as " + path);
  return Status::Ok();
}

std::string JobManager::PackagePath(const std::string& hash) const {
  if (!IsContentHash(hash)) return "/nonexistent";
  return binary_dir_ + "/working_dirs/" + hash;
}

bool JobManager::HasPackage(const std::string& hash) const {
  return access(PackagePath(hash).c_str(), R_OK) == 0;
}

void JobManager::OnPutPackage(const proto::BinaryMsg& m, const std::string& bytes) {
  // Data that no node runs: stored for any peer of the cluster (docs/security.md).
  if (!IsContentHash(m.hash) || bytes.size() > folder_pack::kMaxPackageBytes) {
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kConfigError,
                    "a working_dir package is named by its SHA-256 and holds at most " +
                        std::to_string(folder_pack::kMaxPackageBytes >> 20) + " MiB");
  }
  if (bytes.empty()) {  // no package is empty: a submitter asks whether the head keeps it
    if (!TouchPackage(m.hash)) {
      return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kNeedBinary,
                      "upload " + m.hash);
    }
    return ctx_.Ack(m.reply_to, m.request_id);
  }
  std::string got = HashBytes(bytes);
  if (got != m.hash) {
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kError,
                    "the uploaded package's hash is " + got + ", not " + m.hash);
  }
  Status stored = Status::Ok();
  if (!TouchPackage(m.hash)) {
    stored = StoreBinary(PackagePath(m.hash), bytes);
    if (stored.ok()) EvictPackages(m.hash);
  }
  ctx_.Ack(m.reply_to, m.request_id, stored.ok(),
           stored.ok() ? proto::ErrorKind::kNone : proto::ErrorKind::kError, stored.message());
}

bool JobManager::TouchPackage(const std::string& hash) const {
  // Its modification time is when it was last stored, asked about or fetched: the store
  // forgets the package used longest ago first.
  return HasPackage(hash) && utimensat(AT_FDCWD, PackagePath(hash).c_str(), nullptr, 0) == 0;
}

void JobManager::EvictPackages(const std::string& keep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::tuple<fs::file_time_type, uint64_t, fs::path>> files;
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(binary_dir_ + "/working_dirs", ec)) {
    if (!e.is_regular_file(ec) || !IsContentHash(e.path().filename().string())) continue;
    uint64_t size = e.file_size(ec);
    total += size;
    files.emplace_back(e.last_write_time(ec), size, e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& [when, size, path] : files) {
    if (total <= package_store_bytes_) break;
    if (path.filename() == keep) continue;
    if (fs::remove(path, ec)) {
      total -= size;
      LOG_INFO("forgot the working_dir package " + path.filename().string() +
               " (the store is over " + std::to_string(package_store_bytes_ >> 20) + " MiB)");
    }
  }
}

void JobManager::OnPutBinary(const proto::BinaryMsg& m, const std::string& bytes) {
  if (m.package) return OnPutPackage(m, bytes);
  auto awaited = awaiting_upload_.find(m.job_id);
  if (!IsContentHash(m.hash) || awaited == awaiting_upload_.end() || awaited->second != m.hash) {
    LOG_WARN("refused an executable upload (hash " + records::EscapeUtf8(m.hash.substr(0, 80)) +
             ") that no registering job asked for");
    return ctx_.Ack(
        m.reply_to, m.request_id, false, proto::ErrorKind::kConfigError,
        "the head stores only the executable a registering job named (register the job first)");
  }
  std::string got = HashBytes(bytes);
  if (got != m.hash) {
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kError,
                    "the uploaded binary's hash is " + got + ", not " + m.hash);
  }
  Status stored = StoreBinary(BinaryPath(m.hash), bytes);
  ctx_.Ack(m.reply_to, m.request_id, stored.ok(),
           stored.ok() ? proto::ErrorKind::kNone : proto::ErrorKind::kError, stored.message());
}

void JobManager::OnFetchBinary(const proto::BinaryMsg& m) const {
  proto::BinaryMsg reply{m.request_id, "", m.hash, "", true, ""};
  reply.package = m.package;
  std::string name = records::EscapeUtf8(m.hash.substr(0, 80));
  // A working_dir's package is data, never run: served to any node that names it.
  if (!m.package && !VouchesFor(m.hash)) {
    reply.ok = false;
    reply.message = "no job registered an executable with hash " + name;
    return ctx_.outbox->Send(m.reply_to, MsgType::kBinaryReply, reply);
  }
  if (!m.package && !m.want_bytes)
    return ctx_.outbox->Send(m.reply_to, MsgType::kBinaryReply, reply);
  if (m.package) (void)TouchPackage(m.hash);
  std::ifstream in(m.package ? PackagePath(m.hash) : BinaryPath(m.hash), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  reply.ok = bool(in) || !bytes.empty();
  if (!reply.ok)
    reply.message = (m.package ? "the head keeps no working_dir with hash "
                               : "the head has no executable with hash ") +
                    name;
  if (ctx_.outbox->TrySend(m.reply_to, MsgType::kBinaryReply, reply, &bytes).ok()) return;
  // Its queue to that node is full: said at once, so that the work waiting fails now.
  reply.ok = false;
  reply.message = "the head could not queue " + std::to_string(bytes.size()) +
                  " bytes to this node now (its queue is full)";
  ctx_.outbox->Send(m.reply_to, MsgType::kBinaryReply, reply);
}

void JobManager::DriverDied(const std::string& job_id, const std::string& cause) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second.alive) End(job_id, "the driver died: " + cause);
}

void JobManager::End(const std::string& job_id, const std::string& cause) {
  JobEntry& j = jobs_[job_id];
  j.alive = false;
  j.end_cause = cause;
  j.end_time = WallSeconds();
  LOG_INFO("job " + Hex(job_id) + " ended: " + cause);
  if (on_ended_) on_ended_(job_id, cause);
  Persist(job_id);
}

Status JobManager::CheckExecutable(const std::string& job_id, const std::vector<std::string>& argv,
                                   const std::string& hash) const {
  if (job_id.find_first_not_of('\0') == std::string::npos) {
    // Work submitted from inside a worker (it has no job of its own): the node's own worker
    // program (no hash), or an executable some job registered.
    if (hash.empty() || VouchesFor(hash)) return Status::Ok();
    return Status::PermissionDenied("no job registered the executable " +
                                    records::EscapeUtf8(hash.substr(0, 80)));
  }
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) {
    return Status::PermissionDenied("job " + Hex(job_id) +
                                    " is not registered with this head; "
                                    "only a registered job's executable is run");
  }
  const proto::JobMsg& info = job->second.info;
  if (hash != info.binary_hash) {
    return Status::PermissionDenied(
        "the executable " + (hash.empty() ? std::string("(none)") : hash) + " is not the one job " +
        Hex(job_id) + " registered (" +
        (info.binary_hash.empty() ? std::string("none") : info.binary_hash) + ")");
  }
  if (!argv.empty() && records::EscapeUtf8(argv[0]) != info.entrypoint) {
    return Status::PermissionDenied("the executable " + records::EscapeUtf8(argv[0]) +
                                    " is not the one job " + Hex(job_id) + " registered (" +
                                    info.entrypoint + ")");
  }
  return Status::Ok();
}

bool JobManager::VouchesFor(const std::string& hash) const {
  if (!IsContentHash(hash)) return false;
  if (vouched_.count(hash)) return true;
  for (const auto& [id, j] : jobs_)
    if (j.info.binary_hash == hash) return true;
  return false;
}

bool JobManager::IsAlive(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it != jobs_.end() && it->second.alive;
}

bool JobManager::Forget(const std::string& job_hex) {
  std::string id = UniqueId::FromHex(job_hex).Binary();
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return true;
  if (it->second.alive) return false;
  jobs_.erase(it);
  awaiting_upload_.erase(id);
  return true;
}

void JobManager::Persist(const std::string& job_id) {
  const JobEntry& j = jobs_[job_id];
  records::JobRecord r{j.info, j.alive, j.start_time, j.end_cause, j.end_time};
  r.info.job_id = job_id;
  ctx_.store->Put("jobs", Hex(job_id), records::JobRecordJson(r));
  ctx_.Publish("jobs", Hex(job_id), j.alive ? "RUNNING" : "FINISHED");
}

void JobManager::Restore(const TableRecords& records, double now) {
  for (const auto& [key, text] : records) {
    auto r = records::ParseJobRecord(text);
    if (!RecordUsable(r.status(), "job", key)) continue;
    if (!FiledUnderItsId(Hex(r->info.job_id), "a job", key)) continue;
    if (!r->info.binary_hash.empty() && !IsContentHash(r->info.binary_hash)) {
      LOG_WARN("skipping job record " + records::EscapeUtf8(key) +
               ": its executable hash is not a SHA-256");
      continue;
    }
    JobEntry& j = jobs_[r->info.job_id];
    j.info = r->info;
    j.alive = r->running;
    j.start_time = r->start_time;
    j.end_cause = r->end_cause;
    j.end_time = r->running ? 0 : r->end_time;
    j.last_seen = now;  // a grace period for its driver to reconnect
  }
}

}  // namespace orrery::scheduler
