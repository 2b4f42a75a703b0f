#include "orrery/tpu.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <utility>

namespace orrery::tpu {

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kGB = 1000 * 1000 * 1000;

// The arithmetic table of docs/accelerators.md "The TPU model". `max_dims` bounds the generated
// topologies (componentwise, in canonical order); v5litepod and v6e have a fixed list instead.
struct Row {
  const char* prefix;
  const char* accelerator_type;
  GenerationInfo info;
  std::vector<int> max_dims;
};

const Row& RowOf(Generation gen) {
  static const Row kRows[] = {
      {"v2", "TPU-V2", {2, 4, 8 * kGiB, 2}, {16, 16}},
      {"v3", "TPU-V3", {2, 4, 16 * kGiB, 2}, {32, 32}},
      {"v4", "TPU-V4", {2, 4, 32 * kGiB, 3}, {12, 12, 16}},
      {"v5p", "TPU-V5P", {2, 4, 95 * kGB, 3}, {16, 16, 24}},
      {"v5litepod", "TPU-V5LITEPOD", {1, 4, 16 * kGB, 2}, {}},
      {"v6e", "TPU-V6E", {1, 4, 32 * kGB, 2}, {}},
      {"v7x", "TPU-V7X", {2, 4, 192 * kGiB, 3}, {8, 16, 16}},
  };
  return kRows[static_cast<std::size_t>(gen)];
}

bool IsLitePod(Generation gen) { return gen == Generation::kV5e || gen == Generation::kV6e; }

const std::vector<std::vector<int>>& LitePodTopologies() {
  static const std::vector<std::vector<int>> kDims = {{1, 1}, {2, 2}, {2, 4},  {2, 8},  {4, 4},
                                                      {4, 8}, {8, 8}, {8, 16}, {16, 16}};
  return kDims;
}

// Single-host topologies of v5litepod/v6e: the whole slice is one host.
bool IsSingleHostLitePod(const std::vector<int>& dims) {
  return dims == std::vector<int>{1, 1} || dims == std::vector<int>{2, 2} ||
         dims == std::vector<int>{2, 4};
}

std::string Join(const std::vector<int>& values, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += sep;
    out += std::to_string(values[i]);
  }
  return out;
}

// Digits only (no sign, no spaces), fitting in an int.
bool ParseNonNegativeInt(std::string_view text, int* out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string GenerationName(Generation gen) {
  return GenerationPrefix(gen) + " (" + AcceleratorTypeName(gen) + ")";
}

// What to write instead, for error messages.
std::string DescribeValidTopologies(Generation gen) {
  const Row& row = RowOf(gen);
  if (row.info.topology_dims == 3) {
    return "2x2x1, 2x2x2, 2x2x4, 2x4x4, or AxBxC with A <= B <= C multiples of 4 up to " +
           Join(row.max_dims, "x") + " (e.g. 4x4x4, 4x4x8)";
  }
  std::string out;
  for (const Topology& t : ValidTopologies(gen)) out += (out.empty() ? "" : ", ") + t.ToString();
  return out;
}

std::string DescribeValidPodTypes(Generation gen) {
  std::vector<int64_t> counts;
  for (const Topology& t : ValidTopologies(gen)) {
    int64_t count = t.Chips() * CoresPerChip(gen);
    if (counts.empty() || counts.back() != count) counts.push_back(count);
  }
  std::string out;
  constexpr std::size_t kShown = 8;
  for (std::size_t i = 0; i < counts.size() && i < kShown; ++i) {
    out += (i > 0 ? ", " : "") + GenerationPrefix(gen) + "-" + std::to_string(counts[i]);
  }
  if (counts.size() > kShown) {
    out += ", ... " + GenerationPrefix(gen) + "-" + std::to_string(counts.back());
  }
  return out;
}

constexpr char kPodTypeExamples[] =
    "write <generation>-<count>, e.g. v4-16, v5p-8, v5litepod-16, v6e-8 or tpu7x-8";

}  // namespace

