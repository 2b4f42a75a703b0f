// Node labels that more than one module reads or writes (docs/accelerators.md "What a node
// advertises"), and label selectors: what a demand's label_selector asks of a node's labels.
#pragma once

#include <string>

#include "orrery/config.h"

namespace orrery {

// What accelerator detection (core/internal/accelerators.h) puts on a node.
inline constexpr const char* kAcceleratorTypeLabel = "orrery.io/accelerator-type";
inline constexpr const char* kTpuPodTypeLabel = "orrery.io/tpu-pod-type";
inline constexpr const char* kTpuTopologyLabel = "orrery.io/tpu-topology";
inline constexpr const char* kTpuSliceNameLabel = "orrery.io/tpu-slice-name";
inline constexpr const char* kTpuWorkerIdLabel = "orrery.io/tpu-worker-id";

// The value of label `key`, or "" when the node lacks it.
inline std::string LabelValue(const Labels& labels, const std::string& key) {
  auto it = labels.find(key);
  return it == labels.end() ? "" : it->second;
}

// True when `labels` satisfy every entry of `selector`: "key": "value" (equality), or
// "in(a,b)" / "!in(a,b)" on the value (spaces around the items are ignored; !in also holds
// when the node lacks the key). An empty selector matches every node.
bool MatchesSelector(const Labels& labels, const Labels& selector);

}  // namespace orrery
