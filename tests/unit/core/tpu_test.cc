// The TPU model (orrery/tpu.h, docs/accelerators.md "The TPU model"): the generation table, pod
// type and topology parsing, slice arithmetic both ways, chips per process and the mesh helper.
#include "orrery/tpu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace orrery::tpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

// --- The generation table --------------------------------------------------------------

TEST(TpuGenerationTest, TableMatchesTpuMd) {
  struct Row {
    Generation gen;
    int cores_per_chip;
    int chips_per_host;
    int64_t hbm;
    int dims;
    const char* prefix;
    const char* accelerator_type;
  };
  const Row rows[] = {
      {Generation::kV2, 2, 4, 8 * kGiB, 2, "v2", "TPU-V2"},
      {Generation::kV3, 2, 4, 16 * kGiB, 2, "v3", "TPU-V3"},
      {Generation::kV4, 2, 4, 32 * kGiB, 3, "v4", "TPU-V4"},
      {Generation::kV5p, 2, 4, 95'000'000'000, 3, "v5p", "TPU-V5P"},
      {Generation::kV5e, 1, 4, 16'000'000'000, 2, "v5litepod", "TPU-V5LITEPOD"},
      {Generation::kV6e, 1, 4, 32'000'000'000, 2, "v6e", "TPU-V6E"},
      {Generation::kV7x, 2, 4, 192 * kGiB, 3, "v7x", "TPU-V7X"},
  };
  ASSERT_EQ(std::size(rows), kAllGenerations.size());
  for (const Row& r : rows) {
    SCOPED_TRACE(r.prefix);
    GenerationInfo info = GetGenerationInfo(r.gen);
    EXPECT_EQ(info.cores_per_chip, r.cores_per_chip);
    EXPECT_EQ(info.chips_per_host, r.chips_per_host);
    EXPECT_EQ(info.hbm_bytes_per_chip, r.hbm);
    EXPECT_EQ(info.topology_dims, r.dims);
    EXPECT_EQ(CoresPerChip(r.gen), r.cores_per_chip);
    EXPECT_EQ(HbmBytesPerChip(r.gen), r.hbm);
    EXPECT_EQ(TopologyDims(r.gen), r.dims);
    EXPECT_EQ(GenerationPrefix(r.gen), r.prefix);
    EXPECT_EQ(AcceleratorTypeName(r.gen), r.accelerator_type);
  }
}

TEST(TpuGenerationTest, HbmBytesAreExact) {
  EXPECT_EQ(HbmBytesPerChip(Generation::kV2), 8589934592);
  EXPECT_EQ(HbmBytesPerChip(Generation::kV3), 17179869184);
  EXPECT_EQ(HbmBytesPerChip(Generation::kV4), 34359738368);
  EXPECT_EQ(HbmBytesPerChip(Generation::kV5p), 95000000000);  // decimal GB
  EXPECT_EQ(HbmBytesPerChip(Generation::kV5e), 16000000000);
  EXPECT_EQ(HbmBytesPerChip(Generation::kV6e), 32000000000);
  EXPECT_EQ(HbmBytesPerChip(Generation::kV7x), 206158430208);
}

// --- Accelerator types -------------------------------------------------------------------

TEST(TpuAcceleratorTypeTest, ParsesCanonicalNamesAndRoundTrips) {
  for (Generation gen : kAllGenerations) {
    Result<Generation> parsed = ParseAcceleratorType(AcceleratorTypeName(gen));
    ASSERT_TRUE(parsed.ok()) << AcceleratorTypeName(gen);
    EXPECT_EQ(*parsed, gen);
  }
  EXPECT_EQ(*ParseAcceleratorType("TPU-V4"), Generation::kV4);
  EXPECT_EQ(*ParseAcceleratorType("TPU-V5P"), Generation::kV5p);
  EXPECT_EQ(*ParseAcceleratorType("TPU-V5LITEPOD"), Generation::kV5e);
  EXPECT_EQ(*ParseAcceleratorType("TPU-V6E"), Generation::kV6e);
  EXPECT_EQ(*ParseAcceleratorType("TPU-V7X"), Generation::kV7x);
}

TEST(TpuAcceleratorTypeTest, IsCaseInsensitiveAndAcceptsV5e) {
  EXPECT_EQ(*ParseAcceleratorType("tpu-v4"), Generation::kV4);
  EXPECT_EQ(*ParseAcceleratorType("Tpu-V6e"), Generation::kV6e);
  EXPECT_EQ(*ParseAcceleratorType("TPU-V5E"), Generation::kV5e);
  EXPECT_EQ(*ParseAcceleratorType("tpu-v5e"), Generation::kV5e);
  EXPECT_EQ(*ParseAcceleratorType("tpu-v5litepod"), Generation::kV5e);
}

TEST(TpuAcceleratorTypeTest, RejectsUnknownWithTheValidNames) {
  for (const char* bad : {"", "TPU", "TPU-V99", "v4", "TPU_V4", "GPU", "TPU-V4 ", "TPU-TPU7X"}) {
    Result<Generation> r = ParseAcceleratorType(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("TPU-V4"));
    EXPECT_THAT(r.status().message(), HasSubstr("TPU-V5LITEPOD"));
  }
}

// --- Pod types -----------------------------------------------------------------------------

TEST(TpuPodTypeTest, ParsesEveryGeneration) {
  struct Case {
    const char* input;
    Generation gen;
    int count;
    const char* name;
  };
  for (const Case& c :
       {Case{"v2-32", Generation::kV2, 32, "v2-32"},
        Case{"v3-2048", Generation::kV3, 2048, "v3-2048"},
        Case{"v4-16", Generation::kV4, 16, "v4-16"}, Case{"v5p-8", Generation::kV5p, 8, "v5p-8"},
        Case{"v5litepod-16", Generation::kV5e, 16, "v5litepod-16"},
        Case{"v6e-8", Generation::kV6e, 8, "v6e-8"}, Case{"v7x-8", Generation::kV7x, 8, "v7x-8"}}) {
    Result<PodType> pod = ParsePodType(c.input);
    ASSERT_TRUE(pod.ok()) << c.input << ": " << pod.status().message();
    EXPECT_EQ(*pod, (PodType{c.gen, c.count, c.name}));
  }
}

TEST(TpuPodTypeTest, NormalisesTpuPrefixAndV5e) {
  EXPECT_EQ(*ParsePodType("tpu7x-8"), (PodType{Generation::kV7x, 8, "v7x-8"}));
  EXPECT_EQ(*ParsePodType("tpu4-16"), (PodType{Generation::kV4, 16, "v4-16"}));
  EXPECT_EQ(*ParsePodType("v5e-8"), (PodType{Generation::kV5e, 8, "v5litepod-8"}));
  EXPECT_EQ(*ParsePodType("v6E-4"), (PodType{Generation::kV6e, 4, "v6e-4"}));
  EXPECT_EQ(*ParsePodType("v4-016"), (PodType{Generation::kV4, 16, "v4-16"}));
}

TEST(TpuPodTypeTest, RejectsMalformedWithExamples) {
  for (const char* bad : {"v4", "x4-8", "v4-", "", "-8", "v-8", "tpu-8", "V4-8", "v4--8", "v4-8x",
                          "v4-+8", " v4-8", "v4-8 ", "v4_8", "4-8", "v4.1-8"}) {
    Result<PodType> r = ParsePodType(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("malformed")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("v4-16")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("tpu7x-8")) << bad;
  }
}

TEST(TpuPodTypeTest, RejectsUnknownGenerationNamingTheKnownOnes) {
  for (const char* bad : {"v99-8", "v5-8", "v6-8", "tpu8x-8", "v4x-8"}) {
    Result<PodType> r = ParsePodType(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("unknown TPU generation")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("v5litepod"));
    EXPECT_THAT(r.status().message(), HasSubstr("v7x"));
  }
  EXPECT_THAT(ParsePodType("v99-8").status().message(), HasSubstr("\"v99\""));
}

TEST(TpuPodTypeTest, RejectsZeroAndHugeCounts) {
  Result<PodType> zero = ParsePodType("v4-0");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("positive"));
  Result<PodType> huge = ParsePodType("v4-99999999999999");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("too large"));
}

// --- Topologies ------------------------------------------------------------------------------

TEST(TpuTopologyTest, ValidSetsFollowTpuMd) {
  auto spellings = [](Generation gen) {
    std::vector<std::string> out;
    for (const Topology& t : ValidTopologies(gen)) out.push_back(t.ToString());
    return out;
  };
  const std::vector<std::string> lite = {"1x1", "2x2", "2x4",  "2x8",  "4x4",
                                         "4x8", "8x8", "8x16", "16x16"};
  EXPECT_EQ(spellings(Generation::kV5e), lite);
  EXPECT_EQ(spellings(Generation::kV6e), lite);
  EXPECT_THAT(spellings(Generation::kV2),
              ElementsAre("4x4", "4x8", "4x16", "8x8", "8x16", "16x16"));
  std::vector<std::string> v3 = spellings(Generation::kV3);
  EXPECT_EQ(v3.size(), 10u);
  EXPECT_EQ(v3.front(), "4x4");
  EXPECT_EQ(v3.back(), "32x32");

  std::vector<std::string> v4 = spellings(Generation::kV4);
  EXPECT_EQ(v4.size(), 20u);  // 4 small forms + 16 multiples of 4 within 12x12x16
  EXPECT_THAT(std::vector<std::string>(v4.begin(), v4.begin() + 5),
              ElementsAre("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4"));
  EXPECT_EQ(v4.back(), "12x12x16");
  EXPECT_EQ(spellings(Generation::kV5p).back(), "16x16x24");
  EXPECT_EQ(spellings(Generation::kV7x).back(), "8x16x16");

  for (Generation gen : kAllGenerations) {
    int64_t last = 0;
    for (const Topology& t : ValidTopologies(gen)) {
      SCOPED_TRACE(GenerationPrefix(gen) + " " + t.ToString());
      EXPECT_EQ(static_cast<int>(t.dims.size()), TopologyDims(gen));
      EXPECT_GE(t.Chips(), last);  // ordered by chip count
      last = t.Chips();
      Result<Topology> parsed = ParseTopology(t.ToString(), gen);
      ASSERT_TRUE(parsed.ok()) << parsed.status().message();
      EXPECT_EQ(parsed->dims, t.dims);
      EXPECT_THAT(parsed->warning, IsEmpty());
    }
  }
}

TEST(TpuTopologyTest, ParsesAndCountsChips) {
  Result<Topology> t = ParseTopology("2x2x2", Generation::kV4);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->dims, ElementsAre(2, 2, 2));
  EXPECT_EQ(t->Chips(), 8);
  EXPECT_EQ(t->ToString(), "2x2x2");
  EXPECT_THAT(t->warning, IsEmpty());

  Result<Topology> v6e = ParseTopology("8x16", Generation::kV6e);
  ASSERT_TRUE(v6e.ok());
  EXPECT_EQ(v6e->Chips(), 128);
  EXPECT_TRUE(ParseTopology("12x12x16", Generation::kV4).ok());
  EXPECT_TRUE(ParseTopology("16x16x24", Generation::kV5p).ok());
  EXPECT_TRUE(ParseTopology("8x16x16", Generation::kV7x).ok());
  EXPECT_TRUE(ParseTopology("32x32", Generation::kV3).ok());
}

