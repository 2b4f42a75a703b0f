// Task(...), Actor(...) and handle.Task(...): the builders that submit remote work.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "orrery/api/async.h"
#include "orrery/api/object_ref.h"
#include "orrery/api/registry.h"
#include "orrery/api/runtime_api.h"
#include "orrery/api/stream.h"

namespace orrery {

class PlacementGroup;
template <typename T>
class ActorHandle;

namespace internal {

// Writes `value` once into a new object of the node's store and seals it: its ref, or
// nullptr when it travels inline (small, or no store on this host). A value whose packing
// throws leaves nothing in the store.
template <typename T>
std::shared_ptr<RefHolder> PackIntoStore(const T& value) {
  size_t size = PackedSize(value);
  char* data = nullptr;
  auto ref = CreateObject(size, &data);
  if (!ref) return nullptr;
  try {
    PackInto(value, data, size);
  } catch (...) {
    AbandonObject(*ref);
    throw;
  }
  SealObject(*ref);
  return ref;
}

// Packs one argument for a parameter of type P: ObjectRefs become references resolved by
// the runtime; everything else is converted to P (a compile error if it cannot be) and
// packed.
template <typename P, typename A>
ArgSlot MakeArg(A&& a) {
  using D = std::decay_t<A>;
  if constexpr (IsObjectRef<D>::value && !IsObjectRef<std::decay_t<P>>::value) {
    return ArgSlot{std::string(), a.Holder()};
  } else {
    const std::decay_t<P>& value = std::forward<A>(a);
    ScopedRefCollector nested;  // refs inside the value live as long as the value is needed
    // A large value goes into the node's store once and travels by reference.
    if (auto ref = PackIntoStore(value)) {
      KeepContained(*ref, nested.Take());
      return ArgSlot{std::string(), std::move(ref), {}};
    }
    std::string bytes = Pack(value);
    return ArgSlot{std::move(bytes), nullptr, nested.Take()};
  }
}

template <typename... Params, typename... As>
std::vector<ArgSlot> MakeArgs(As&&... as) {
  static_assert(sizeof...(Params) == sizeof...(As),
                "wrong number of arguments for the remote call");
  ReclaimLandings();  // what the caller let go since its last call, before it is carved
  std::vector<ArgSlot> slots;
  slots.reserve(sizeof...(As));
  (slots.push_back(MakeArg<Params>(std::forward<As>(as))), ...);
  return slots;
}

// What Remote() returns for a callable returning R: ObjectRef<R>; for a Stream<T>, an
// ObjectRefGenerator<T>; for an Async<T> (an async actor method), ObjectRef<T>.
template <typename R>
struct RemoteResult {
  using type = ObjectRef<R>;
  static type Make(std::shared_ptr<RefHolder> ref) { return type(std::move(ref)); }
};
template <typename T>
struct RemoteResult<Stream<T>> {
  using type = ObjectRefGenerator<T>;
  static type Make(std::shared_ptr<RefHolder> ref) { return type(OpenStream(std::move(ref))); }
};
template <typename T>
struct RemoteResult<Async<T>> {
  using type = ObjectRef<T>;
  static type Make(std::shared_ptr<RefHolder> ref) { return type(std::move(ref)); }
};
// A method returning a reference (a getter's `const T&`) gives ObjectRef<T>: its value is
// packed from the reference, with no copy made first.
template <typename R>
struct RemoteResult<R&> : RemoteResult<std::remove_cv_t<R>> {};
template <typename R>
struct RemoteResult<R&&> : RemoteResult<std::remove_cv_t<R>> {};

// Shared option setters for the Task and Actor builders.
template <typename Derived>
class OptionsBuilder {
 public:
  Derived& SetResources(const Resources& resources) {
    options_.resources = resources;
    options_.resources_set = true;
    return self();
  }
  Derived& SetResource(const std::string& name, double value) {
    options_.resources[name] = value;
    options_.resources_set = true;
    return self();
  }
  // Variables and a working folder for the worker that runs it (docs/api.md "Runtime
  // environments"); checked at submission (ConfigError).
  Derived& SetRuntimeEnv(const RuntimeEnv& env) {
    options_.runtime_env = env;
    return self();
  }
  Derived& SetLabelSelector(const Labels& selector) {
    options_.label_selector = selector;
    return self();
  }
  Derived& SetPlacementGroup(const PlacementGroup& pg, int bundle_index = -1);
  Derived& SetSchedulingStrategy(DefaultSchedulingStrategy) {
    options_.strategy = 0;
    return self();
  }
  Derived& SetSchedulingStrategy(SpreadSchedulingStrategy) {
    options_.strategy = 1;
    return self();
  }
  Derived& SetSchedulingStrategy(const NodeAffinitySchedulingStrategy& s) {
    options_.strategy = 2;
    options_.affinity_node = s.node_id;
    options_.affinity_soft = s.soft;
    return self();
  }

 protected:
  Derived& self() { return static_cast<Derived&>(*this); }
  CallOptions options_;
};

}  // namespace internal

template <typename F>
class TaskCaller;

template <typename R, typename... Params>
class TaskCaller<R (*)(Params...)> : public internal::OptionsBuilder<TaskCaller<R (*)(Params...)>> {
 public:
  explicit TaskCaller(R (*f)(Params...))
      : name_(internal::NameOfOrThrow(internal::KeyOf(f), "function")) {}
  TaskCaller& SetMaxRetries(int n) {
    this->options_.max_retries = n;
    return *this;
  }
  // ObjectRef<R>; for a function returning Stream<T>, an ObjectRefGenerator<T>.
  template <typename... As>
  typename internal::RemoteResult<R>::type Remote(As&&... as) {
    return internal::RemoteResult<R>::Make(internal::SubmitTask(
        name_, internal::MakeArgs<Params...>(std::forward<As>(as)...), this->options_));
  }

