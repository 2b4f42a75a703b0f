// Config (orrery/config.h): environment variables and --orrery-* flags fill the fields a
// program left unset, malformed values are ConfigErrors, and consumed flags leave argv.
#include "orrery/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "orrery/errors.h"

namespace orrery {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sets an environment variable for the lifetime of the guard, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Owns a mutable argv built from string literals.
class Argv {
 public:
  Argv(std::initializer_list<const char*> args) {
    for (const char* a : args) storage_.emplace_back(a);
    for (auto& s : storage_) ptrs_.push_back(s.data());
    ptrs_.push_back(nullptr);
    argc_ = int(storage_.size());
  }
  int* argc() { return &argc_; }
  char** argv() { return ptrs_.data(); }
  std::vector<std::string> Remaining() const {
    return std::vector<std::string>(ptrs_.begin(), ptrs_.begin() + argc_);
  }

 private:
  std::vector<std::string> storage_;
  std::vector<char*> ptrs_;
  int argc_ = 0;
};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Start from a clean slate whatever the calling environment holds.
    for (const char* name : {"ORRERY_ADDRESS", "ORRERY_REDIS_ADDRESS", "ORRERY_NAMESPACE",
                             "ORRERY_NUM_CPUS", "ORRERY_LOG_LEVEL", "ORRERY_MEMORY_USAGE_THRESHOLD",
                             "ORRERY_MEMORY_MONITOR_REFRESH_MS"}) {
      guards_.push_back(std::make_unique<Unset>(name));
    }
  }
  struct Unset {
    explicit Unset(const char* name) : name_(name) {
      if (const char* old = std::getenv(name)) old_ = std::string(old);
      unsetenv(name);
    }
    ~Unset() {
      if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    }
    std::string name_;
    std::optional<std::string> old_;
  };
  std::vector<std::unique_ptr<Unset>> guards_;
};

TEST_F(ConfigTest, DefaultsAreTheEmbeddedCluster) {
  Config c = ApplyEnvironment(Config{});
  EXPECT_TRUE(c.address.empty());
  EXPECT_TRUE(c.redis_address.empty());
  EXPECT_EQ(c.num_cpus, -1);
  EXPECT_DOUBLE_EQ(c.infeasible_timeout_s, 5.0);
}

TEST_F(ConfigTest, EnvironmentFillsUnsetFields) {
  ScopedEnv a("ORRERY_ADDRESS", "10.0.0.1:6380");
  ScopedEnv r("ORRERY_REDIS_ADDRESS", "127.0.0.1:6379");
  ScopedEnv n("ORRERY_NAMESPACE", "team-a");
  ScopedEnv c("ORRERY_NUM_CPUS", "4");
  ScopedEnv l("ORRERY_LOG_LEVEL", "debug");
  Config config = ApplyEnvironment(Config{});
  EXPECT_EQ(config.address, "10.0.0.1:6380");
  EXPECT_EQ(config.redis_address, "127.0.0.1:6379");
  EXPECT_EQ(config.namespace_, "team-a");
  EXPECT_EQ(config.num_cpus, 4);
  EXPECT_EQ(config.log_level, "debug");
}

TEST_F(ConfigTest, FieldsSetInCodeWinOverEnvironment) {
  ScopedEnv a("ORRERY_ADDRESS", "10.0.0.1:6380");
  ScopedEnv c("ORRERY_NUM_CPUS", "4");
  Config base;
  base.address = "192.168.1.1:7000";
  base.num_cpus = 2;
  Config config = ApplyEnvironment(base);
  EXPECT_EQ(config.address, "192.168.1.1:7000");
  EXPECT_EQ(config.num_cpus, 2);
}

TEST_F(ConfigTest, MalformedNumberInEnvironmentIsConfigError) {
  {
    ScopedEnv c("ORRERY_NUM_CPUS", "abc");
    EXPECT_THROW(ApplyEnvironment(Config{}), ConfigError);
  }
  {
    ScopedEnv c("ORRERY_NUM_CPUS", "4x");
    EXPECT_THROW(ApplyEnvironment(Config{}), ConfigError);
  }
}

