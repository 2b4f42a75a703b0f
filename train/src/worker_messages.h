// What the trainer (in the driver) and its worker actors say to each other: the arguments
// and results of the TrainWorker actor's methods, as msgpack structs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "orrery/api/serialize.h"

namespace orrery::train {

// TrainWorker::Info(): where the worker runs.
struct WorkerInfoMsg {
  std::string node_id;
  std::string node_ip;
  std::string hostname;
  int pid = 0;
  std::map<std::string, std::vector<int>> accelerator_ids;
  std::string collective_address;  // its collective group's receiving socket
  int free_port = 0;               // a port it holds for MASTER_PORT (PortReservation)
  MSGPACK_DEFINE(node_id, node_ip, hostname, pid, accelerator_ids, collective_address, free_port);
};

// TrainWorker::Start(): everything the loop's Context needs.
struct WorkerStartMsg {
  std::string loop_name;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string device;
  std::map<std::string, std::string> env;
  std::vector<std::string> peers;  // collective addresses by rank
  double timeout_s = 1800;
  std::string config_json;
  std::string checkpoint_path;  // resume from here; "" for a fresh start
  std::string run_name;
  std::string run_path;
  int64_t report_offset = 0;  // reports of earlier attempts: numbering goes on from here
  std::vector<int> mesh_shape;
  std::vector<std::string> mesh_axis_names;
  std::vector<int> mesh_local_device_ids;
  std::vector<std::vector<int>> mesh_local_coordinates;
  // An Entrypoint instead of a registered loop (loop_name is then ""): its command line,
  // its own environment and working directory (entrypoint_process.h).
  std::vector<std::string> entrypoint_argv;
  std::map<std::string, std::string> entrypoint_env;
  std::string entrypoint_dir;
  MSGPACK_DEFINE(loop_name, rank, world_size, local_rank, local_world_size, node_rank, device, env,
                 peers, timeout_s, config_json, checkpoint_path, run_name, run_path, report_offset,
                 mesh_shape, mesh_axis_names, mesh_local_device_ids, mesh_local_coordinates,
                 entrypoint_argv, entrypoint_env, entrypoint_dir);
};

struct ReportMsg {
  int64_t index = 0;  // over the whole run, from 0
  std::map<std::string, double> metrics;
  std::string checkpoint_path;  // the persisted copy; "" when none
  double time = 0;              // seconds since the epoch, when reported
  MSGPACK_DEFINE(index, metrics, checkpoint_path, time);
};

// TrainWorker::Poll(): reports since the caller's last one, and whether the loop ended.
struct PollReplyMsg {
  std::vector<ReportMsg> reports;
  bool done = false;    // the loop returned or threw
  bool failed = false;  // it threw: error_type and error_message say what
  std::string error_type;
  std::string error_message;
  // An Entrypoint's process failed (exited non-zero, killed, silent): the group restarts
  // for it within max_failures, as for a worker that died.
  bool process_failed = false;
  MSGPACK_DEFINE(reports, done, failed, error_type, error_message, process_failed);
};

}  // namespace orrery::train
