// Orrery's public API (docs/api.md). Modelled on Ray's C++ API.
//
//   int Add(int a, int b);
//   ORRERY_REMOTE(Add, Counter::Create, &Counter::Inc);
//   orrery::Init();
//   auto r = orrery::Task(Add).Remote(1, 2);
//   int three = *orrery::Get(r);
//
// Threading: every function here may be called from any thread of the driver, and from
// actor methods and tasks inside workers (where a Get waits cooperatively and never
// deadlocks the actor). Errors are thrown as orrery::Error subclasses (orrery/errors.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "orrery/api/async.h"
#include "orrery/api/calls.h"
#include "orrery/api/object_ref.h"
#include "orrery/api/placement_group.h"
#include "orrery/api/registry.h"
#include "orrery/api/runtime_api.h"
#include "orrery/api/runtime_context.h"
#include "orrery/api/stream.h"
#include "orrery/buffer.h"
#include "orrery/config.h"
#include "orrery/errors.h"
#include "orrery/ids.h"
#include "orrery/version.h"

namespace orrery {

// Starts the runtime. With no address (and no ORRERY_ADDRESS) it starts the embedded default:
// a head and a node inside this process and one worker process per actor, each running
// this same executable. In a worker process Init() does not return: it serves calls until
// the worker is told to exit. So code before Init() in main() runs in workers too.
// Throws ConfigError (bad configuration, duplicate registrations) or ConnectionError.
void Init();
void Init(const Config& config);
void Init(int argc, char** argv);
void Init(const Config& config, int argc, char** argv);
bool IsInitialized();
// Stops this driver's workers (non-detached actors) and the embedded head and node.
void Shutdown();

// For programs whose main() cannot call Init() first (a test runner, say): call this at the
// top of main(). In a worker process it serves and exits; elsewhere it returns at once.
void RunWorkerIfRequested(int argc, char** argv);

// The value of a ready object. A value kept in the node's store (above 100 KiB) is read in
// place: one copy into T, none for orrery::Buffer, which shares the store's memory (and
// keeps it alive) instead (docs/objects.md).
template <typename T>
std::shared_ptr<T> Get(const ObjectRef<T>& ref, int timeout_ms = -1) {
  internal::BytesView bytes = internal::GetBytes(*ref.Holder(), timeout_ms);
  internal::ScopedUnpackKeeper keeper(bytes.data, bytes.size, bytes.keep);
  return std::make_shared<T>(internal::Unpack<T>(bytes.data, bytes.size, "result"));
}

// A read-only view of a ready object's bytes with no copy: for an object holding a Buffer, a
// std::string, or a contiguous std::vector (of bytes, integers or floating point), the
// payload; kept alive by the view (docs/objects.md "Zero-copy reads"). Throws ConfigError
// for other types.
template <typename T>
Buffer GetBuffer(const ObjectRef<T>& ref, int timeout_ms = -1) {
  internal::BytesView bytes = internal::GetBytes(*ref.Holder(), timeout_ms);
  auto payload = internal::ContiguousPayload(bytes.data, bytes.size);
  if (!payload)
    throw ConfigError("GetBuffer: the object is not a contiguous value (Buffer, string, vector)");
  return Buffer(reinterpret_cast<const uint8_t*>(payload->first), payload->second, bytes.keep);
}

inline void Get(const ObjectRef<void>& ref, int timeout_ms = -1) {
  internal::GetBytes(*ref.Holder(), timeout_ms);
}

template <typename T>
std::vector<std::shared_ptr<T>> Get(const std::vector<ObjectRef<T>>& refs, int timeout_ms = -1) {
  std::vector<std::shared_ptr<T>> out;
  out.reserve(refs.size());
  for (const auto& r : refs) out.push_back(Get(r, timeout_ms));
  return out;
}

template <typename U>
std::shared_ptr<U> internal::GetValue(const ObjectRef<U>& ref) {
  return ::orrery::Get(ref);
}

template <typename T>
auto ObjectRef<T>::Get() const {
  return ::orrery::Get(*this);
}
template <typename T>
auto ObjectRef<T>::Get(int timeout_ms) const {
  return ::orrery::Get(*this, timeout_ms);
}

// Waits until num_returns of refs are ready or timeout_ms passes (-1: no limit). Order
// within ready and unready follows refs.
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, int num_returns, int timeout_ms = -1) {
  std::vector<const internal::RefHolder*> holders;
  holders.reserve(refs.size());
  for (const auto& r : refs) holders.push_back(r.Holder().get());
  std::vector<bool> ready = internal::WaitRefs(holders, num_returns, timeout_ms);
  WaitResult<T> result;
  for (size_t i = 0; i < refs.size(); ++i)
    (ready[i] ? result.ready : result.unready).push_back(refs[i]);
  return result;
}