TEST_F(ConfigTest, ConfigErrorNamesTheVariable) {
  ScopedEnv c("ORRERY_NUM_CPUS", "lots");
  try {
    ApplyEnvironment(Config{});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ORRERY_NUM_CPUS"));
  }
}

TEST_F(ConfigTest, UnknownLogLevelInEnvironmentIsConfigError) {
  ScopedEnv l("ORRERY_LOG_LEVEL", "loud");
  EXPECT_THROW(ApplyEnvironment(Config{}), ConfigError);
}

TEST_F(ConfigTest, FlagsAreAppliedAndRemovedFromArgv) {
  Argv args{"prog",
            "--orrery-address=1.2.3.4:6380",
            "--gtest_filter=X",
            "positional",
            "--orrery-namespace=ns1",
            "--orrery-log-level=warn",
            "--orrery-redis-address=127.0.0.1:6390",
            "--other"};
  Config config = ApplyFlags(Config{}, args.argc(), args.argv());
  EXPECT_EQ(config.address, "1.2.3.4:6380");
  EXPECT_EQ(config.namespace_, "ns1");
  EXPECT_EQ(config.log_level, "warn");
  EXPECT_EQ(config.redis_address, "127.0.0.1:6390");
  EXPECT_THAT(args.Remaining(), ElementsAre("prog", "--gtest_filter=X", "positional", "--other"));
  EXPECT_EQ(args.argv()[*args.argc()], nullptr) << "argv[argc] must stay NULL";
}

TEST_F(ConfigTest, NoFlagsLeavesArgvAlone) {
  Argv args{"prog", "a", "--b"};
  Config config = ApplyFlags(Config{}, args.argc(), args.argv());
  EXPECT_TRUE(config.address.empty());
  EXPECT_THAT(args.Remaining(), ElementsAre("prog", "a", "--b"));
}

TEST_F(ConfigTest, FlagsOverrideEnvironment) {
  // Each step fills only what is still unset, so the stronger source goes first:
  // code, then flags, then the environment.
  ScopedEnv n("ORRERY_NAMESPACE", "from-env");
  ScopedEnv l("ORRERY_LOG_LEVEL", "error");
  Argv args{"prog", "--orrery-namespace=from-flag"};
  Config config = ApplyEnvironment(ApplyFlags(Config{}, args.argc(), args.argv()));
  EXPECT_EQ(config.namespace_, "from-flag");
  EXPECT_EQ(config.log_level, "error") << "the environment still fills what flags left unset";
}

TEST_F(ConfigTest, FlagTakesItsValueFromTheNextArgument) {
  Argv args{"prog", "--orrery-namespace", "spaced", "rest"};
  Config config = ApplyFlags(Config{}, args.argc(), args.argv());
  EXPECT_EQ(config.namespace_, "spaced");
  EXPECT_THAT(args.Remaining(), ElementsAre("prog", "rest"));
}

TEST_F(ConfigTest, UnknownOrreryFlagIsConfigError) {
  Argv args{"prog", "--orrery-bogus=1"};
  try {
    ApplyFlags(Config{}, args.argc(), args.argv());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--orrery-bogus"));
  }
}

TEST_F(ConfigTest, MalformedFlagValueIsConfigError) {
  Argv level{"prog", "--orrery-log-level=loud"};
  EXPECT_THROW(ApplyFlags(Config{}, level.argc(), level.argv()), ConfigError);
  Argv missing{"prog", "--orrery-namespace"};
  EXPECT_THROW(ApplyFlags(Config{}, missing.argc(), missing.argv()), ConfigError);
}

TEST_F(ConfigTest, AddressWithoutPortIsConfigError) {
  // Config::address is "host:port"; a value without a port is caught here rather than
  // becoming a connection failure later.
  Argv address{"prog", "--orrery-address=no-port-here"};
  EXPECT_THROW(ApplyFlags(Config{}, address.argc(), address.argv()), ConfigError);
  ScopedEnv a("ORRERY_ADDRESS", "also-no-port");
  EXPECT_THROW(ApplyEnvironment(Config{}), ConfigError);
}