GenerationInfo GetGenerationInfo(Generation gen) { return RowOf(gen).info; }
int CoresPerChip(Generation gen) { return RowOf(gen).info.cores_per_chip; }
int64_t HbmBytesPerChip(Generation gen) { return RowOf(gen).info.hbm_bytes_per_chip; }
int TopologyDims(Generation gen) { return RowOf(gen).info.topology_dims; }
std::string GenerationPrefix(Generation gen) { return RowOf(gen).prefix; }
std::string AcceleratorTypeName(Generation gen) { return RowOf(gen).accelerator_type; }

Result<Generation> ParseAcceleratorType(const std::string& accelerator_type) {
  std::string upper = accelerator_type;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "TPU-V5E") return Generation::kV5e;
  for (Generation gen : kAllGenerations) {
    if (upper == AcceleratorTypeName(gen)) return gen;
  }
  return Status::InvalidArgument(
      "unknown TPU accelerator type " + Quote(accelerator_type) +
      ": use one of TPU-V2, TPU-V3, TPU-V4, TPU-V5P, TPU-V5LITEPOD (or TPU-V5E), TPU-V6E, "
      "TPU-V7X");
}

Result<PodType> ParsePodType(const std::string& pod_type) {
  // ^(v|tpu)\d+[a-zA-Z]*-\d+$, by hand.
  std::string_view s = pod_type;
  std::size_t pos = 0;
  if (s.substr(0, 3) == "tpu") {
    pos = 3;
  } else if (s.substr(0, 1) == "v") {
    pos = 1;
  }
  std::size_t digits_at = pos;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  std::size_t letters_at = pos;
  while (pos < s.size() && std::isalpha(static_cast<unsigned char>(s[pos]))) ++pos;
  std::size_t dash = pos;
  std::string_view count_text = dash < s.size() ? s.substr(dash + 1) : std::string_view();
  if (digits_at == 0 || letters_at == digits_at || dash >= s.size() || s[dash] != '-' ||
      count_text.empty() || count_text.find_first_not_of("0123456789") != std::string_view::npos) {
    return Status::InvalidArgument("malformed TPU pod type " + Quote(pod_type) + ": " +
                                   kPodTypeExamples);
  }
  int count = 0;
  if (!ParseNonNegativeInt(count_text, &count)) {
    return Status::InvalidArgument("TPU pod type " + Quote(pod_type) + " has a count too large; " +
                                   kPodTypeExamples);
  }
  std::string generation = "v" + std::string(s.substr(digits_at, dash - digits_at));
  for (char& c : generation) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (generation == "v5e") generation = "v5litepod";
  for (Generation gen : kAllGenerations) {
    if (generation != GenerationPrefix(gen)) continue;
    if (count <= 0) {
      return Status::InvalidArgument("TPU pod type " + Quote(pod_type) +
                                     " has count 0; the count must be positive, e.g. " +
                                     generation + "-8");
    }
    return PodType{gen, count, generation + "-" + std::to_string(count)};
  }
  return Status::InvalidArgument(
      "unknown TPU generation " + Quote(std::string(s.substr(0, dash))) + " in pod type " +
      Quote(pod_type) + ": known generations are v2, v3, v4, v5p, v5litepod (v5e), v6e, v7x; " +
      kPodTypeExamples);
}

int64_t Topology::Chips() const {
  int64_t chips = 1;
  for (int d : dims) chips *= d;
  return chips;
}

std::string Topology::ToString() const { return Join(dims, "x"); }

