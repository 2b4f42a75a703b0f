#include "train/src/run_record.h"

namespace orrery::train {

std::string RunRecord::ToJson() const {
  nlohmann::json workers_json = nlohmann::json::array();
  for (const auto& w : workers) {
    workers_json.push_back({{"rank", w.rank},
                            {"local_rank", w.local_rank},
                            {"node_rank", w.node_rank},
                            {"node_id", w.node_id},
                            {"node_ip", w.node_ip},
                            {"hostname", w.hostname},
                            {"pid", w.pid},
                            {"device", w.device}});
  }
  nlohmann::json checkpoints_json = nlohmann::json::array();
  for (const auto& c : checkpoints) {
    checkpoints_json.push_back(
        {{"iteration", c.index + 1}, {"path", c.path}, {"metrics", c.metrics}});
  }
  nlohmann::json j{{"id", id},
                   {"name", name},
                   {"status", status},
                   {"loop", loop},
                   {"path", path},
                   {"backend", backend},
                   {"start_time", start_time},
                   {"end_time", end_time},
                   {"num_failures", num_failures},
                   {"iterations", iterations},
                   {"config", config},
                   {"workers", workers_json},
                   {"checkpoints", checkpoints_json},
                   {"latest_metrics", nlohmann::json(latest_metrics)},
                   {"error_kind", proto::ErrorKindName(error_kind)},
                   {"error", error}};
  return j.dump();
}

nlohmann::json ConfigJson(const ScalingConfig& s, const TorchConfig& t, const RunConfig& r,
                          const nlohmann::json& loop_config) {
  const auto& x = t.xla_spmd_config;
  return {{"scaling",
           {{"num_workers", s.num_workers},
            {"use_gpu", s.use_gpu},
            {"use_tpu", s.use_tpu},
            {"resources_per_worker", s.resources_per_worker},
            {"topology", s.topology},
            {"accelerator_type", s.accelerator_type},
            {"placement_strategy", s.placement_strategy},
            {"label_selector", s.label_selector}}},
          {"torch",
           {{"backend", t.backend},
            {"timeout_s", t.timeout_s},
            {"xla_spmd_config",
             {{"mesh_shape", x.mesh_shape},
              {"data_parallel_size", x.data_parallel_size},
              {"model_parallel_size", x.model_parallel_size},
              {"partitioning_mode", x.partitioning_mode}}}}},
          {"run",
           {{"name", r.name},
            {"storage_path", r.storage_path},
            {"max_failures", r.failure_config.max_failures},
            {"num_to_keep", r.checkpoint_config.num_to_keep},
            {"score_attribute", r.checkpoint_config.score_attribute},
            {"order", r.checkpoint_config.order},
            {"reservation_timeout_s", r.reservation_timeout_s}}},
          {"train_loop_config", loop_config}};
}

nlohmann::json MetricsEntry(int64_t iteration, const Metrics& metrics, double time,
                            const std::string& checkpoint) {
  return {{"iteration", std::to_string(iteration)},
          {"time", std::to_string(time)},
          {"metrics", nlohmann::json(metrics).dump()},
          {"checkpoint", checkpoint}};
}

}  // namespace orrery::train
