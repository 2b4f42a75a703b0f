// The narrow interface between the header-only templates of the public API and the
// runtime inside liborrery. Everything here is internal: users call orrery.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "orrery/api/object_ref.h"
#include "orrery/config.h"
#include "orrery/ids.h"
#include "orrery/runtime_env.h"

namespace orrery {

enum class ActorLifetime { kOwned = 0, kDetached = 1 };

// Where a task or actor goes (docs/api.md "Resources and labels"), as in Ray:
//  - DefaultSchedulingStrategy: pack onto the first nodes until they are half used, then spread;
//  - SpreadSchedulingStrategy: the least used node that fits;
//  - NodeAffinitySchedulingStrategy: that node; with soft = true, elsewhere when it cannot.
struct DefaultSchedulingStrategy {};
struct SpreadSchedulingStrategy {};
struct NodeAffinitySchedulingStrategy {
  NodeId node_id;
  bool soft = false;
};

namespace internal {

// One argument of a call: either the msgpack bytes of a value, or a reference to an object
// that the runtime resolves to its value before the call is sent.
struct ArgSlot {
  std::string bytes;
  std::shared_ptr<RefHolder> ref;  // set: pass the referenced value
  // The refs packed inside `bytes` (nested refs): kept until the call is done.
  std::vector<std::shared_ptr<RefHolder>> contained;
};

// While alive, collects the refs packed on this thread (RefHolder::Share): the refs nested
// inside the value being packed, which whoever keeps the value then keeps alive. Collectors
// nest; the innermost collects.
class ScopedRefCollector {
 public:
  ScopedRefCollector();
  ~ScopedRefCollector();
  ScopedRefCollector(const ScopedRefCollector&) = delete;
  ScopedRefCollector& operator=(const ScopedRefCollector&) = delete;
  void Add(std::shared_ptr<RefHolder> ref);
  // The collected refs, each once.
  std::vector<std::shared_ptr<RefHolder>> Take();

 private:
  std::vector<std::shared_ptr<RefHolder>> refs_;
  ScopedRefCollector* previous_;
};
// The value `value` refers to contains `refs`: they live as long as this process keeps it.
void KeepContained(const RefHolder& value, std::vector<std::shared_ptr<RefHolder>> refs);
// Inside a worker running a call: the call's result contains `refs`, which the reply names so
// that the caller keeps them (elsewhere they are kept for as long as this process lives).
void KeepResultRefs(std::vector<std::shared_ptr<RefHolder>> refs);

struct CallOptions {
  Resources resources;
  Labels label_selector;
  std::string name;        // actors: registered name; empty: anonymous
  std::string namespace_;  // actors: namespace of the name; empty: the job's
  int max_restarts = 0;
  int max_task_retries = 0;
  int max_retries = 0;  // tasks
  int max_concurrency = 1;
  bool max_concurrency_set = false;  // SetMaxConcurrency was called (async actors' bound)
  // Actors: calls this process may have pending to the actor; 0: as many as fit the default
  // memory budget (docs/api.md "Pending calls"), -1: unbounded.
  int max_pending_calls = 0;
  ActorLifetime lifetime = ActorLifetime::kOwned;
  PlacementGroupId placement_group;
  int bundle_index = -1;
  bool resources_set = false;
  int strategy = 0;  // 0 default, 1 spread, 2 node affinity
  NodeId affinity_node;
  bool affinity_soft = false;
  RuntimeEnv runtime_env;
  // Set by the runtime at submission in a cluster: runtime_env.working_dir's package on the
  // head and the folder's identity here (docs/api.md "Runtime environments").
  std::string working_dir_hash;
  std::string working_dir_id;
};

std::shared_ptr<RefHolder> SubmitTask(const std::string& function, std::vector<ArgSlot> args,
                                      const CallOptions& options);
ActorId CreateActor(const std::string& factory, std::vector<ArgSlot> args,
                    const CallOptions& options);
std::shared_ptr<RefHolder> SubmitActorTask(const ActorId& actor, const std::string& method,
                                           std::vector<ArgSlot> args);
std::shared_ptr<RefHolder> PutBytes(std::string bytes);
void CancelRef(const RefHolder& ref, bool force);

// Values whose packed size is above this are kept in the node's shared-memory object store
// (written once, read in place on the node, pulled between nodes); smaller ones travel inline
// in messages (docs/objects.md).
inline constexpr size_t kInlineValueMaxBytes = 100 * 1024;

// A new object of `size` packed bytes written in place (one copy): when `size` is above
// kInlineValueMaxBytes and this process has a node store, its ref, with *data where the
// bytes go (SealObject once written); else nullptr (pack and PutBytes instead). Throws
// ObjectStoreFullError.
std::shared_ptr<RefHolder> CreateObject(size_t size, char** data);
void SealObject(const RefHolder& ref);
// The object begun could not be written (packing it threw): it is sealed and freed.
void AbandonObject(const RefHolder& ref);

// Inside a worker running a call: when `size` is above kInlineValueMaxBytes, the call's
// result is written in place into the node's store (*data; EndStoredResult once written) and
// the reply carries its location; false: pack it inline.
bool BeginStoredResult(size_t size, char** data);
void EndStoredResult();
// The result begun could not be written (packing it threw): its object is sealed and freed,
// and the call's reply carries no location.
void AbandonStoredResult();

// The packed bytes of a ready object, valid while `keep` lives (a shared-memory object's
// mapping, or the process's copy).
struct BytesView {
  const char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> keep;
};
// Throws the producer's error, GetTimeoutError, ObjectLostError, ...
BytesView GetBytes(const RefHolder& ref, int timeout_ms);
// Indices of the first `num_returns` ready refs (or fewer at the timeout).
std::vector<bool> WaitRefs(const std::vector<const RefHolder*>& refs, int num_returns,
                           int timeout_ms);
// Looks a named actor up; Nil when there is none. Checks the class name when known.
ActorId GetNamedActor(const std::string& name, const std::string& namespace_);
void KillActor(const ActorId& actor, bool no_restart);

// Streaming calls (orrery/api/stream.h, docs/api.md "Streaming results").
// A producer runs at most this many values ahead of what its caller has read.
inline constexpr uint64_t kStreamWindow = 16;
// The caller's reading position in a streaming call's values (defined by the runtime).
class StreamReader;
// Starts reading the values of the streaming call whose result is `call`.
std::shared_ptr<StreamReader> OpenStream(std::shared_ptr<RefHolder> call);
// The next value's ref; nullptr at the end. Throws the producer's error after its last
// value, GetTimeoutError past timeout_ms (-1: no limit).
std::shared_ptr<RefHolder> NextStreamItem(StreamReader& reader, int64_t timeout_ms);
// The ref of the call itself.
const std::shared_ptr<RefHolder>& StreamEnd(const StreamReader& reader);
// Inside a worker running a streaming call: packs one value (`pack`, as a call's result) and
// sends it to the caller; waits while the caller has read kStreamWindow values fewer than were
// sent. Throws TaskCancelledError when the call was cancelled or the caller dropped the stream.
void EmitStreamItem(const std::function<std::string()>& pack);

}  // namespace internal
}  // namespace orrery
