// The registry of remote callables (orrery/api/registry.h): ORRERY_REMOTE registers
// functions, factories and methods by name; entries invoke through msgpack arrays; bad
// arguments are ConvertErrors; duplicate names are reported, not silently replaced.
#include "orrery/api/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/internal/kept_memory.h"
#include "orrery/api/calls.h"
#include "orrery/errors.h"

namespace {

using orrery::internal::ConvertError;
using orrery::internal::FindByName;
using orrery::internal::FunctionEntry;
using orrery::internal::FunctionKind;
using orrery::internal::Pack;
using orrery::internal::Unpack;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

int RegAdd(int a, int b) { return a + b; }
std::string RegConcat(const std::string& a, std::vector<std::string> rest) {
  std::string out = a;
  for (const auto& r : rest) out += r;
  return out;
}
int g_side_effect = 0;
void RegSetSideEffect(int v) { g_side_effect = v; }
int RegThrows(int) { throw std::invalid_argument("bad input"); }
int RegNotRegistered(int x) { return x; }

struct RegPoint {
  int x = 0;
  int y = 0;
  MSGPACK_DEFINE(x, y);
};
int RegManhattan(RegPoint p) { return std::abs(p.x) + std::abs(p.y); }

class RegCounter {
 public:
  explicit RegCounter(int start) : value_(start) {}
  static RegCounter* Create(int start) { return new RegCounter(start); }
  static RegCounter* CreateFailing(std::string why) { throw std::runtime_error(why); }
  int Inc(int by) {
    value_ += by;
    return value_;
  }
  int Get() const { return value_; }
  void Reset() { value_ = 0; }
  int NotRegistered() { return -1; }

 private:
  int value_;
};

// Counts its copies: a result returned by reference must be packed from where it is.
struct RegCounted {
  static inline int copies = 0;
  RegCounted() = default;
  explicit RegCounted(std::vector<int> values) : v(std::move(values)) {}
  RegCounted(const RegCounted& o) : v(o.v) { ++copies; }
  RegCounted(RegCounted&&) = default;
  RegCounted& operator=(const RegCounted& o) {
    v = o.v;
    ++copies;
    return *this;
  }
  RegCounted& operator=(RegCounted&&) = default;
  std::vector<int> v;
  MSGPACK_DEFINE(v);
};
const RegCounted& RegGlobalCounted() {
  static const RegCounted held(std::vector<int>{4, 5});
  return held;
}
class RegHolder {
 public:
  static RegHolder* Create() { return new RegHolder(); }
  const RegCounted& Held() const { return held_; }
  RegCounted& HeldMutable() { return held_; }
  RegCounted HeldCopy() const { return held_; }
  RegCounted&& Drain() { return std::move(held_); }

 private:
  RegCounted held_{std::vector<int>{1, 2, 3}};
};
// Where each vector RegMakeBytes made lives.
std::vector<const void*> g_made_at;
std::vector<uint8_t> RegMakeBytes(uint64_t n) {
  std::vector<uint8_t> b(n, 3);
  g_made_at.push_back(b.data());
  return b;
}
uint64_t RegTakeBytes(std::vector<uint8_t> b) { return b.size(); }
uint64_t RegReadBytes(const std::vector<uint8_t>& b) { return b.size(); }
// What the caller gets for a callable returning a reference: the value's ref.
static_assert(std::is_same_v<orrery::internal::RemoteResult<const RegCounted&>::type,
                             orrery::ObjectRef<RegCounted>>);
static_assert(std::is_same_v<orrery::internal::RemoteResult<RegCounted&>::type,
                             orrery::ObjectRef<RegCounted>>);

ORRERY_REMOTE(RegAdd, RegConcat, RegSetSideEffect, RegThrows, RegManhattan, RegCounter::Create,
              RegCounter::CreateFailing, &RegCounter::Inc, &RegCounter::Get, &RegCounter::Reset,
              RegGlobalCounted, RegHolder::Create, &RegHolder::Held, &RegHolder::HeldMutable,
              &RegHolder::HeldCopy, &RegHolder::Drain, RegMakeBytes, RegTakeBytes, RegReadBytes);

// Invokes `entry` with `args` packed as a msgpack array, as a worker would.
template <typename... A>
std::string Invoke(const FunctionEntry& entry, void* self, void** instance, const A&... args) {
  std::string bytes = Pack(std::make_tuple(args...));
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  return entry.invoke(self, oh.get(), instance);
}

std::string InvokeRaw(const FunctionEntry& entry, const std::string& bytes) {
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  return entry.invoke(nullptr, oh.get(), nullptr);
}

const FunctionEntry& MustFind(const std::string& name) {
  const FunctionEntry* e = FindByName(name);
  if (e == nullptr) throw std::runtime_error("not registered: " + name);
  return *e;
}

TEST(RegistryTest, RemoteRegistersEveryKindByName) {
  const FunctionEntry* add = FindByName("RegAdd");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->name, "RegAdd");
  EXPECT_EQ(add->kind, FunctionKind::kFunction);
  EXPECT_EQ(add->arity, 2);

