// HeadService: jobs (drivers), the records drivers ask the head to write (train_runs and
// their metrics streams), and driver executables kept for nodes that lack them.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/src/file_hash.h"
#include "core/src/log.h"
#include "core/src/rate_limit.h"
#include "core/src/security.h"
#include "scheduler/src/head_internal.h"
#include "scheduler/src/head_service.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {
// At most this many jobs may be waiting to upload their executable at once (each entry is a
// job that answered NeedBinary and has not uploaded yet).
constexpr size_t kMaxAwaitingUploads = 1024;
RateLimitedLog spoofed_log;
}  // namespace

// ------------------------------------------------------------------ jobs

void HeadService::OnRegisterJob(const transport::Envelope& env) {
  proto::JobMsg m;
  DECODE_OR_THROW(env, m);
  auto it = jobs_.find(m.job_id);
  if (!m.alive) {  // the driver's goodbye: acknowledged once the job's resources are free
    if (it != jobs_.end() && it->second.alive) JobDied(m.job_id, "the driver shut down");
    ReplyAck(m.reply_to, m.request_id, true, "", "");
    return;
  }
  if (it == jobs_.end()) {
    // Free text from the driver (its path may be any bytes) is kept with invalid UTF-8
    // escaped; the namespace is a name and must be UTF-8.
    if (Status s = records::CheckUtf8("the job's namespace", m.namespace_); !s.ok()) {
      return ReplyAck(m.reply_to, m.request_id, false, "ConfigError", s.message());
    }
    m.entrypoint = records::EscapeUtf8(m.entrypoint);
    m.driver_address = records::EscapeUtf8(m.driver_address);
    if (!m.binary_hash.empty() && !IsContentHash(m.binary_hash)) {
      return ReplyAck(m.reply_to, m.request_id, false, "ConfigError",
                      "a job's executable is named by its SHA-256 (64 lowercase hex characters)");
    }
  }
  if (it != jobs_.end()) {  // a heartbeat, or a resent registration
    if (it->second.alive) it->second.last_seen = Now();
    ReplyAck(m.reply_to, m.request_id, true, "", "");
    return;
  }
  if (!m.binary_hash.empty() && access(BinaryPath(m.binary_hash).c_str(), R_OK) != 0) {
    // Nodes may need this executable: ask the driver for it before the job starts.
    if (awaiting_upload_.size() >= kMaxAwaitingUploads && !awaiting_upload_.count(m.job_id)) {
      awaiting_upload_.erase(awaiting_upload_.begin());
    }
    awaiting_upload_[m.job_id] = m.binary_hash;
    ReplyAck(m.reply_to, m.request_id, false, "NeedBinary", "upload " + m.binary_hash);
    return;
  }
  awaiting_upload_.erase(m.job_id);
  JobRec& j = jobs_[m.job_id];
  j.info = m;
  j.last_seen = Now();
  j.start_time = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()) /
                 1000.0;
  LOG_INFO("job " + Hex(m.job_id) + " started by pid " + std::to_string(m.pid) + " (" +
           m.entrypoint + ")");
  PersistJob(m.job_id);
  ReplyAck(m.reply_to, m.request_id, true, "", "");
}

// ------------------------------------------------------------------ driver-written records

void HeadService::OnPutRecord(const transport::Envelope& env) {
  proto::RecordMsg m;
  DECODE_OR_THROW(env, m);
  // Drivers may write only the tables the head does not own itself.
  if (m.table != "train_runs") {
    return ReplyAck(m.reply_to, m.request_id, false, "Error",
                    "the head keeps no driver records in table \"" + m.table + "\"");
  }
  bool key_ok = !m.key.empty() && m.key.size() <= 64;
  for (char c : m.key) key_ok = key_ok && std::isxdigit(static_cast<unsigned char>(c));
  if (!key_ok)
    return ReplyAck(m.reply_to, m.request_id, false, "Error", "a record key is 1 to 64 hex digits");
  nlohmann::json record, entry;
  try {
    if (!m.json.empty()) record = nlohmann::json::parse(m.json);
    if (m.stream_index >= 0) entry = nlohmann::json::parse(m.stream_json);
  } catch (const std::exception& e) {
    return ReplyAck(m.reply_to, m.request_id, false, "Error",
                    std::string("a record must be JSON: ") + e.what());
  }
  if ((!m.json.empty() && !record.is_object()) || (m.stream_index >= 0 && !entry.is_object())) {
    return ReplyAck(m.reply_to, m.request_id, false, "Error",
                    "a record and a stream entry must be JSON objects");
  }
  if (m.stream_index >= 0) {
    auto [it, fresh] = stream_written_.emplace(m.key, -1);
    if (m.stream_index > it->second) {  // a resent request appends nothing twice
      it->second = m.stream_index;
      StateStore::StreamEntry fields;
      for (auto& [k, v] : entry.items())
        fields.emplace_back(k, v.is_string() ? v.get<std::string>() : records::Dump(v));
      options_.store->StreamAdd("train:" + m.key + ":metrics", m.stream_index, fields);
    }
  }
  if (!m.json.empty()) {
    options_.store->Put(m.table, m.key, m.json);
    auto status = record.find("status");  // any JSON type: only a string is announced
    Publish(m.table, m.key,
            status != record.end() && status->is_string() ? status->get<std::string>() : "");
  }
  // Acknowledged only once the store has the record and the entry: a driver that got its
  // ack may forget them, since a head restart can no longer lose them. The ack is sent from
  // whichever thread learns it (the store's writer), with nothing of the head's captured.
  if (m.reply_to.empty()) return;
  options_.store->WhenWritten([to = m.reply_to, id = m.request_id] {
    transport::Send(to, MsgType::kAck, proto::AckMsg{id, true, "", ""});
  });
}