std::vector<Topology> ValidTopologies(Generation gen) {
  const Row& row = RowOf(gen);
  std::vector<Topology> out;
  if (IsLitePod(gen)) {
    for (const auto& dims : LitePodTopologies()) out.push_back(Topology{dims, ""});
  } else if (row.info.topology_dims == 2) {
    for (int a = 4; a <= row.max_dims[0]; a *= 2) {
      for (int b = a; b <= row.max_dims[1]; b *= 2) out.push_back(Topology{{a, b}, ""});
    }
  } else {
    for (const std::vector<int>& dims : {std::vector<int>{2, 2, 1}, std::vector<int>{2, 2, 2},
                                         std::vector<int>{2, 2, 4}, std::vector<int>{2, 4, 4}}) {
      out.push_back(Topology{dims, ""});
    }
    for (int a = 4; a <= row.max_dims[0]; a += 4) {
      for (int b = a; b <= row.max_dims[1]; b += 4) {
        for (int c = b; c <= row.max_dims[2]; c += 4) out.push_back(Topology{{a, b, c}, ""});
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Topology& x, const Topology& y) {
    return std::make_tuple(x.Chips(), x.dims) < std::make_tuple(y.Chips(), y.dims);
  });
  return out;
}

Result<Topology> ParseTopology(const std::string& topology, Generation gen) {
  Topology parsed;
  std::string_view rest = topology;
  while (true) {
    std::size_t x = rest.find('x');
    int dim = 0;
    if (!ParseNonNegativeInt(rest.substr(0, x), &dim) || dim <= 0) {
      return Status::InvalidArgument(
          "malformed TPU topology " + Quote(topology) +
          ": write AxB or AxBxC with positive integers and a lowercase x, e.g. 2x2x2 or 4x4");
    }
    parsed.dims.push_back(dim);
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  if (parsed.dims.size() < 2 || parsed.dims.size() > 3) {
    return Status::InvalidArgument("malformed TPU topology " + Quote(topology) + ": it has " +
                                   std::to_string(parsed.dims.size()) +
                                   " dimension(s); write AxB or AxBxC, e.g. 2x2x2 or 4x4");
  }
  const int want_dims = TopologyDims(gen);
  if (want_dims == 2 && parsed.dims.size() == 3) {
    return Status::InvalidArgument("TPU topology " + Quote(topology) + " is 3-D but " +
                                   GenerationName(gen) + " topologies are 2-D: use one of " +
                                   DescribeValidTopologies(gen));
  }
  if (want_dims == 3 && parsed.dims.size() == 2) {
    parsed.dims.push_back(1);
    parsed.warning = "TPU topology " + Quote(topology) + " is 2-D but " + GenerationName(gen) +
                     " topologies are 3-D; read as " + parsed.ToString() + " (write " +
                     parsed.ToString() + " to silence this)";
  }
  const std::vector<Topology> valid = ValidTopologies(gen);
  auto is_valid = [&valid](const std::vector<int>& dims) {
    return std::any_of(valid.begin(), valid.end(),
                       [&dims](const Topology& t) { return t.dims == dims; });
  };
  if (is_valid(parsed.dims)) return parsed;
  // The same shape spelled in another order: hosts advertise the canonical spelling.
  std::vector<int> permuted = parsed.dims;
  std::sort(permuted.begin(), permuted.end());
  do {
    if (is_valid(permuted)) {
      return Status::InvalidArgument("TPU topology " + Quote(topology) + " is not how " +
                                     GenerationName(gen) + " topologies are written: write " +
                                     Join(permuted, "x"));
    }
  } while (std::next_permutation(permuted.begin(), permuted.end()));
  std::string as_read = parsed.warning.empty() ? "" : " (read as " + parsed.ToString() + ")";
  return Status::InvalidArgument("TPU topology " + Quote(topology) + as_read +
                                 " is not valid for " + GenerationName(gen) + ": use one of " +
                                 DescribeValidTopologies(gen));
}

int ChipsPerHost(Generation gen, const Topology& topology) {
  if (IsLitePod(gen) && IsSingleHostLitePod(topology.dims)) {
    return static_cast<int>(topology.Chips());
  }
  return RowOf(gen).info.chips_per_host;
}

Result<SliceShape> SliceFromTopology(Generation gen, const std::string& topology,
                                     int chips_per_host) {
  Result<Topology> topo = ParseTopology(topology, gen);
  if (!topo.ok()) return topo.status();
  SliceShape slice;
  slice.gen = gen;
  slice.topo = std::move(topo).value();
  slice.chips = static_cast<int>(slice.topo.Chips());
  if (chips_per_host != 0 && (chips_per_host < 0 || slice.chips % chips_per_host != 0)) {
    return Status::InvalidArgument(
        "chips per host " + std::to_string(chips_per_host) + " does not divide the " +
        std::to_string(slice.chips) + " chips of a " + GenerationPrefix(gen) + " " +
        slice.topo.ToString() + " slice: give a positive divisor, or 0 for the default (" +
        std::to_string(ChipsPerHost(gen, slice.topo)) + ")");
  }
  slice.chips_per_host = chips_per_host != 0 ? chips_per_host : ChipsPerHost(gen, slice.topo);
  slice.hosts = (slice.chips + slice.chips_per_host - 1) / slice.chips_per_host;
  slice.cores = slice.chips * CoresPerChip(gen);
  slice.pod_type = GenerationPrefix(gen) + "-" + std::to_string(slice.cores);
  return slice;
}

Result<SliceShape> SliceFromPodType(const std::string& pod_type) {
  Result<PodType> pod = ParsePodType(pod_type);
  if (!pod.ok()) return pod.status();
  const Generation gen = pod->generation;
  const int cores_per_chip = CoresPerChip(gen);
  if (pod->count % cores_per_chip != 0) {
    return Status::InvalidArgument(
        "TPU pod type " + Quote(pod_type) + " is not a whole number of chips: the count of a " +
        GenerationPrefix(gen) + " pod type counts cores (" + std::to_string(cores_per_chip) +
        " per chip); valid pod types include " + DescribeValidPodTypes(gen));
  }
  const int64_t chips = pod->count / cores_per_chip;
  const Topology* best = nullptr;
  auto key = [](const Topology& t) {
    int sum = 0;
    for (int d : t.dims) sum += d;
    return std::make_pair(*std::max_element(t.dims.begin(), t.dims.end()), sum);
  };
  const std::vector<Topology> valid = ValidTopologies(gen);
  for (const Topology& t : valid) {
    if (t.Chips() == chips && (best == nullptr || key(t) < key(*best))) best = &t;
  }
  if (best == nullptr) {
    return Status::InvalidArgument("TPU pod type " + Quote(pod_type) + " (" +
                                   std::to_string(chips) + " chips) matches no valid " +
                                   GenerationPrefix(gen) + " topology; valid pod types include " +
                                   DescribeValidPodTypes(gen));
  }
  return SliceFromTopology(gen, best->ToString());
}

Status ValidateChipsPerProcess(int chips, int chips_per_host) {
  if (chips_per_host <= 0) {
    return Status::InvalidArgument("a TPU host must have at least 1 chip, got " +
                                   std::to_string(chips_per_host));
  }
  if (chips == chips_per_host) return Status::Ok();
  std::vector<int> allowed;
  for (int n : {1, 2, 4, 8}) {
    if (n < chips_per_host && chips_per_host % n == 0) allowed.push_back(n);
  }
  allowed.push_back(chips_per_host);
  if (std::find(allowed.begin(), allowed.end(), chips) != allowed.end()) return Status::Ok();
  return Status::InvalidArgument("a worker process cannot take " + std::to_string(chips) +
                                 " TPU chip(s) of a " + std::to_string(chips_per_host) +
                                 "-chip host: use " + Join(allowed, ", ") +
                                 " (1, 2, 4 or 8 chips dividing the host's, or all of them)");
}

std::map<std::string, std::string> VisibleChipsEnv(const std::vector<int>& chips,
                                                   int chips_per_host) {
  std::map<std::string, std::string> env;
  env["TPU_VISIBLE_CHIPS"] = Join(chips, ",");
  if (static_cast<int>(chips.size()) == chips_per_host) return env;
  if (chips.size() == 1) {
    env["TPU_CHIPS_PER_PROCESS_BOUNDS"] = "1,1,1";
    env["TPU_PROCESS_BOUNDS"] = "1,1,1";
  } else if (chips.size() == 2) {
    env["TPU_CHIPS_PER_PROCESS_BOUNDS"] = "1,2,1";
    env["TPU_PROCESS_BOUNDS"] = "1,1,1";
  }
  return env;
}

std::vector<int> DefaultMeshShape(const SliceShape& slice, int num_slices) {
  if (num_slices < 1) return {};
  std::vector<int> shape;
  if (num_slices > 1) shape.push_back(num_slices);
  shape.insert(shape.end(), slice.topo.dims.begin(), slice.topo.dims.end());
  return shape;
}

}  // namespace orrery::tpu