TEST(TpuTopologyTest, TwoDimensionalForThreeDimensionalGenerationWarns) {
  Result<Topology> t = ParseTopology("2x2", Generation::kV4);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_THAT(t->dims, ElementsAre(2, 2, 1));
  EXPECT_THAT(t->warning, HasSubstr("2x2x1"));
  EXPECT_TRUE(ParseTopology("2x2", Generation::kV7x)->warning.size() > 0);

  // 4x4 would be 4x4x1, which v4 does not have.
  Result<Topology> bad = ParseTopology("4x4", Generation::kV4);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("4x4x1"));
  EXPECT_THAT(bad.status().message(), HasSubstr("2x2x1, 2x2x2, 2x2x4, 2x4x4"));
}

TEST(TpuTopologyTest, RejectsMalformed) {
  for (const char* bad : {"2x", "0x2x2", "2x2x2x2", "", "x2", "2", "2x-2", "2X2", "+2x2", "2x2x0",
                          "2 x2", "axb", "2xx2", "99999999999x2"}) {
    Result<Topology> r = ParseTopology(bad, Generation::kV4);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("malformed")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("AxBxC")) << bad;
  }
  EXPECT_THAT(ParseTopology("2x2x2x2", Generation::kV4).status().message(),
              HasSubstr("4 dimension"));
}