 private:
  std::string name_;
};

template <typename F>
class ActorCreator;

template <typename T, typename... Params>
class ActorCreator<T* (*)(Params...)>
    : public internal::OptionsBuilder<ActorCreator<T* (*)(Params...)>> {
 public:
  explicit ActorCreator(T* (*f)(Params...))
      : name_(internal::NameOfOrThrow(internal::KeyOf(f), "actor factory")) {}
  ActorCreator& SetName(const std::string& name, const std::string& namespace_ = "") {
    this->options_.name = name;
    this->options_.namespace_ = namespace_;
    return *this;
  }
  ActorCreator& SetMaxRestarts(int n) {
    this->options_.max_restarts = n;
    return *this;
  }
  ActorCreator& SetMaxTaskRetries(int n) {
    this->options_.max_task_retries = n;
    return *this;
  }
  // Up to n calls run at once (default 1), each on a thread of the actor's process, which
  // it holds until it returns, waits included. For the methods returning orrery::Async: up to
  // n in flight, suspended or not, all on the actor's one call thread (default 1,000).
  ActorCreator& SetMaxConcurrency(int n) {
    this->options_.max_concurrency = n;
    this->options_.max_concurrency_set = true;
    return *this;
  }
  // At most n calls from this process to the actor may be pending (submitted and not yet
  // answered); a Remote() past that throws PendingCallsLimitExceededError at once, so a
  // caller that outpaces a slow actor learns it at submission, never by a hang. Default: as
  // many as fit a memory budget for their arguments (docs/api.md "Pending calls"); -1:
  // unbounded. Applies to the calls of the process that creates the actor.
  ActorCreator& SetMaxPendingCalls(int n) {
    this->options_.max_pending_calls = n;
    return *this;
  }
  ActorCreator& SetLifetime(ActorLifetime lifetime) {
    this->options_.lifetime = lifetime;
    return *this;
  }
  template <typename... As>
  ActorHandle<T> Remote(As&&... as);

 private:
  std::string name_;
};

template <typename F>
class ActorTaskCaller;

template <typename R, typename C, typename... Params>
class ActorTaskCaller<R (C::*)(Params...)> {
 public:
  ActorTaskCaller(ActorId actor, std::string name)
      : actor_(std::move(actor)), name_(std::move(name)) {}
  // ObjectRef<R>; for a method returning Stream<T>, an ObjectRefGenerator<T>.
  template <typename... As>
  typename internal::RemoteResult<R>::type Remote(As&&... as) {
    return internal::RemoteResult<R>::Make(internal::SubmitActorTask(
        actor_, name_, internal::MakeArgs<Params...>(std::forward<As>(as)...)));
  }

 private:
  ActorId actor_;
  std::string name_;
};

template <typename R, typename C, typename... Params>
class ActorTaskCaller<R (C::*)(Params...) const> : public ActorTaskCaller<R (C::*)(Params...)> {
 public:
  using ActorTaskCaller<R (C::*)(Params...)>::ActorTaskCaller;
};

// A handle to an actor. Cheap to copy; serializable, so it can be passed to other actors
// and tasks.
template <typename T>
class ActorHandle {
 public:
  ActorHandle() = default;
  explicit ActorHandle(ActorId id) : id_(std::move(id)) {}

  template <typename M>
  ActorTaskCaller<M> Task(M method) const {
    static_assert(std::is_member_function_pointer_v<M>, "Task() takes a member function pointer");
    return ActorTaskCaller<M>(id_,
                              internal::NameOfOrThrow(internal::KeyOf(method), "actor method"));
  }
  // Stops the actor. With no_restart=false it is restarted if it has restarts left.
  void Kill(bool no_restart = true) const { internal::KillActor(id_, no_restart); }
  const ActorId& ID() const { return id_; }

  template <typename Packer>
  void msgpack_pack(Packer& pk) const {
    pk.pack(id_.Binary());
  }
  void msgpack_unpack(const msgpack::object& o) {
    id_ = ActorId(UniqueId::FromBinary(o.as<std::string>()));
  }

 private:
  ActorId id_;
};

template <typename T, typename... Params>
template <typename... As>
ActorHandle<T> ActorCreator<T* (*)(Params...)>::Remote(As&&... as) {
  return ActorHandle<T>(internal::CreateActor(
      name_, internal::MakeArgs<Params...>(std::forward<As>(as)...), this->options_));
}

// Task(Add).Remote(1, 2)
template <typename R, typename... Params>
TaskCaller<R (*)(Params...)> Task(R (*f)(Params...)) {
  static_assert(!(std::is_pointer_v<R> && std::is_class_v<std::remove_pointer_t<R>>),
                "a function returning a pointer is an actor factory: use orrery::Actor()");
  return TaskCaller<R (*)(Params...)>(f);
}

// Actor(Counter::Create).Remote(0)
template <typename T, typename... Params>
ActorCreator<T* (*)(Params...)> Actor(T* (*factory)(Params...)) {
  return ActorCreator<T* (*)(Params...)>(factory);
}

}  // namespace orrery
