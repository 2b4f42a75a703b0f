// placement_group: reserve a set of resource bundles together, then schedule actors into
// the bundles. On a one-node cluster PACK and STRICT_PACK put every bundle on that node; a
// bundle no node can hold keeps the group pending (Wait returns false) until it is removed.
//
//   ./placement_group
#include <cstdio>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"
#include "orrery/resources.h"

class Worker {
 public:
  explicit Worker(int rank) : rank_(rank) {}
  static Worker* Create(int rank) { return new Worker(rank); }
  std::string Hello() const { return "worker " + std::to_string(rank_) + " reporting"; }

 private:
  int rank_;
};

ORRERY_REMOTE(Worker::Create, &Worker::Hello);

namespace {

using orrery_examples::Check;

double Cpu(const orrery::Resources& r) {
  auto it = r.find("CPU");
  return it == r.end() ? 0 : it->second;
}

bool Run() {
  bool ok = true;
  std::printf("the cluster:\n");
  for (const orrery::NodeInfo& node : orrery::Nodes()) {
    std::printf("  node %s at %s: total %s\n", node.node_id.Hex().substr(0, 8).c_str(),
                node.address.c_str(), orrery::ToString(node.total).c_str());
  }
  double cpus = Cpu(orrery::ClusterResources());

  std::printf("reserve two bundles of one CPU each (STRICT_PACK):\n");
  orrery::PlacementGroup pg = orrery::CreatePlacementGroup({
      .name = "two_slots",
      .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
      .strategy = orrery::PlacementStrategy::STRICT_PACK,
  });
  ok &= Check(pg.Wait(/*timeout_seconds=*/30), "the group is ready");
  std::printf("  available now: %s (of %g CPUs)\n",
              orrery::ToString(orrery::AvailableResources()).c_str(), cpus);

  std::printf("one actor per bundle:\n");
  std::vector<orrery::ActorHandle<Worker>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(orrery::Actor(Worker::Create)
                          .SetResources({{"CPU", 1}})
                          .SetPlacementGroup(pg, i)
                          .Remote(i));
  }
  for (auto& w : workers) {
    std::string reply = *orrery::Get(w.Task(&Worker::Hello).Remote());
    ok &= Check(reply.rfind("worker", 0) == 0, reply);
  }
  for (auto& w : workers) w.Kill();
  orrery::RemovePlacementGroup(pg.Id());
  std::printf("  removed the group\n");

  std::printf("a bundle bigger than any node:\n");
  orrery::PlacementGroup too_big = orrery::CreatePlacementGroup({
      .name = "too_big",
      .bundles = {{{"CPU", 1024}}},
      .strategy = orrery::PlacementStrategy::PACK,
  });
  ok &= Check(!too_big.Wait(1.0), "Wait(1 s) returns false: the group stays pending");
  orrery::RemovePlacementGroup(too_big.Id());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Offer four CPUs whatever the machine has, so the example runs the same everywhere.
  orrery::Config config;
  config.num_cpus = 4;
  orrery::Init(config, argc, argv);
  return orrery_examples::RunThenShutdown("placement_group", Run);
}