TEST(TpuTopologyTest, RejectsTopologiesTheGenerationLacks) {
  Result<Topology> three_d = ParseTopology("2x2x2", Generation::kV6e);
  ASSERT_FALSE(three_d.ok());
  EXPECT_THAT(three_d.status().message(), HasSubstr("2-D"));
  EXPECT_THAT(three_d.status().message(), HasSubstr("1x1, 2x2, 2x4, 2x8"));
  EXPECT_FALSE(ParseTopology("2x2x1", Generation::kV5e).ok());

  Result<Topology> v6e = ParseTopology("3x3", Generation::kV6e);
  ASSERT_FALSE(v6e.ok());
  EXPECT_THAT(v6e.status().message(), HasSubstr("v6e (TPU-V6E)"));
  EXPECT_THAT(v6e.status().message(), HasSubstr("16x16"));

  for (const char* bad : {"16x16x24", "4x16x16", "12x12x20", "6x6x6", "2x2x3", "4x4x6"}) {
    Result<Topology> r = ParseTopology(bad, Generation::kV4);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("12x12x16")) << bad;
  }
  EXPECT_FALSE(ParseTopology("16x16x16", Generation::kV7x).ok());
  EXPECT_FALSE(ParseTopology("32x32", Generation::kV2).ok());
  // docs/accelerators.md: v2 starts at 4x4.
  EXPECT_FALSE(ParseTopology("2x2", Generation::kV2).ok());
  EXPECT_FALSE(ParseTopology("8x4", Generation::kV3).ok());
  EXPECT_FALSE(ParseTopology("4x2", Generation::kV6e).ok());
}

