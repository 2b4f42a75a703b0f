// The TPU model (docs/accelerators.md "The TPU model"): generations, pod types, topologies
// and the arithmetic between them, plus what a worker process owning some chips is told.
//
// A pure library: no I/O, no environment reads, no clock. Detection (core/internal/accelerators.h)
// reads the host; this header only interprets the strings it found, and validates what users
// ask for (Train's use_tpu, topology, accelerator_type) before anything is reserved.
//
// Errors are Status InvalidArgument whose message names the offending input and says what to
// write instead.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "orrery/status.h"

namespace orrery::tpu {

enum class Generation { kV2, kV3, kV4, kV5p, kV5e /* v5litepod */, kV6e, kV7x };

inline constexpr std::array<Generation, 7> kAllGenerations = {
    Generation::kV2,  Generation::kV3,  Generation::kV4, Generation::kV5p,
    Generation::kV5e, Generation::kV6e, Generation::kV7x};

// One row of the arithmetic table (docs/accelerators.md "The TPU model").
struct GenerationInfo {
  int cores_per_chip = 0;  // 2, or 1 for v5litepod and v6e
  int chips_per_host = 0;  // of a multi-host slice (4); see ChipsPerHost for one host
  int64_t hbm_bytes_per_chip = 0;
  int topology_dims = 0;  // 2 (AxB) or 3 (AxBxC)
};
GenerationInfo GetGenerationInfo(Generation gen);

int CoresPerChip(Generation gen);
int64_t HbmBytesPerChip(Generation gen);
// 2 or 3: the number of dimensions of this generation's topologies.
int TopologyDims(Generation gen);

// "v2", "v3", "v4", "v5p", "v5litepod", "v6e", "v7x": the prefix of a pod type.
std::string GenerationPrefix(Generation gen);
// "TPU-V2" ... "TPU-V5LITEPOD", "TPU-V6E", "TPU-V7X": the accelerator_type label value.
std::string AcceleratorTypeName(Generation gen);

// Accepts TPU-V2, TPU-V3, TPU-V4, TPU-V5P, TPU-V5LITEPOD (also TPU-V5E), TPU-V6E, TPU-V7X,
// in any case.
Result<Generation> ParseAcceleratorType(const std::string& accelerator_type);

// A pod type as GCE and GKE spell it (TPU_ACCELERATOR_TYPE): "<generation>-<count>".
struct PodType {
  Generation generation = Generation::kV4;
  int count = 0;     // the number in the name: cores for 2-core generations, else chips
  std::string name;  // normalised: "v4-16", "v7x-8" (from "tpu7x-8"), "v5litepod-8"

  bool operator==(const PodType&) const = default;
};

// Matches ^(v|tpu)\d+[a-zA-Z]*-\d+$ with a known generation and a count > 0. A leading "tpu"
// becomes "v" (tpu7x-8 -> v7x-8) and "v5e" becomes "v5litepod". Only the syntax and the
// generation are checked here; SliceFromPodType checks that the count makes a real slice.
Result<PodType> ParsePodType(const std::string& pod_type);

// A slice's physical shape in chips, e.g. {2, 2, 2}.
struct Topology {
  std::vector<int> dims;
  // Set when the input was accepted but not as written (a 2-D topology for a 3-D
  // generation read as AxBx1); meant for the user's log. Empty otherwise.
  std::string warning;

  int64_t Chips() const;         // product of dims
  std::string ToString() const;  // "2x2x1"
  bool operator==(const Topology&) const = default;
};

// The topologies a generation allows (docs/accelerators.md), in the canonical spelling
// (what hosts advertise in orrery.io/tpu-topology, so the spelling matters for matching):
//   v2, v3:          AxB, A <= B, both powers of two from 4 up to 16 (v2) / 32 (v3)
//   v4, v5p, v7x:    2x2x1, 2x2x2, 2x2x4, 2x4x4, and AxBxC with A <= B <= C multiples of 4,
//                    componentwise at most 12x12x16 (v4), 16x16x24 (v5p), 8x16x16 (v7x)
//   v5litepod, v6e:  1x1 2x2 2x4 2x8 4x4 4x8 8x8 8x16 16x16
// Ordered by chip count, then by spelling.
std::vector<Topology> ValidTopologies(Generation gen);

// Parses "AxB" or "AxBxC" (positive integers, lowercase x) and checks it against
// ValidTopologies(gen). A 2-D topology for a 3-D generation ("2x2" with TPU-V4) is read as
// AxBx1 when that is valid, with `warning` set.
Result<Topology> ParseTopology(const std::string& topology, Generation gen);

// Chips on each host of a slice of this topology: the whole slice for the single-host
// v5litepod/v6e topologies 1x1, 2x2, 2x4 (1, 4, 8 chips); else the generation's table value.
int ChipsPerHost(Generation gen, const Topology& topology);

struct SliceShape {
  Generation gen = Generation::kV4;
  Topology topo;
  int chips = 0;  // product of the topology
  int cores = 0;  // chips x cores per chip
  int hosts = 0;  // ceil(chips / chips_per_host)
  int chips_per_host = 0;
  std::string pod_type;  // "v4-16": chips x cores/chip, or chips for v5litepod and v6e

  bool operator==(const SliceShape&) const = default;
};

// The slice a (generation, topology) pair describes: 2x2x2 + v4 -> v4-16, 8 chips, 2 hosts.
// `chips_per_host` overrides the default host size when the caller knows better (a v6e 2x4
// is one 8-chip host unless told otherwise: docs/accelerators.md); 0 means the default. An
// override must be positive and divide the slice's chips.
Result<SliceShape> SliceFromTopology(Generation gen, const std::string& topology,
                                     int chips_per_host = 0);

// The inverse: v4-16 -> 8 chips as 2x2x2 on 2 hosts of 4; v6e-8 -> 2x4 on one host;
// v6e-16 -> 4x4 on 4 hosts. When several topologies have the pod's chip count, the most
// compact one is chosen (smallest largest dimension, then smallest sum): v4-512 -> 4x8x8.
// A count that no valid topology has (v4-24, v6e-2, odd counts of 2-core generations) is
// InvalidArgument listing valid pod types.
Result<SliceShape> SliceFromPodType(const std::string& pod_type);

// A process may own 1, 2, 4 or 8 chips when that divides the host's chips, or all of the
// host's chips (docs/accelerators.md "Devices per worker process").
Status ValidateChipsPerProcess(int chips, int chips_per_host);

// Environment for a process owning `chips` (indices on its host) of a `chips_per_host` host:
// TPU_VISIBLE_CHIPS="0,1,..." always; for 1 chip TPU_CHIPS_PER_PROCESS_BOUNDS=1,1,1 and
// TPU_PROCESS_BOUNDS=1,1,1; for 2 chips 1,2,1 and 1,1,1; no bounds variables for all of the
// host's chips, nor for other counts (the runtime's defaults apply). The caller validates the
// count with ValidateChipsPerProcess first; chip indices are written in the order given.
std::map<std::string, std::string> VisibleChipsEnv(const std::vector<int>& chips,
                                                   int chips_per_host);

// A device mesh for SPMD over `num_slices` slices of `slice`: the topology's dimensions, with
// a leading slice axis when num_slices > 1 ({2, 2, 2} -> {3, 2, 2, 2} for 3 slices). Its
// product is the global device count (chips x slices). Empty when num_slices < 1.
std::vector<int> DefaultMeshShape(const SliceShape& slice, int num_slices);

}  // namespace orrery::tpu