  const FunctionEntry* create = FindByName("RegCounter::Create");
  ASSERT_NE(create, nullptr);
  EXPECT_EQ(create->kind, FunctionKind::kFactory);
  EXPECT_EQ(create->arity, 1);
  EXPECT_NE(create->deleter, nullptr);

  const FunctionEntry* inc = FindByName("RegCounter::Inc");
  ASSERT_NE(inc, nullptr) << "'&RegCounter::Inc' must register as 'RegCounter::Inc'";
  EXPECT_EQ(inc->kind, FunctionKind::kMethod);
  EXPECT_EQ(inc->arity, 1);

  const FunctionEntry* get = FindByName("RegCounter::Get");
  ASSERT_NE(get, nullptr) << "const methods register too";
  EXPECT_EQ(get->kind, FunctionKind::kMethod);
  EXPECT_EQ(get->arity, 0);

  EXPECT_EQ(FindByName("RegNotRegistered"), nullptr);
  EXPECT_EQ(FindByName("&RegCounter::Inc"), nullptr);
  EXPECT_EQ(FindByName(""), nullptr);
}

TEST(RegistryTest, RegisteredNamesListsEverything) {
  std::vector<std::string> names = orrery::internal::RegisteredNames();
  for (const char* n : {"RegAdd", "RegConcat", "RegSetSideEffect", "RegThrows", "RegManhattan",
                        "RegCounter::Create", "RegCounter::CreateFailing", "RegCounter::Inc",
                        "RegCounter::Get", "RegCounter::Reset"}) {
    EXPECT_THAT(names, Contains(std::string(n)));
  }
}

TEST(RegistryTest, KeysMapBackToNames) {
  using orrery::internal::FindNameByKey;
  using orrery::internal::KeyOf;
  const std::string* add = FindNameByKey(KeyOf(&RegAdd));
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(*add, "RegAdd");
  const std::string* inc = FindNameByKey(KeyOf(&RegCounter::Inc));
  ASSERT_NE(inc, nullptr);
  EXPECT_EQ(*inc, "RegCounter::Inc");
  const std::string* create = FindNameByKey(KeyOf(&RegCounter::Create));
  ASSERT_NE(create, nullptr);
  EXPECT_EQ(*create, "RegCounter::Create");
  EXPECT_EQ(FindNameByKey(KeyOf(&RegNotRegistered)), nullptr);
  EXPECT_EQ(FindNameByKey(KeyOf(&RegCounter::NotRegistered)), nullptr);
  EXPECT_NE(KeyOf(&RegAdd), KeyOf(&RegThrows));
}

TEST(RegistryTest, NameOfOrThrowThrowsFunctionNotFoundListingKnownNames) {
  using orrery::internal::KeyOf;
  using orrery::internal::NameOfOrThrow;
  EXPECT_EQ(NameOfOrThrow(KeyOf(&RegAdd), "function"), "RegAdd");
  try {
    NameOfOrThrow(KeyOf(&RegNotRegistered), "function");
    FAIL() << "expected FunctionNotFoundError";
  } catch (const orrery::FunctionNotFoundError& e) {
    EXPECT_THAT(e.what(), HasSubstr("RegAdd")) << "the message should list what is registered";
  }
}