TEST(TpuTopologyTest, OtherOrderSuggestsTheCanonicalSpelling) {
  Result<Topology> r = ParseTopology("8x4x4", Generation::kV4);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("write 4x4x8"));
  EXPECT_THAT(ParseTopology("1x2x2", Generation::kV5p).status().message(),
              HasSubstr("write 2x2x1"));
  EXPECT_THAT(ParseTopology("4x2", Generation::kV6e).status().message(), HasSubstr("write 2x4"));
}

// --- Slices ------------------------------------------------------------------------------------

TEST(TpuSliceTest, TpuMdExamplesFromTopology) {
  Result<Generation> v4 = ParseAcceleratorType("TPU-V4");
  ASSERT_TRUE(v4.ok());
  Result<SliceShape> s = SliceFromTopology(*v4, "2x2x2");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->pod_type, "v4-16");
  EXPECT_EQ(s->hosts, 2);
  EXPECT_EQ(s->chips, 8);
  EXPECT_EQ(s->cores, 16);
  EXPECT_EQ(s->chips_per_host, 4);
  EXPECT_THAT(s->topo.dims, ElementsAre(2, 2, 2));

  Result<Generation> v6e = ParseAcceleratorType("TPU-V6E");
  ASSERT_TRUE(v6e.ok());
  Result<SliceShape> t = SliceFromTopology(*v6e, "4x4");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->pod_type, "v6e-16");
  EXPECT_EQ(t->hosts, 4);
  EXPECT_EQ(t->chips, 16);
  EXPECT_EQ(t->cores, 16);
  EXPECT_EQ(t->chips_per_host, 4);

  Result<SliceShape> w = SliceFromTopology(*v4, "2x2");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_THAT(w->topo.dims, ElementsAre(2, 2, 1));
  EXPECT_THAT(w->topo.warning, HasSubstr("2x2x1"));
  EXPECT_EQ(w->pod_type, "v4-8");
  EXPECT_EQ(w->hosts, 1);
  EXPECT_EQ(w->chips, 4);
}

