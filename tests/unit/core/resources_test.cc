// Resource sets (orrery/resources.h): Ray's validation rules, and the arithmetic the node
// and the scheduler do on them.
#include "orrery/resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace orrery {
namespace {

using ::testing::HasSubstr;

TEST(ValidateResourcesTest, AcceptsRayValidDemands) {
  for (const Resources& ok :
       {Resources{}, Resources{{"CPU", 0.5}}, Resources{{"CPU", 1}}, Resources{{"CPU", 2}},
        Resources{{"CPU", 1.0}}, Resources{{"CPU", 0.01}}, Resources{{"TPU", 4}, {"CPU", 1}},
        Resources{{"memory", 1e9}}, Resources{{"my_custom-resource", 0.25}},
        Resources{{"TPU-v4-16-head", 1}}}) {
    Status s = ValidateResources(ok);
    EXPECT_TRUE(s.ok()) << ToString(ok) << ": " << s.ToString();
  }
}

TEST(ValidateResourcesTest, RejectsFractionsAboveOne) {
  Status s = ValidateResources({{"CPU", 1.5}});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("CPU"));
  EXPECT_FALSE(ValidateResources({{"GPU", 2.25}}).ok());
  EXPECT_FALSE(ValidateResources({{"CPU", 1}, {"TPU", 4.5}}).ok());
}

TEST(ValidateResourcesTest, RejectsEmptyName) {
  Status s = ValidateResources({{"", 1}});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ValidateResourcesTest, RejectsZeroAndNegativeValues) {
  Status zero = ValidateResources({{"GPU", 0}});
  EXPECT_FALSE(zero.ok());
  EXPECT_THAT(zero.message(), HasSubstr("GPU"));
  Status negative = ValidateResources({{"CPU", -1}});
  EXPECT_FALSE(negative.ok());
  EXPECT_THAT(negative.message(), HasSubstr("CPU"));
  EXPECT_FALSE(ValidateResources({{"CPU", -0.5}}).ok());
}

TEST(ValidateResourcesTest, RejectsNotANumber) {
  EXPECT_FALSE(ValidateResources({{"CPU", std::numeric_limits<double>::quiet_NaN()}}).ok());
}

TEST(ValidateResourcesTest, NamesTheOffendingEntryAmongGoodOnes) {
  Status s = ValidateResources({{"CPU", 1}, {"Foo", 2.5}, {"TPU", 4}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("Foo"));
}

TEST(FitsTest, EmptyDemandFitsAnywhere) {
  EXPECT_TRUE(Fits({}, {}));
  EXPECT_TRUE(Fits({}, {{"CPU", 1}}));
}

TEST(FitsTest, ComparesEveryEntry) {
  Resources node{{"CPU", 4}, {"TPU", 4}, {"memory", 1e9}};
  EXPECT_TRUE(Fits({{"CPU", 1}}, node));
  EXPECT_TRUE(Fits({{"CPU", 4}}, node));
  EXPECT_TRUE(Fits({{"CPU", 4}, {"TPU", 4}}, node));
  EXPECT_TRUE(Fits({{"CPU", 0.5}, {"memory", 5e8}}, node));
  EXPECT_FALSE(Fits({{"CPU", 5}}, node));
  EXPECT_FALSE(Fits({{"CPU", 1}, {"TPU", 8}}, node));
  EXPECT_FALSE(Fits({{"GPU", 1}}, node)) << "a resource the node lacks never fits";
  EXPECT_FALSE(Fits({{"CPU", 1}}, {}));
}

TEST(SubtractAddTest, SubtractAndAddAreInverse) {
  Resources avail{{"CPU", 4}, {"GPU", 1}};
  Subtract(avail, {{"CPU", 1.5}});
  EXPECT_DOUBLE_EQ(avail.at("CPU"), 2.5);
  EXPECT_DOUBLE_EQ(avail.at("GPU"), 1);
  Subtract(avail, {{"GPU", 1}});
  ASSERT_EQ(avail.count("GPU"), 1u) << "an exhausted resource is kept at 0";
  EXPECT_DOUBLE_EQ(avail.at("GPU"), 0);
  EXPECT_FALSE(Fits({{"GPU", 1}}, avail));
  Add(avail, {{"CPU", 1.5}, {"GPU", 1}});
  EXPECT_DOUBLE_EQ(avail.at("CPU"), 4);
  EXPECT_DOUBLE_EQ(avail.at("GPU"), 1);
}

TEST(SubtractAddTest, AddCreatesMissingEntries) {
  Resources avail{{"CPU", 1}};
  Add(avail, {{"TPU", 4}});
  EXPECT_DOUBLE_EQ(avail.at("TPU"), 4);
  EXPECT_DOUBLE_EQ(avail.at("CPU"), 1);
}

TEST(SubtractAddTest, FractionalAccountingDoesNotDrift) {
  // A node with one CPU runs ten 0.1-CPU tasks and gets them all back: it must still hold
  // a whole CPU (binary floating point alone would leave 0.9999999999999999).
  Resources avail{{"CPU", 1}};
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Fits({{"CPU", 0.1}}, avail)) << "task " << i;
    Subtract(avail, {{"CPU", 0.1}});
  }
  EXPECT_FALSE(Fits({{"CPU", 0.1}}, avail));
  EXPECT_NEAR(avail.at("CPU"), 0, 1e-9);
  for (int i = 0; i < 10; ++i) Add(avail, {{"CPU", 0.1}});
  EXPECT_TRUE(Fits({{"CPU", 1}}, avail)) << "CPU left: " << avail.at("CPU");
  for (int i = 0; i < 3; ++i) Subtract(avail, {{"CPU", 0.3}});
  EXPECT_TRUE(Fits({{"CPU", 0.1}}, avail)) << "CPU left: " << avail.at("CPU");
}

TEST(ResourcesToStringTest, Formats) {
  EXPECT_EQ(ToString(Resources{{"CPU", 1}, {"TPU", 4}}), "{CPU: 1, TPU: 4}");
  EXPECT_EQ(ToString(Resources{}), "{}");
  EXPECT_THAT(ToString(Resources{{"CPU", 0.5}}), HasSubstr("0.5"));
  std::string labels = ToString(Labels{{"orrery.io/accelerator-type", "TPU-V4"}});
  EXPECT_THAT(labels, HasSubstr("orrery.io/accelerator-type"));
  EXPECT_THAT(labels, HasSubstr("TPU-V4"));
}

}  // namespace
}  // namespace orrery