// Stores a value and returns its ref. A value above 100 KiB packed is written once into the
// node's shared-memory store (ObjectStoreFullError when it cannot fit even after spilling).
template <typename T>
ObjectRef<T> Put(const T& value) {
  internal::ScopedRefCollector nested;  // refs inside the value live as long as it does
  std::shared_ptr<internal::RefHolder> ref = internal::PackIntoStore(value);
  if (!ref) ref = internal::PutBytes(internal::Pack(value));
  internal::KeepContained(*ref, nested.Take());
  return ObjectRef<T>(std::move(ref));
}

// Cancels the task or actor call whose result `ref` is (only its caller can): a call still
// queued is removed, one running is told (RuntimeContext::IsCancelled), and Get of `ref`
// throws TaskCancelledError from now on. force: a task's worker process is killed while it
// runs the task (refused for actor calls: ConfigError). A value that is there already (a
// finished call, a Put) keeps it. Throws orrery::Error when `ref` is another process's call
// or no pending call of this process.
template <typename T>
void Cancel(const ObjectRef<T>& ref, bool force = false) {
  if (ref.IsNull()) throw Error("Cancel: the ObjectRef is null");
  internal::CancelRef(*ref.Holder(), force);
}

// The named actor, or nullopt when no live actor has that name in the namespace.
template <typename T>
std::optional<ActorHandle<T>> GetActor(const std::string& name,
                                       const std::string& namespace_ = "") {
  ActorId id = internal::GetNamedActor(name, namespace_);
  if (id.IsNil()) return std::nullopt;
  return ActorHandle<T>(id);
}

struct NodeInfo {
  NodeId node_id;
  std::string address;
  bool alive = false;
  Resources total;
  Resources available;
  Labels labels;
  // The node's memory monitor: memory in use and the limit that applies (the host's, or its
  // cgroup's when tighter), in bytes, and the fraction in use above which the node kills a
  // worker (whose caller gets OutOfMemoryError). 0 when the node could not read its memory.
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double memory_usage_threshold = 0;
  // The node's shared-memory object store as its last heartbeat described it: bytes held by
  // objects, its size (Config::object_store_memory), bytes spilled to disk, and the objects
  // it holds (spilled ones included). 0 for a node without a store.
  int64_t object_store_used_bytes = 0;
  int64_t object_store_capacity_bytes = 0;
  int64_t object_store_spilled_bytes = 0;
  int64_t object_store_num_objects = 0;
  // Alive, but not heard from past the head's suspicion threshold: no new work is placed
  // there until it is heard from again, or it is declared dead (docs/architecture.md
  // "Failure detection").
  bool suspected = false;
};

std::vector<NodeInfo> Nodes();
Resources ClusterResources();
Resources AvailableResources();

namespace internal {
template <typename Derived>
Derived& OptionsBuilder<Derived>::SetPlacementGroup(const PlacementGroup& pg, int bundle_index) {
  options_.placement_group = pg.Id();
  options_.bundle_index = bundle_index;
  return self();
}
}  // namespace internal

}  // namespace orrery