TEST(TpuSliceTest, EveryGenerationsArithmetic) {
  struct Case {
    Generation gen;
    const char* topology;
    const char* pod_type;
    int chips;
    int cores;
    int hosts;
    int chips_per_host;
  };
  for (const Case& c : {
           Case{Generation::kV2, "4x4", "v2-32", 16, 32, 4, 4},
           Case{Generation::kV2, "16x16", "v2-512", 256, 512, 64, 4},
           Case{Generation::kV3, "4x8", "v3-64", 32, 64, 8, 4},
           Case{Generation::kV3, "32x32", "v3-2048", 1024, 2048, 256, 4},
           Case{Generation::kV4, "2x2x1", "v4-8", 4, 8, 1, 4},
           Case{Generation::kV4, "2x2x4", "v4-32", 16, 32, 4, 4},
           Case{Generation::kV4, "4x4x4", "v4-128", 64, 128, 16, 4},
           Case{Generation::kV4, "12x12x16", "v4-4608", 2304, 4608, 576, 4},
           Case{Generation::kV5p, "2x2x1", "v5p-8", 4, 8, 1, 4},
           Case{Generation::kV5p, "16x16x24", "v5p-12288", 6144, 12288, 1536, 4},
           Case{Generation::kV5e, "1x1", "v5litepod-1", 1, 1, 1, 1},
           Case{Generation::kV5e, "2x2", "v5litepod-4", 4, 4, 1, 4},
           Case{Generation::kV5e, "2x4", "v5litepod-8", 8, 8, 1, 8},
           Case{Generation::kV5e, "2x8", "v5litepod-16", 16, 16, 4, 4},
           Case{Generation::kV5e, "16x16", "v5litepod-256", 256, 256, 64, 4},
           Case{Generation::kV6e, "1x1", "v6e-1", 1, 1, 1, 1},
           Case{Generation::kV6e, "2x4", "v6e-8", 8, 8, 1, 8},
           Case{Generation::kV6e, "8x16", "v6e-128", 128, 128, 32, 4},
           Case{Generation::kV7x, "2x2x1", "v7x-8", 4, 8, 1, 4},
           Case{Generation::kV7x, "2x2x2", "v7x-16", 8, 16, 2, 4},
           Case{Generation::kV7x, "8x16x16", "v7x-4096", 2048, 4096, 512, 4},
       }) {
    SCOPED_TRACE(GenerationPrefix(c.gen) + " " + c.topology);
    Result<SliceShape> s = SliceFromTopology(c.gen, c.topology);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->gen, c.gen);
    EXPECT_EQ(s->pod_type, c.pod_type);
    EXPECT_EQ(s->chips, c.chips);
    EXPECT_EQ(s->cores, c.cores);
    EXPECT_EQ(s->hosts, c.hosts);
    EXPECT_EQ(s->chips_per_host, c.chips_per_host);
    EXPECT_EQ(s->topo.ToString(), c.topology);
  }
}

TEST(TpuSliceTest, ChipsPerHostSingleHostRule) {
  EXPECT_EQ(ChipsPerHost(Generation::kV6e, Topology{{1, 1}, ""}), 1);
  EXPECT_EQ(ChipsPerHost(Generation::kV6e, Topology{{2, 2}, ""}), 4);
  EXPECT_EQ(ChipsPerHost(Generation::kV6e, Topology{{2, 4}, ""}), 8);
  EXPECT_EQ(ChipsPerHost(Generation::kV6e, Topology{{4, 4}, ""}), 4);
  EXPECT_EQ(ChipsPerHost(Generation::kV5e, Topology{{2, 4}, ""}), 8);
  EXPECT_EQ(ChipsPerHost(Generation::kV4, Topology{{2, 2, 1}, ""}), 4);
  EXPECT_EQ(ChipsPerHost(Generation::kV4, Topology{{4, 4, 4}, ""}), 4);
}

TEST(TpuSliceTest, ChipsPerHostOverride) {
  // docs/accelerators.md: a v6e 2x4 is one 8-chip host unless told otherwise.
  Result<SliceShape> s = SliceFromTopology(Generation::kV6e, "2x4", 4);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->hosts, 2);
  EXPECT_EQ(s->chips_per_host, 4);
  EXPECT_EQ(s->pod_type, "v6e-8");
  EXPECT_EQ(SliceFromTopology(Generation::kV6e, "2x4", 0)->hosts, 1);
  for (int bad : {3, -4, 16}) {
    Result<SliceShape> r = SliceFromTopology(Generation::kV6e, "2x4", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("positive divisor"));
  }
}

