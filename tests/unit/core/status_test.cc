// Status and Result<T> (orrery/status.h): codes, messages and values survive as given.
#include "orrery/status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

namespace orrery {
namespace {

using ::testing::HasSubstr;

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_TRUE(s.message().empty());
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
  };
  for (const Case& c : {Case{Status::InvalidArgument("m1"), StatusCode::kInvalidArgument},
                        Case{Status::NotFound("m2"), StatusCode::kNotFound},
                        Case{Status::Unavailable("m3"), StatusCode::kUnavailable},
                        Case{Status::Timeout("m4"), StatusCode::kTimeout},
                        Case{Status::Cancelled("m5"), StatusCode::kCancelled},
                        Case{Status::Internal("m6"), StatusCode::kInternal}}) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message().size(), 2u);
    EXPECT_EQ(c.status.message()[0], 'm');
  }
}

TEST(StatusTest, CodeNamesAreDistinct) {
  std::set<std::string> names;
  for (StatusCode c : {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound,
                       StatusCode::kUnavailable, StatusCode::kTimeout, StatusCode::kCancelled,
                       StatusCode::kInternal}) {
    ASSERT_NE(StatusCodeName(c), nullptr);
    names.insert(StatusCodeName(c));
  }
  EXPECT_EQ(names.size(), 7u);
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  Status s = Status::NotFound("no actor named 'counter'");
  std::string text = s.ToString();
  EXPECT_THAT(text, HasSubstr(StatusCodeName(StatusCode::kNotFound)));
  EXPECT_THAT(text, HasSubstr("no actor named 'counter'"));
  EXPECT_FALSE(Status::Ok().ToString().empty());
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  Result<std::string> s = std::string("abc");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 3u);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = Status::Timeout("too slow");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(r.status().message(), "too slow");
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace orrery