std::string HeadService::BinaryPath(const std::string& hash) const {
  if (!IsContentHash(hash)) return "/nonexistent";
  return options_.binary_dir + "/" + hash;
}

Status HeadService::CheckExecutable(const std::string& job_id, const std::vector<std::string>& argv,
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

bool HeadService::VouchesFor(const std::string& hash) const {
  if (!IsContentHash(hash)) return false;
  for (const auto& [id, j] : jobs_)
    if (j.info.binary_hash == hash) return true;
  return false;
}

bool HeadService::FromNode(const std::string& node_id, const std::string& secret, const char* what,
                           bool adopt) {
  auto known = node_secrets_.find(node_id);
  bool ok = false;
  if (secret.empty() || secret.size() > 256) {
    ok = false;
  } else if (known != node_secrets_.end()) {
    ok = security::SecretEquals(known->second, secret);
  } else if (adopt) {
    node_secrets_[node_id] = secret;
    ok = true;
  }
  if (!ok) {
    uint64_t suppressed = 0;
    if (spoofed_log.ShouldLog(&suppressed)) {
      LOG_WARN(std::string("dropped a ") + what + " for node " + Hex(node_id) +
               " that did not come from that node (its node secret does not match)" +
               RateLimitedLog::More(suppressed));
    }
  }
  return ok;
}

void HeadService::OnPutBinary(const transport::Envelope& env) {
  proto::BinaryMsg m;
  DECODE_OR_THROW(env, m);
  auto awaited = awaiting_upload_.find(m.job_id);
  if (!IsContentHash(m.hash) || awaited == awaiting_upload_.end() || awaited->second != m.hash) {
    LOG_WARN("refused an executable upload (hash " + records::EscapeUtf8(m.hash.substr(0, 80)) +
             ") that no registering job asked for");
    return ReplyAck(
        m.reply_to, m.request_id, false, "ConfigError",
        "the head stores only the executable a registering job named (register the job first)");
  }
  std::string bytes = env.PayloadString();
  std::string got = HashBytes(bytes);
  if (got != m.hash) {
    return ReplyAck(m.reply_to, m.request_id, false, "Error",
                    "the uploaded binary's hash is " + got + ", not " + m.hash);
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.binary_dir, ec);
  std::string path = BinaryPath(m.hash), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) return ReplyAck(m.reply_to, m.request_id, false, "Error", "cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  LOG_INFO("stored a driver executable (" + std::to_string(bytes.size()) + " bytes) as " + path);
  ReplyAck(m.reply_to, m.request_id, !ec, ec ? "Error" : "", ec ? ec.message() : "");
}

void HeadService::OnFetchBinary(const transport::Envelope& env) {
  proto::BinaryMsg m;
  DECODE_OR_THROW(env, m);
  proto::BinaryMsg reply{m.request_id, "", m.hash, "", true, ""};
  if (!VouchesFor(m.hash)) {
    reply.ok = false;
    reply.message =
        "no job registered an executable with hash " + records::EscapeUtf8(m.hash.substr(0, 80));
    return transport::Send(m.reply_to, MsgType::kBinaryReply, reply);
  }
  if (!m.want_bytes) return transport::Send(m.reply_to, MsgType::kBinaryReply, reply);
  std::ifstream in(BinaryPath(m.hash), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  reply.ok = bool(in) || !bytes.empty();
  if (!reply.ok) reply.message = "the head has no executable with hash " + m.hash;
  transport::Send(m.reply_to, MsgType::kBinaryReply, reply, &bytes);
}

void HeadService::JobDied(const std::string& job_id, const std::string& cause) {
  JobRec& j = jobs_[job_id];
  j.alive = false;
  j.end_cause = cause;
  LOG_INFO("job " + Hex(job_id) + " ended: " + cause);
  for (auto& [id, a] : actors_) {
    if (a.spec.job_id != job_id || a.spec.options.lifetime == kDetachedLifetime) continue;
    if (a.state == proto::ActorState::kDead) continue;
    a.kill_requested = true;
    if (!a.spec.options.name.empty()) {
      // The name is free at once: the next run of the same program may take it before the
      // node has reported this actor's worker gone.
      auto named = named_.find({a.spec.options.namespace_, a.spec.options.name});
      if (named != named_.end() && named->second == a.spec.actor_id) named_.erase(named);
    }
    if (a.node >= 0) {
      transport::Send(
          node_addresses_[a.node], MsgType::kKillWorker,
          proto::KillWorkerMsg{a.spec.actor_id, "", "its owner (job " + Hex(job_id) + ") is gone"});
    } else {
      ErasePending(PendingKind::kActor, id);
      ActorDied(a, "ActorDiedError", "its owner (job " + Hex(job_id) + ") is gone", false);
    }
  }
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.request.job_id != job_id) {
      ++it;
      continue;
    }
    if (it->second.node >= 0) {
      Release(it->second.node, it->second.request.placement_group, it->second.bundle,
              it->second.request.resources);
      transport::Send(node_addresses_[it->second.node], MsgType::kReleaseLease,
                      proto::ReleaseLeaseMsg{it->first});
    } else {
      ErasePending(PendingKind::kLease, it->first);
    }
    ForgetLease(it->first);
    it = leases_.erase(it);
  }
  PersistJob(job_id);
  ScheduleAll();
}

}  // namespace orrery::scheduler