TEST_F(ConfigTest, MemoryMonitorDefaultsAreRays) {
  Config c = ApplyEnvironment(Config{});
  EXPECT_DOUBLE_EQ(c.memory_usage_threshold, 0.95);
  EXPECT_EQ(c.memory_monitor_refresh_ms, 250);
  EXPECT_NO_THROW(ValidateConfig(c));
}

TEST_F(ConfigTest, MemoryUsageThresholdFromEnvironmentAndFlags) {
  {
    ScopedEnv t("ORRERY_MEMORY_USAGE_THRESHOLD", "0.8");
    ScopedEnv r("ORRERY_MEMORY_MONITOR_REFRESH_MS", "0");
    Config c = ApplyEnvironment(Config{});
    EXPECT_DOUBLE_EQ(c.memory_usage_threshold, 0.8);
    EXPECT_EQ(c.memory_monitor_refresh_ms, 0);
  }
  Argv args{"prog", "--orrery-memory-usage-threshold=1", "--orrery-memory-monitor-refresh-ms",
            "100"};
  Config c = ApplyFlags(Config{}, args.argc(), args.argv());
  EXPECT_DOUBLE_EQ(c.memory_usage_threshold, 1.0);
  EXPECT_EQ(c.memory_monitor_refresh_ms, 100);
  EXPECT_THAT(args.Remaining(), ElementsAre("prog"));
}

TEST_F(ConfigTest, MemoryUsageThresholdOutsideZeroToOneIsConfigError) {
  for (const char* bad : {"0", "-0.5", "1.01", "95", "nan", "abc", ""}) {
    std::string flag = std::string("--orrery-memory-usage-threshold=") + bad;
    Argv args{"prog", flag.c_str()};
    EXPECT_THROW(ApplyFlags(Config{}, args.argc(), args.argv()), ConfigError) << bad;
  }
  {
    ScopedEnv t("ORRERY_MEMORY_USAGE_THRESHOLD", "1.5");
    try {
      ApplyEnvironment(Config{});
      FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("ORRERY_MEMORY_USAGE_THRESHOLD"));
    }
  }
  Argv refresh{"prog", "--orrery-memory-monitor-refresh-ms=-1"};
  EXPECT_THROW(ApplyFlags(Config{}, refresh.argc(), refresh.argv()), ConfigError);
  Config set_in_code;
  set_in_code.memory_usage_threshold = 0;
  EXPECT_THROW(ValidateConfig(set_in_code), ConfigError);
  set_in_code.memory_usage_threshold = 0.5;
  set_in_code.memory_monitor_refresh_ms = -5;
  EXPECT_THROW(ValidateConfig(set_in_code), ConfigError);
}

TEST_F(ConfigTest, PrestartedWorkersFromEnvironmentAndFlagsWithinBounds) {
  EXPECT_EQ(Config{}.prestarted_workers, 16);
  {
    ScopedEnv p("ORRERY_PRESTARTED_WORKERS", "0");
    EXPECT_EQ(ApplyEnvironment(Config{}).prestarted_workers, 0);
  }
  Argv args{"prog", "--orrery-prestarted-workers=32"};
  EXPECT_EQ(ApplyFlags(Config{}, args.argc(), args.argv()).prestarted_workers, 32);
  for (const char* bad : {"-1", "1025", "4294967297", "many", ""}) {
    std::string flag = std::string("--orrery-prestarted-workers=") + bad;
    Argv a{"prog", flag.c_str()};
    EXPECT_THROW(ApplyFlags(Config{}, a.argc(), a.argv()), ConfigError) << bad;
  }
  Config set_in_code;
  set_in_code.prestarted_workers = -1;
  EXPECT_THROW(ValidateConfig(set_in_code), ConfigError);
}

}  // namespace
}  // namespace orrery