TEST(TpuSliceTest, SliceFromTopologyPassesParseErrorsThrough) {
  Result<SliceShape> r = SliceFromTopology(Generation::kV6e, "2x2x2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("2-D"));
  EXPECT_FALSE(SliceFromTopology(Generation::kV4, "2x").ok());
}

TEST(TpuSliceTest, TpuMdExamplesFromPodType) {
  Result<SliceShape> v4 = SliceFromPodType("v4-16");
  ASSERT_TRUE(v4.ok()) << v4.status().message();
  EXPECT_EQ(v4->gen, Generation::kV4);
  EXPECT_EQ(v4->chips, 8);
  EXPECT_EQ(v4->hosts, 2);
  EXPECT_EQ(v4->chips_per_host, 4);
  EXPECT_EQ(v4->topo.ToString(), "2x2x2");
  EXPECT_EQ(v4->pod_type, "v4-16");

  Result<SliceShape> v6e8 = SliceFromPodType("v6e-8");
  ASSERT_TRUE(v6e8.ok());
  EXPECT_EQ(v6e8->chips, 8);
  EXPECT_EQ(v6e8->hosts, 1);
  EXPECT_EQ(v6e8->chips_per_host, 8);
  EXPECT_EQ(v6e8->topo.ToString(), "2x4");

  Result<SliceShape> v6e16 = SliceFromPodType("v6e-16");
  ASSERT_TRUE(v6e16.ok());
  EXPECT_EQ(v6e16->chips, 16);
  EXPECT_EQ(v6e16->hosts, 4);
  EXPECT_EQ(v6e16->topo.ToString(), "4x4");

  Result<SliceShape> v5e = SliceFromPodType("v5litepod-16");
  ASSERT_TRUE(v5e.ok());
  EXPECT_EQ(v5e->gen, Generation::kV5e);
  EXPECT_EQ(v5e->chips, 16);
  EXPECT_EQ(v5e->hosts, 4);

  Result<SliceShape> v7x = SliceFromPodType("tpu7x-8");
  ASSERT_TRUE(v7x.ok()) << v7x.status().message();
  EXPECT_EQ(v7x->gen, Generation::kV7x);
  EXPECT_EQ(v7x->pod_type, "v7x-8");
  EXPECT_EQ(v7x->chips, 4);
  EXPECT_EQ(v7x->hosts, 1);
  EXPECT_EQ(v7x->topo.ToString(), "2x2x1");
}

TEST(TpuSliceTest, PodTypePicksTheMostCompactTopology) {
  EXPECT_EQ(SliceFromPodType("v4-8")->topo.ToString(), "2x2x1");
  EXPECT_EQ(SliceFromPodType("v4-64")->topo.ToString(), "2x4x4");
  EXPECT_EQ(SliceFromPodType("v4-512")->topo.ToString(), "4x8x8");     // not 4x4x16
  EXPECT_EQ(SliceFromPodType("v5p-2048")->topo.ToString(), "8x8x16");  // not 4x16x16
  EXPECT_EQ(SliceFromPodType("v2-64")->topo.ToString(), "4x8");
  EXPECT_EQ(SliceFromPodType("v5e-4")->topo.ToString(), "2x2");
  EXPECT_EQ(SliceFromPodType("v5e-4")->pod_type, "v5litepod-4");
}

TEST(TpuSliceTest, PodTypeAndTopologyAgreeForEveryValidTopology) {
  for (Generation gen : kAllGenerations) {
    std::set<int64_t> seen;
    for (const Topology& t : ValidTopologies(gen)) {
      SCOPED_TRACE(GenerationPrefix(gen) + " " + t.ToString());
      Result<SliceShape> s = SliceFromTopology(gen, t.ToString());
      ASSERT_TRUE(s.ok()) << s.status().message();
      EXPECT_EQ(s->chips, t.Chips());
      EXPECT_EQ(s->cores, s->chips * CoresPerChip(gen));
      EXPECT_EQ(s->pod_type, GenerationPrefix(gen) + "-" + std::to_string(s->cores));
      EXPECT_EQ(s->hosts * s->chips_per_host, s->chips);
      Result<SliceShape> back = SliceFromPodType(s->pod_type);
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_EQ(back->chips, s->chips);
      EXPECT_EQ(back->pod_type, s->pod_type);
      seen.insert(s->chips);
      if (seen.size() == 1) {
        EXPECT_EQ(*back, *s);  // the smallest has one topology
      }
    }
  }
}

TEST(TpuSliceTest, PodTypeRejections) {
  Result<SliceShape> odd = SliceFromPodType("v4-15");
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(), HasSubstr("counts cores"));
  EXPECT_THAT(odd.status().message(), HasSubstr("v4-8, v4-16, v4-32"));

  for (const char* bad : {"v4-24", "v6e-2", "v6e-12", "v5litepod-512", "v7x-2", "v2-8"}) {
    Result<SliceShape> r = SliceFromPodType(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("valid pod types include")) << bad;
  }
  EXPECT_THAT(SliceFromPodType("v6e-2").status().message(),
              HasSubstr("v6e-1, v6e-4, v6e-8, v6e-16"));
  EXPECT_THAT(SliceFromPodType("v4").status().message(), HasSubstr("malformed"));
  EXPECT_THAT(SliceFromPodType("v99-8").status().message(), HasSubstr("unknown"));
}

