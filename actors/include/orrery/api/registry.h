// The registry of remote functions, actor factories and actor methods, filled by
// ORRERY_REMOTE at static-initialization time. Workers run the driver's own executable, so
// the same registry exists in every process of a job.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "orrery/api/async.h"
#include "orrery/api/object_ref.h"
#include "orrery/api/runtime_api.h"
#include "orrery/api/serialize.h"
#include "orrery/api/stream.h"
#include "orrery/status.h"

namespace orrery::internal {

enum class FunctionKind { kFunction, kFactory, kMethod };

// Runs a registered callable. `self` is the actor instance for methods (else null); `args`
// is a msgpack array. Returns the msgpack-encoded result (for factories: nothing; the new
// instance is stored in *instance). Throws ConvertError for bad arguments; lets the user's
// exceptions through for the caller to report.
using Invoker =
    std::function<std::string(void* self, const msgpack::object& args, void** instance)>;
using Deleter = void (*)(void*);
// Starts an async method (one returning orrery::Async): runs it until it first suspends;
// `done` runs once it has ended, with its packed result or its error. Throws ConvertError for
// bad arguments (done is not called then).
using AsyncDone = std::function<void(std::string result, std::exception_ptr error)>;
using AsyncInvoker = std::function<void(void* self, const msgpack::object& args, AsyncDone done)>;

struct FunctionEntry {
  std::string name;
  FunctionKind kind;
  int arity;
  Invoker invoke;
  Deleter deleter = nullptr;  // factories: deletes the instance
  // Functions: the function itself and typeid(F).name(), for callers inside the process
  // that run it locally with arguments that cannot travel (a train loop's Context&).
  void (*raw)() = nullptr;
  std::string signature;
  // Async methods: how to start one (invoke then only throws).
  AsyncInvoker async_invoke;
};

// A parameter that cannot come over the wire: a non-const lvalue reference.
template <typename A>
inline constexpr bool kLocalOnlyParam =
    std::is_lvalue_reference_v<A> && !std::is_const_v<std::remove_reference_t<A>>;

// Registers `entry` under entry.name with the identity key of the C++ callable.
// A name registered twice is an error: the registry remembers it, returns InvalidArgument,
// and Init() refuses to start.
Status RegisterEntry(FunctionEntry entry, const std::string& key);
const FunctionEntry* FindByName(const std::string& name);
// The registered name of a callable, or nullptr.
const std::string* FindNameByKey(const std::string& key);
std::vector<std::string> RegisteredNames();

// The registered function with this name and exact type, or nullptr.
template <typename F>
F FindLocalFunction(const std::string& name) {
  const FunctionEntry* e = FindByName(name);
  if (e == nullptr || e->raw == nullptr || e->signature != typeid(F).name()) return nullptr;
  return reinterpret_cast<F>(e->raw);
}
// Errors found during registration (duplicate names); empty when all is well.
std::vector<std::string> RegistrationErrors();
// For tests: forgets a name.
void UnregisterForTest(const std::string& name);

// Identity key of a function pointer or member function pointer.
template <typename F>
std::string KeyOf(F f) {
  std::string key(typeid(F).name());
  key.push_back('#');
  key.append(reinterpret_cast<const char*>(&f), sizeof(F));
  return key;
}

// Name a callable was registered under; throws FunctionNotFoundError listing the known ones.
const std::string& NameOfOrThrow(const std::string& key, const char* what);

template <typename T>
T ConvertArg(const msgpack::object& o, size_t index, const char* fn) {
  try {
    return o.as<T>();
  } catch (const std::exception&) {
    throw ConvertError(std::string("argument ") + std::to_string(index + 1) + " of " + fn +
                       ": cannot convert a msgpack " + MsgpackTypeName(o) +
                       " to the parameter type");
  }
}

template <typename... Args, size_t... I>
std::tuple<std::decay_t<Args>...> ConvertArgs(const msgpack::object& args, const char* fn,
                                              std::index_sequence<I...>) {
  if (args.type != msgpack::type::ARRAY || args.via.array.size != sizeof...(Args)) {
    throw ConvertError(std::string(fn) + " takes " + std::to_string(sizeof...(Args)) +
                       " arguments, got " +
                       std::to_string(args.type == msgpack::type::ARRAY ? args.via.array.size : 0));
  }
  return std::tuple<std::decay_t<Args>...>(
      ConvertArg<std::decay_t<Args>>(args.via.array.ptr[I], I, fn)...);
}

// Packs a call's result: a large one in place into the node's store (BeginStoredResult),
// the rest into the returned bytes.
template <typename R>
std::string PackResult(const R& r) {
  ScopedRefCollector nested;  // refs inside the result: the caller keeps them
  size_t size = PackedSize(r);
  char* data = nullptr;
  std::string bytes;
  if (size > kInlineValueMaxBytes && BeginStoredResult(size, &data)) {
    try {
      PackInto(r, data, size);
    } catch (...) {
      AbandonStoredResult();
      throw;
    }
    EndStoredResult();
  } else {
    bytes = Pack(r);
  }
  KeepResultRefs(nested.Take());
  return bytes;
}

// What a method's result is held as while it is packed: a reference as itself (packed from
// the object it names, with no copy), an rvalue reference as the value it moves out (what
// `return std::move(member_);` asks for).
template <typename R>
using HeldResult = std::conditional_t<std::is_rvalue_reference_v<R>, std::remove_cvref_t<R>, R>;

// Packs what a call returned: a Stream's values are sent one by one (DriveStream) and its
// result is their number.
template <typename R>
std::string PackReturn(R&& r) {
  if constexpr (IsStream<std::decay_t<R>>::value) {
    return DriveStream(std::move(r), [](const auto& v) { return PackResult(v); });
  } else {
    std::string packed = PackResult(r);
    // A value (not a reference to one the actor keeps) is let go once packed.
    if constexpr (!std::is_lvalue_reference_v<R>) LetResultGo(r);
    return packed;
  }
}

// A Stream is driven, so moved from: returned by value only.
template <typename R>
inline constexpr bool kStreamByReference =
    std::is_reference_v<R>&& IsStream<std::remove_cvref_t<R>>::value;

// Runs a call: converts its arguments (`convert`), runs the user's code (`run`) on them, lets
// them go and takes back the rooms of large ones at once (kept_memory.h: memory let go and
// left free while the call ends would be carved by other threads' small allocations, and the
// next call's arguments land in new memory), then packs the result.
template <typename R, typename Convert, typename Run>
std::string InvokeAndPack(const Convert& convert, Run&& run) {
  auto call = [&]() -> HeldResult<R> {
    auto args = convert();
    MakeRoomForUserCode();  // the user's code may take the room a result left
    return std::apply(run, std::move(args));
  };
  if constexpr (std::is_void_v<R>) {
    call();
    ReclaimLandings();
    return PackNil();
  } else {
    HeldResult<R> r = call();
    ReclaimLandings();
    return PackReturn(static_cast<HeldResult<R>&&>(r));
  }
}

template <typename R, typename... Args>
FunctionEntry MakeFunctionEntry(const std::string& name, R (*f)(Args...)) {
  static_assert(!kStreamByReference<R>, "a remote function returns its Stream<T> by value");
  FunctionEntry e{name, FunctionKind::kFunction, int(sizeof...(Args)), nullptr, nullptr};
  e.raw = reinterpret_cast<void (*)()>(f);
  e.signature = typeid(R(*)(Args...)).name();
  if constexpr ((kLocalOnlyParam<Args> || ...)) {
    // E.g. a train loop taking Context&: registered so workers find it by name, but it
    // cannot be called remotely with arguments.
    e.invoke = [name](void*, const msgpack::object&, void**) -> std::string {
      throw ConvertError(name +
                         " takes a non-const reference parameter, so it cannot be called remotely "
                         "(a train loop runs through TorchTrainer)");
    };
  } else if constexpr (std::is_pointer_v<R> && std::is_class_v<std::remove_pointer_t<R>>) {
    using T = std::remove_pointer_t<R>;
    e.kind = FunctionKind::kFactory;
    e.deleter = [](void* p) { delete static_cast<T*>(p); };
    e.invoke = [f, name](void*, const msgpack::object& args, void** instance) -> std::string {
      auto tuple = ConvertArgs<Args...>(args, name.c_str(), std::index_sequence_for<Args...>{});
      *instance = std::apply(f, std::move(tuple));
      return std::string();
    };
  } else {
    e.invoke = [f, name](void*, const msgpack::object& args, void**) -> std::string {
      return InvokeAndPack<R>(
          [&] {
            return ConvertArgs<Args...>(args, name.c_str(), std::index_sequence_for<Args...>{});
          },
          f);
    };
  }
  return e;
}

template <typename T>
void FinishAsync(AsyncDone& done, std::optional<T>& value, std::exception_ptr error) {
  if (error) return done(std::string(), error);
  std::string packed;
  try {
    packed = PackResult(*value);
  } catch (...) {
    return done(std::string(), std::current_exception());
  }
  done(std::move(packed), nullptr);
}
inline void FinishAsync(AsyncDone& done, std::exception_ptr error) {
  if (error) return done(std::string(), error);
  done(PackNil(), nullptr);
}

// The AsyncInvoker of a method returning Async<T>: its arguments live until it ends.
template <typename Obj, typename M, typename... Args>
AsyncInvoker MakeAsyncInvoker(const std::string& name, M m) {
  return [m, name](void* self, const msgpack::object& args, AsyncDone done) {
    auto tuple = std::make_shared<std::tuple<std::decay_t<Args>...>>(
        ConvertArgs<Args...>(args, name.c_str(), std::index_sequence_for<Args...>{}));
    Obj* obj = static_cast<Obj*>(self);
    auto coro = std::apply([&](auto&... a) { return (obj->*m)(a...); }, *tuple);
    std::move(coro).Start([tuple, done = std::move(done)](auto&... outcome) mutable {
      FinishAsync(done, outcome...);
    });
  };
}

// An async method's FunctionEntry: invoke refuses (the worker starts it with async_invoke).
template <typename Obj, typename M, typename... Args>
FunctionEntry MakeAsyncMethodEntry(const std::string& name, M m) {
  FunctionEntry e{name, FunctionKind::kMethod, int(sizeof...(Args)), nullptr, nullptr};
  e.invoke = [name](void*, const msgpack::object&, void**) -> std::string {
    throw ConvertError(name + " is an async method: it runs on its actor's call loop");
  };
  e.async_invoke = MakeAsyncInvoker<Obj, M, Args...>(name, m);
  return e;
}

template <typename R, typename C, typename... Args>
FunctionEntry MakeSyncMethodEntry(const std::string& name, R (C::*m)(Args...)) {
  static_assert(!kStreamByReference<R>, "a remote method returns its Stream<T> by value");
  FunctionEntry e{name, FunctionKind::kMethod, int(sizeof...(Args)), nullptr, nullptr};
  e.invoke = [m, name](void* self, const msgpack::object& args, void**) -> std::string {
    C* obj = static_cast<C*>(self);
    return InvokeAndPack<R>(
        [&] {
          return ConvertArgs<Args...>(args, name.c_str(), std::index_sequence_for<Args...>{});
        },
        [&](auto&&... a) -> HeldResult<R> { return (obj->*m)(std::forward<decltype(a)>(a)...); });
  };
  return e;
}

template <typename R, typename C, typename... Args>
FunctionEntry MakeSyncMethodEntry(const std::string& name, R (C::*m)(Args...) const) {
  static_assert(!kStreamByReference<R>, "a remote method returns its Stream<T> by value");
  using NonConst = R (C::*)(Args...);
  FunctionEntry e{name, FunctionKind::kMethod, int(sizeof...(Args)), nullptr, nullptr};
  e.invoke = [m, name](void* self, const msgpack::object& args, void**) -> std::string {
    const C* obj = static_cast<const C*>(self);
    return InvokeAndPack<R>(
        [&] {
          return ConvertArgs<Args...>(args, name.c_str(), std::index_sequence_for<Args...>{});
        },
        [&](auto&&... a) -> HeldResult<R> { return (obj->*m)(std::forward<decltype(a)>(a)...); });
  };
  (void)sizeof(NonConst);
  return e;
}

template <typename R, typename C, typename... Args>
FunctionEntry MakeMethodEntry(const std::string& name, R (C::*m)(Args...)) {
  if constexpr (IsAsync<R>::value) {
    return MakeAsyncMethodEntry<C, decltype(m), Args...>(name, m);
  } else {
    return MakeSyncMethodEntry(name, m);
  }
}
template <typename R, typename C, typename... Args>
FunctionEntry MakeMethodEntry(const std::string& name, R (C::*m)(Args...) const) {
  if constexpr (IsAsync<R>::value) {
    return MakeAsyncMethodEntry<const C, decltype(m), Args...>(name, m);
  } else {
    return MakeSyncMethodEntry(name, m);
  }
}

// Splits the stringified ORRERY_REMOTE argument list into clean names ("&Counter::Inc" ->
// "Counter::Inc").
std::vector<std::string> SplitRemoteNames(const char* csv);

template <typename F>
void RegisterOne(const std::string& name, F f) {
  Status s;
  if constexpr (std::is_member_function_pointer_v<F>) {
    s = RegisterEntry(MakeMethodEntry(name, f), KeyOf(f));
  } else {
    s = RegisterEntry(MakeFunctionEntry(name, f), KeyOf(f));
  }
  (void)s;  // recorded in RegistrationErrors(); Init() reports it
}

template <typename... Fs>
bool RegisterAll(const char* csv, Fs... fs) {
  std::vector<std::string> names = SplitRemoteNames(csv);
  size_t i = 0;
  (RegisterOne(names.at(i++), fs), ...);
  return true;
}

}  // namespace orrery::internal

#define ORRERY_CONCAT_INNER(a, b) a##b
#define ORRERY_CONCAT(a, b) ORRERY_CONCAT_INNER(a, b)

// Registers functions, actor factories (static functions returning T*) and actor methods
// by name: ORRERY_REMOTE(Add, Counter::Create, &Counter::Inc);
// __COUNTER__, not __LINE__: two files compiled as one (a unity build) may register on the
// same line.
#define ORRERY_REMOTE(...)                                                            \
  [[maybe_unused]] static const bool ORRERY_CONCAT(orrery_registered_, __COUNTER__) = \
      ::orrery::internal::RegisterAll(#__VA_ARGS__, __VA_ARGS__)