TEST(RegistryTest, InvokesFunctions) {
  EXPECT_EQ(Unpack<int>(Invoke(MustFind("RegAdd"), nullptr, nullptr, 2, 3), "r"), 5);
  EXPECT_EQ(Unpack<std::string>(Invoke(MustFind("RegConcat"), nullptr, nullptr, std::string("a"),
                                       std::vector<std::string>{"b", "c"}),
                                "r"),
            "abc");
  EXPECT_EQ(Unpack<int>(Invoke(MustFind("RegManhattan"), nullptr, nullptr, RegPoint{3, -4}), "r"),
            7);
}

TEST(RegistryTest, VoidFunctionReturnsNil) {
  g_side_effect = 0;
  std::string result = Invoke(MustFind("RegSetSideEffect"), nullptr, nullptr, 17);
  EXPECT_EQ(g_side_effect, 17);
  msgpack::object_handle oh = msgpack::unpack(result.data(), result.size());
  EXPECT_EQ(oh.get().type, msgpack::type::NIL);
}

TEST(RegistryTest, FactoryCreatesInstanceAndMethodsRunOnIt) {
  void* instance = nullptr;
  std::string r = Invoke(MustFind("RegCounter::Create"), nullptr, &instance, 10);
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(Unpack<int>(Invoke(MustFind("RegCounter::Inc"), instance, nullptr, 5), "r"), 15);
  EXPECT_EQ(Unpack<int>(Invoke(MustFind("RegCounter::Inc"), instance, nullptr, -2), "r"), 13);
  EXPECT_EQ(Unpack<int>(Invoke(MustFind("RegCounter::Get"), instance, nullptr), "r"), 13);
  std::string nil = Invoke(MustFind("RegCounter::Reset"), instance, nullptr);
  EXPECT_EQ(nil, orrery::internal::PackNil());
  EXPECT_EQ(static_cast<RegCounter*>(instance)->Get(), 0);
  MustFind("RegCounter::Create").deleter(instance);
}

TEST(RegistryTest, AResultReturnedByReferenceIsPackedWithoutACopy) {
  void* instance = nullptr;
  Invoke(MustFind("RegHolder::Create"), nullptr, &instance);
  ASSERT_NE(instance, nullptr);
  RegCounted::copies = 0;
  for (const char* name : {"RegHolder::Held", "RegHolder::HeldMutable"}) {
    auto got = Unpack<RegCounted>(Invoke(MustFind(name), instance, nullptr), "r");
    EXPECT_THAT(got.v, ElementsAre(1, 2, 3)) << name;
  }
  auto global = Unpack<RegCounted>(Invoke(MustFind("RegGlobalCounted"), nullptr, nullptr), "r");
  EXPECT_THAT(global.v, ElementsAre(4, 5));
  EXPECT_EQ(RegCounted::copies, 0);
  // A method returning a copy makes it, as its code says.
  Invoke(MustFind("RegHolder::HeldCopy"), instance, nullptr);
  EXPECT_EQ(RegCounted::copies, 1);
  // One returning an rvalue reference gives its value up, as `std::move` asks.
  auto drained = Unpack<RegCounted>(Invoke(MustFind("RegHolder::Drain"), instance, nullptr), "r");
  EXPECT_THAT(drained.v, ElementsAre(1, 2, 3));
  EXPECT_TRUE(static_cast<RegHolder*>(instance)->Held().v.empty());
  EXPECT_EQ(RegCounted::copies, 1);
  MustFind("RegHolder::Create").deleter(instance);
}

