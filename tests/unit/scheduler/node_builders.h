// Cluster views for the scheduling-policy tests.
#pragma once

#include <utility>

#include "orrery/scheduler/policy.h"

namespace orrery::scheduler::test_nodes {

inline NodeView Node(Resources total, Resources available, Labels labels = {}, bool alive = true) {
  NodeView n;
  n.id = NodeId::Random();
  n.alive = alive;
  n.total = std::move(total);
  n.available = std::move(available);
  n.labels = std::move(labels);
  return n;
}

// A node with everything free.
inline NodeView Idle(Resources total, Labels labels = {}) {
  return Node(total, total, std::move(labels));
}

}  // namespace orrery::scheduler::test_nodes
