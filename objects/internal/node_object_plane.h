// A node's object plane (docs/objects.md): its shared-memory store (NodeObjects over one
// arena file), the data server other nodes pull from (ObjectServer), and the pulls it makes
// when a process of this node opens an object whose primary lives elsewhere.
//
// Threads: Handle and OnProcessExit run on the node's inbox thread; the data server's
// threads read objects through Lookup; each pull runs on a thread of its own and posts its
// end back to the inbox thread. The store is shared by all of them under mu_.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/internal/peer_watch.h"
#include "core/internal/protocol_objects.h"
#include "core/internal/thread_annotations.h"
#include "core/internal/transport.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::objects {

class NodeObjects;
class ObjectServer;

struct ObjectPlaneOptions {
  NodeId node_id;
  std::string bind_host = "127.0.0.1";
  std::string advertise_host;
  uint64_t capacity = 0;   // 0: 30% of the host's memory, capped by what /dev/shm can hold
  std::string spill_root;  // the node spills into a directory of its own inside
  std::string shm_dir = "/dev/shm";
};

class NodeObjectPlane {
 public:
  // `inbox` is the node's: pulls post their end to it; replies go out through transport::Send.
  NodeObjectPlane(ObjectPlaneOptions options, transport::Inbox& inbox);
  ~NodeObjectPlane();
  // Creates the arena and starts the data server.
  Status Start();
  // Stops the server and the pulls, then removes the arena and the spill files.
  void Stop() EXCLUDES(mu_);

  // On the inbox thread: handles the object messages (what became of one: a malformed one is
  // InvalidArgument), or leaves others (nullopt).
  std::optional<Status> Handle(transport::Envelope& env) EXCLUDES(mu_);
  // On the inbox thread: a process of this node ended: its pins, the objects it was writing
  // and the objects it owned go.
  void OnProcessExit(const std::string& address) EXCLUDES(mu_);

  // On the inbox thread, about once a second: pings the owners of the objects held here and
  // frees the objects of an owner that is gone: a probe found nothing listening at its
  // address, or it has not answered for kOwnerDeadS (a driver or worker that died without
  // freeing them: docs/objects.md "Lifetime"; a paused one keeps them that long).
  void Tick(double now) EXCLUDES(mu_);
  static constexpr double kOwnerPingS = 2;
  static constexpr double kOwnerDeadS = 30;

  proto::ObjectStoreUsageMsg Usage() const EXCLUDES(mu_);
  const std::string& arena_path() const { return arena_path_; }
  const std::string& tag() const { return tag_; }
  std::string data_address() const;

 private:
  struct Pull {
    std::vector<proto::ObjectStoreMsg> waiters;
    proto::ObjectLocationMsg source;
    std::string owner;
  };
  void OnCreate(const proto::ObjectStoreMsg& m) EXCLUDES(mu_);
  void OnOpen(const proto::ObjectStoreMsg& m) EXCLUDES(mu_);
  void OnFree(const proto::ObjectFreeMsg& m) EXCLUDES(mu_);
  void OnRelease(const proto::ObjectStoreMsg& m) EXCLUDES(mu_);
  void OnCopied(const proto::ObjectCopiedMsg& m) EXCLUDES(mu_);
  void OnList(const proto::ListObjectsMsg& m) EXCLUDES(mu_);
  // Starts pulling `m`'s object from its source (the caller holds mu_ and found no copy).
  void StartPullLocked(const ObjectId& id, const proto::ObjectStoreMsg& m) REQUIRES(mu_);
  // On the inbox thread: the pull of `id` ended with `status`.
  void PullDone(const ObjectId& id, Status status) EXCLUDES(mu_);
  // Answers an Open from what the store holds now (pins for the reader).
  void ReplyOpenLocked(const proto::ObjectStoreMsg& m) REQUIRES(mu_);
  void FreeLocked(const ObjectId& id) REQUIRES(mu_);
  // A free of `binary` (an object id) from its owner: at once, or at the last release.
  void OnFreeLocked(const std::string& binary) REQUIRES(mu_);
  // Frees every object `owner` owns here, and the copies of them elsewhere.
  void FreeOwnedLocked(const std::string& owner) REQUIRES(mu_);
  void OnPong(const proto::PingMsg& m) EXCLUDES(mu_);
  void OnSeal(const proto::ObjectStoreMsg& m) EXCLUDES(mu_);
  // Fails an Open with ObjectLostError's kind.
  void ReplyLost(const proto::ObjectStoreMsg& m, const std::string& message) const;
  proto::ObjectStoreReplyMsg ReplyTo(const proto::ObjectStoreMsg& m) const;
  proto::ObjectLocationMsg LocationOf(uint64_t size) const;

  ObjectPlaneOptions options_;
  transport::Inbox& inbox_;
  std::string arena_path_;
  std::string tag_;
  std::unique_ptr<ObjectServer> server_;
  mutable Mutex mu_;
  std::unique_ptr<NodeObjects> objects_ GUARDED_BY(mu_);
  std::map<ObjectId, Pull> pulls_ GUARDED_BY(mu_);
  // Primaries here that other nodes copied: a free goes on to them.
  std::map<ObjectId, std::set<std::string>> copies_ GUARDED_BY(mu_);
  // Objects a process of this node is writing: their creator, and the opens that came
  // before the seal (answered at the seal; failed if the creator exits first).
  struct Unsealed {
    std::string creator;
    std::vector<proto::ObjectStoreMsg> waiters;
  };
  std::map<ObjectId, Unsealed> unsealed_ GUARDED_BY(mu_);
  // Frees that came while a reader still had the object open: done at its last release.
  std::set<ObjectId> free_pending_ GUARDED_BY(mu_);
  // The owners of the objects held here, pinged by Tick.
  PeerWatch owners_ GUARDED_BY(mu_){kOwnerPingS, kOwnerDeadS, MakeConnectProber(1.0)};
  // Pull threads still running (detached; Stop waits for none before the arena goes).
  int active_pulls_ GUARDED_BY(mu_) = 0;
  CondVar pulls_done_;
  // Signalled when an unsealed object is sealed or aborted: a pull that found it being
  // written waits for it (kUnsealedServeWaitS at most).
  CondVar unsealed_done_;
  std::atomic<bool> stopping_{false};
};

// 30% of the host's memory (as Ray's default), at most what the shm directory can hold.
uint64_t DefaultObjectStoreBytes(const std::string& shm_dir);

}  // namespace orrery::objects