// A large vector a callable returns by value is let go once packed; the worker takes its room
// back after the call (ReclaimLandings), and the callable's next vector gets that room,
// whatever was allocated in between (here a block of the same size, which would otherwise
// have taken it). Before, the next vector landed in new memory.
TEST(RegistryTest, TheRoomOfAResultLetGoIsTheNextCallsToTake) {
  if (!orrery::internal::KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept here";
  constexpr uint64_t kBytes = uint64_t{32} << 20;
  g_made_at.clear();
  Invoke(MustFind("RegMakeBytes"), nullptr, nullptr, kBytes);
  orrery::internal::ReclaimLandings();
  EXPECT_EQ(orrery::internal::ParkedLandingBytes(), kBytes);
  // A call in between that makes no large value: its end parks the room again.
  EXPECT_EQ(Unpack<int>(Invoke(MustFind("RegAdd"), nullptr, nullptr, 2, 3), "r"), 5);
  orrery::internal::ReclaimLandings();
  EXPECT_EQ(orrery::internal::ParkedLandingBytes(), kBytes);
  std::unique_ptr<char[]> between(new char[kBytes]);
  std::string packed = Invoke(MustFind("RegMakeBytes"), nullptr, nullptr, kBytes);
  EXPECT_EQ(orrery::internal::ParkedLandingBytes(), kBytes) << "not taken back by the call";
  ASSERT_EQ(g_made_at.size(), 2u);
  // The same room, or one that starts a little before it (merged with a free neighbour).
  auto apart =
      std::abs(reinterpret_cast<intptr_t>(g_made_at[1]) - reinterpret_cast<intptr_t>(g_made_at[0]));
  EXPECT_LT(apart, intptr_t{1} << 20) << "the second vector landed in new memory";
  EXPECT_EQ(Unpack<std::vector<uint8_t>>(packed, "r").at(kBytes - 1), 3);
  orrery::internal::ReclaimLandings();
  orrery::internal::StopKeepingFreedMemory();  // lets go of what the test parked
  EXPECT_EQ(orrery::internal::ParkedLandingBytes(), 0u);
  EXPECT_TRUE(orrery::internal::KeepFreedMemory());
}

// The rooms a call's large arguments and result leave are taken back before the call returns
// (by value or by reference, the arguments the user's code did not keep): what other threads
// allocate while the worker ends the call cannot carve them. Before, they were only taken
// back by the worker's ReclaimLandings after the call, and a small block allocated in between
// by another thread left the next argument to land in new memory.
TEST(RegistryTest, TheRoomsOfACallsArgumentsAndResultAreTakenBackBeforeItReturns) {
  if (!orrery::internal::KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept here";
  constexpr uint64_t kBytes = uint64_t{32} << 20;
  const std::vector<uint8_t> value(kBytes, 5);
  for (const char* name : {"RegTakeBytes", "RegReadBytes"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(Unpack<uint64_t>(Invoke(MustFind(name), nullptr, nullptr, value), "r"), kBytes);
    EXPECT_EQ(orrery::internal::ParkedLandingBytes(), kBytes);
    // The next call's argument takes the room: none is parked while its user code runs.
    EXPECT_EQ(Unpack<uint64_t>(Invoke(MustFind(name), nullptr, nullptr, value), "r"), kBytes);
    EXPECT_EQ(orrery::internal::ParkedLandingBytes(), kBytes);
  }
  Invoke(MustFind("RegMakeBytes"), nullptr, nullptr, kBytes);
  EXPECT_EQ(orrery::internal::ParkedLandingBytes(), 2 * kBytes) << "an argument's and a result's";
  orrery::internal::StopKeepingFreedMemory();  // lets go of what the test parked
  EXPECT_EQ(orrery::internal::ParkedLandingBytes(), 0u);
  EXPECT_TRUE(orrery::internal::KeepFreedMemory());
}

TEST(RegistryTest, UserExceptionsPassThrough) {
  EXPECT_THROW(Invoke(MustFind("RegThrows"), nullptr, nullptr, 1), std::invalid_argument);
  void* instance = nullptr;
  EXPECT_THROW(Invoke(MustFind("RegCounter::CreateFailing"), nullptr, &instance, std::string("no")),
               std::runtime_error);
}

TEST(RegistryTest, WrongArityIsConvertError) {
  const FunctionEntry& add = MustFind("RegAdd");
  EXPECT_THROW(Invoke(add, nullptr, nullptr, 1), ConvertError);
  EXPECT_THROW(Invoke(add, nullptr, nullptr, 1, 2, 3), ConvertError);
  EXPECT_THROW(InvokeRaw(add, Pack(std::vector<int>{})), ConvertError);
  try {
    Invoke(add, nullptr, nullptr, 1);
    FAIL() << "expected ConvertError";
  } catch (const ConvertError& e) {
    EXPECT_THAT(e.what(), HasSubstr("RegAdd"));
    EXPECT_THAT(e.what(), HasSubstr("2"));
  }
}

TEST(RegistryTest, ArgumentsNotAnArrayIsConvertError) {
  const FunctionEntry& add = MustFind("RegAdd");
  EXPECT_THROW(InvokeRaw(add, Pack(1)), ConvertError);
  EXPECT_THROW(InvokeRaw(add, orrery::internal::PackNil()), ConvertError);
  EXPECT_THROW(InvokeRaw(add, Pack(std::map<std::string, int>{{"a", 1}})), ConvertError);
}

TEST(RegistryTest, WrongArgumentTypeIsConvertErrorNamingTheArgument) {
  const FunctionEntry& add = MustFind("RegAdd");
  try {
    Invoke(add, nullptr, nullptr, 1, std::string("two"));
    FAIL() << "expected ConvertError";
  } catch (const ConvertError& e) {
    EXPECT_THAT(e.what(), HasSubstr("argument 2"));
    EXPECT_THAT(e.what(), HasSubstr("RegAdd"));
  }
  EXPECT_THROW(Invoke(MustFind("RegManhattan"), nullptr, nullptr, std::string("point")),
               ConvertError);
  void* instance = nullptr;
  EXPECT_THROW(Invoke(MustFind("RegCounter::Create"), nullptr, &instance, std::string("ten")),
               ConvertError);
  EXPECT_EQ(instance, nullptr);
}

TEST(RegistryTest, DuplicateNameIsRejectedAndReported) {
  using orrery::internal::RegisterEntry;
  using orrery::internal::UnregisterForTest;
  const std::string name = "RegistryTest_duplicate_name_7f3a";
  FunctionEntry first = orrery::internal::MakeFunctionEntry(name, &RegAdd);
  FunctionEntry second = orrery::internal::MakeFunctionEntry(name, &RegThrows);

  orrery::Status s1 = RegisterEntry(first, "registry-test-key-1");
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  orrery::Status s2 = RegisterEntry(second, "registry-test-key-2");
  EXPECT_FALSE(s2.ok());
  EXPECT_EQ(s2.code(), orrery::StatusCode::kInvalidArgument);
  EXPECT_THAT(s2.message(), HasSubstr(name));

  std::vector<std::string> errors = orrery::internal::RegistrationErrors();
  EXPECT_THAT(errors, Contains(HasSubstr(name)));

  // The first registration stays in force.
  const FunctionEntry* found = FindByName(name);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(Unpack<int>(Invoke(*found, nullptr, nullptr, 20, 22), "r"), 42);

  UnregisterForTest(name);
  EXPECT_EQ(FindByName(name), nullptr);
}

TEST(RegistryTest, UnregisterForgetsAName) {
  const std::string name = "RegistryTest_unregister_91bc";
  ASSERT_TRUE(orrery::internal::RegisterEntry(orrery::internal::MakeFunctionEntry(name, &RegAdd),
                                              "registry-test-key-3")
                  .ok());
  ASSERT_NE(FindByName(name), nullptr);
  orrery::internal::UnregisterForTest(name);
  EXPECT_EQ(FindByName(name), nullptr);
  // A forgotten name may be registered again.
  EXPECT_TRUE(orrery::internal::RegisterEntry(orrery::internal::MakeFunctionEntry(name, &RegAdd),
                                              "registry-test-key-4")
                  .ok());
  orrery::internal::UnregisterForTest(name);
}

TEST(SplitRemoteNamesTest, StripsSpacesAndAmpersands) {
  using orrery::internal::SplitRemoteNames;
  EXPECT_THAT(SplitRemoteNames("Add, Counter::Create, &Counter::Inc"),
              ElementsAre("Add", "Counter::Create", "Counter::Inc"));
  EXPECT_THAT(SplitRemoteNames("Add"), ElementsAre("Add"));
  EXPECT_THAT(SplitRemoteNames("  A,\n\t&B::C  ,D"), ElementsAre("A", "B::C", "D"));
  EXPECT_THAT(SplitRemoteNames("& ns::Klass::Method"), ElementsAre("ns::Klass::Method"));
}

}  // namespace