// --- Chips per worker process ----------------------------------------------------------------

TEST(TpuChipsPerProcessTest, AcceptsPowersDividingTheHostOrAll) {
  for (int n : {1, 2, 4}) EXPECT_TRUE(ValidateChipsPerProcess(n, 4).ok()) << n;
  for (int n : {1, 2, 4, 8}) EXPECT_TRUE(ValidateChipsPerProcess(n, 8).ok()) << n;
  EXPECT_TRUE(ValidateChipsPerProcess(1, 1).ok());
}

TEST(TpuChipsPerProcessTest, RejectsOthersNamingTheValidCounts) {
  for (int n : {3, 16, 8, 0, -1}) {
    Status s = ValidateChipsPerProcess(n, 4);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("use 1, 2, 4")) << n;
  }
  EXPECT_THAT(ValidateChipsPerProcess(6, 8).message(), HasSubstr("use 1, 2, 4, 8"));
  EXPECT_FALSE(ValidateChipsPerProcess(2, 1).ok());
  // docs/train.md "Configs": the amount must also divide the host's chips (a 6-chip host is not a
  // real TPU host, but a node told to expose 6 chips must still refuse 4 per process).
  EXPECT_THAT(ValidateChipsPerProcess(4, 6).message(), HasSubstr("use 1, 2, 6"));
  EXPECT_TRUE(ValidateChipsPerProcess(6, 6).ok());
  EXPECT_FALSE(ValidateChipsPerProcess(1, 0).ok());
}

TEST(TpuChipsPerProcessTest, VisibleChipsEnvPerCount) {
  using Env = std::map<std::string, std::string>;
  EXPECT_EQ(VisibleChipsEnv({3}, 4), (Env{{"TPU_VISIBLE_CHIPS", "3"},
                                          {"TPU_CHIPS_PER_PROCESS_BOUNDS", "1,1,1"},
                                          {"TPU_PROCESS_BOUNDS", "1,1,1"}}));
  EXPECT_EQ(VisibleChipsEnv({2, 3}, 4), (Env{{"TPU_VISIBLE_CHIPS", "2,3"},
                                             {"TPU_CHIPS_PER_PROCESS_BOUNDS", "1,2,1"},
                                             {"TPU_PROCESS_BOUNDS", "1,1,1"}}));
  EXPECT_EQ(VisibleChipsEnv({0, 1, 2, 3}, 4), (Env{{"TPU_VISIBLE_CHIPS", "0,1,2,3"}}));
  EXPECT_EQ(VisibleChipsEnv({4, 5, 6, 7}, 8), (Env{{"TPU_VISIBLE_CHIPS", "4,5,6,7"}}));
  EXPECT_EQ(VisibleChipsEnv({0, 1, 2, 3, 4, 5, 6, 7}, 8),
            (Env{{"TPU_VISIBLE_CHIPS", "0,1,2,3,4,5,6,7"}}));
  EXPECT_EQ(VisibleChipsEnv({0}, 1), (Env{{"TPU_VISIBLE_CHIPS", "0"}}));  // all of the host
}

// --- Mesh --------------------------------------------------------------------------------------

TEST(TpuMeshTest, DefaultMeshShapeIsTheTopologyWithASliceAxis) {
  Result<SliceShape> v4 = SliceFromPodType("v4-16");
  ASSERT_TRUE(v4.ok());
  EXPECT_THAT(DefaultMeshShape(*v4, 1), ElementsAre(2, 2, 2));
  EXPECT_THAT(DefaultMeshShape(*v4, 3), ElementsAre(3, 2, 2, 2));
  EXPECT_THAT(DefaultMeshShape(*v4, 0), IsEmpty());
  Result<SliceShape> v6e = SliceFromTopology(Generation::kV6e, "4x4");
  ASSERT_TRUE(v6e.ok());
  EXPECT_THAT(DefaultMeshShape(*v6e, 2), ElementsAre(2, 4, 4));
  for (int slices : {1, 2, 4}) {
    int64_t product = 1;
    for (int d : DefaultMeshShape(*v6e, slices)) product *= d;
    EXPECT_EQ(product, int64_t{v6e->chips} * slices);
  }
}

}  // namespace
}  // namespace orrery::tpu
