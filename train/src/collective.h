// Collectives between the workers of a training group over ZeroMQ, without libtorch.
//
// Each worker binds one PULL socket and connects one PUSH socket to every peer it sends to.
// Every message carries (collective sequence number, part); a message that arrives before
// it is wanted (a fast peer already in the next collective) is kept until it is. All
// workers must call the collectives in the same order. Results are bit-identical on every
// worker: small all-reduces reduce in rank order everywhere, large ones use a ring
// (reduce-scatter then all-gather) in which each segment is reduced once - or, when every
// worker of the group can map the same shared memory (one host), without messages: where
// every worker may read and write every other's memory (cross_memory.h), the workers claim
// pieces of the vectors one at a time, read a piece from the others' vectors a chunk at a
// time, fold it with their own and write the result into every vector, between two
// shared-memory barriers (each byte of a vector read once and written once: the least
// traffic an all-reduce can have); otherwise each worker
// copies its part into the shared region (but the segment it reduces itself), reduces its
// segment of every worker's part in one pass, and copies the others' reduced segments out,
// with two barriers per piece.
//
// Thread-safety: one thread (the loop's) uses a group. Errors (a peer silent for longer
// than the timeout, a malformed message) throw orrery::TrainingFailedError.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "orrery/errors.h"
#include "orrery/status.h"
#include "orrery/train/context.h"
#include "train/src/cross_memory.h"
#include "train/src/shm_region.h"

namespace zmq {
class context_t;
class socket_t;
class message_t;
}  // namespace zmq

namespace orrery::security {
class ZapHandler;
}  // namespace orrery::security

namespace orrery::train {

struct MessageHeader;

class CollectiveGroup {
 public:
  CollectiveGroup();
  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;

  // Binds the receiving socket on host (an ephemeral port); returns tcp://host:port.
  orrery::Result<std::string> Bind(const std::string& host);
  // addresses[r] is rank r's Bind() result; timeout_s bounds every wait for a peer.
  void Connect(int rank, std::vector<std::string> addresses, double timeout_s);

  int rank() const { return rank_; }
  int size() const { return int(addresses_.size()); }

  // dtype: 0 float, 1 double, 2 int32, 3 int64 (Context's codes).
  void AllReduce(void* data, size_t count, int dtype, ReduceOp op);
  void Broadcast(void* data, size_t bytes, int root);
  std::vector<std::string> AllGather(const void* data, size_t bytes);
  void Barrier();

  // Vectors of at least this many bytes go round the ring.
  static constexpr size_t kRingThresholdBytes = 256 * 1024;
  // Ring messages carry at most this many bytes, so sending and reducing overlap.
  static constexpr size_t kChunkBytes = 1024 * 1024;
  // Shared memory for large all-reduces: two regions of this many bytes (double buffered).
  static constexpr size_t kShmRegionBytes = 16 * 1024 * 1024;
  // Shared memory is tried at the first large all-reduce unless this says no (or
  // ORRERY_COLLECTIVE_SHM=0 is set); all workers must agree, else all use the ring.
  void SetSharedMemory(bool enabled) { shm_wanted_ = enabled; }
  bool UsesSharedMemory() const { return shm_state_ == 1; }
  // Within shared memory, between the vectors themselves unless this says no (or
  // ORRERY_COLLECTIVE_CMA=0 is set, or a worker cannot reach another's memory).
  void SetCrossMemory(bool enabled) { cross_memory_wanted_ = enabled; }
  bool UsesCrossMemory() const { return shm_state_ == 1 && reducer_ != nullptr; }

 private:
  std::vector<std::string> Gather(const void* data, size_t bytes, const char* what);
  void Send(int peer, uint32_t part, const void* data, size_t bytes);
  // The message from `peer` for the current collective's `part`.
  zmq::message_t Recv(int peer, uint32_t part, const char* what);
  void RingAllReduce(char* data, size_t count, int dtype, ReduceOp op);
  void DirectAllReduce(char* data, size_t count, int dtype, ReduceOp op);
  void ShmAllReduce(char* data, size_t count, int dtype, ReduceOp op);
  void CrossMemoryAllReduce(char* data, size_t count, int dtype, ReduceOp op);
  // Decides, together with every other worker, whether the shared memory path is usable.
  void SetUpShm();
  // True when every worker wants to and can read and write every other's memory (all decide
  // together; every worker calls it, wanting or not).
  bool AgreeOnCrossMemory(bool want);
  // True when `ok` is true on every worker (one collective).
  bool AllAgree(bool ok);
  // After the first barrier of a call: throws on every worker (after one more barrier) when
  // a worker's length differs.
  void CheckLengths(const uint64_t* counts, size_t count);
  // The error of a wait for `whom` that outlasted the timeout, in collective `what`.
  TrainingFailedError TimedOut(const char* what, const std::string& whom) const;
  // Receives one message within `wait` into (h, payload); false when none came. Throws on a
  // malformed one.
  bool ReceiveOne(std::chrono::milliseconds wait, MessageHeader* h, zmq::message_t* payload);
  // Keeps every message already here for later, and returns the rank of a peer that sent one
  // for the current collective (-1 if none did).
  int PeerSendingNow();
  // A barrier inside a shared-memory all-reduce; throws when a peer stays away past the
  // timeout, or turns out to run the collective through messages.
  void ShmBarrierWait();
  // How often a worker waiting at a shared-memory barrier looks at its messages.
  static constexpr std::chrono::milliseconds kShmLookEvery{500};

  std::unique_ptr<zmq::context_t> ctx_;
  // Answers the CURVE handshakes of ctx_'s sockets (docs/security.md); stopped before ctx_.
  std::unique_ptr<orrery::security::ZapHandler> zap_;
  uint64_t handshake_watch_ = 0;
  std::unique_ptr<zmq::socket_t> pull_;
  std::map<int, std::unique_ptr<zmq::socket_t>> push_;
  std::vector<std::string> addresses_;
  int rank_ = 0;
  double timeout_s_ = 1800;
  uint64_t seq_ = 0;    // the current collective, internal ones included
  uint64_t calls_ = 0;  // the collectives the loop called, for messages
  bool shm_wanted_ = true;
  int shm_state_ = 0;  // 0 not tried yet, 1 in use, -1 not usable
  // The region: the barrier's words at 0, the failure word (rank + 1 of a worker that
  // could not reach another's vector) at kShmFailedOffset, the piece counter, each worker's length
  // (uint64_t) from kShmCountsOffset and its vector's address after them, then from
  // shm_header_bytes_ the two regions of size() slots each (none between vectors).
  static constexpr size_t kShmFailedOffset = 8;
  static constexpr size_t kShmPiecesOffset = 16;  // the next piece to claim, between vectors
  static constexpr size_t kShmCountsOffset = 64;
  std::unique_ptr<ShmRegion> shm_;
  std::unique_ptr<ShmBarrier> shm_barrier_;
  bool shm_broken_ = false;  // a barrier wait failed: the region is not used again
  size_t shm_header_bytes_ = 0;
  size_t shm_slot_bytes_ = 0;
  uint64_t shm_piece_ = 0;  // pieces reduced so far: picks the region, alternately
  bool cross_memory_wanted_ = true;
  uint64_t cross_memory_probe_ = 0;              // the word the others read and write to try
  std::unique_ptr<CrossMemoryReducer> reducer_;  // set when the vectors reach each other
  std::vector<PeerVector> vectors_;  // every worker's process, and its vector in this call
  uint64_t pieces_claimed_ = 0;      // the piece counter's value when this call began
  // Messages that arrived early: (seq, source rank, part) -> message.
  std::map<std::tuple<uint64_t, int, uint32_t>, std::unique_ptr<zmq::message_t>> early_;
};

// The part of a Context that is the group's collectives: the trainer's worker context and
// the unit tests' contexts derive from it and add the rest.
class GroupCollectives : public Context {
 public:
  explicit GroupCollectives(CollectiveGroup* group) : group_(group) {}
  void Barrier() override { group_->Barrier(); }

 protected:
  void AllReduceRaw(void* data, size_t count, int dtype, ReduceOp op) override {
    group_->AllReduce(data, count, dtype, op);
  }
  void BroadcastRaw(void* data, size_t bytes, int root) override {
    group_->Broadcast(data, bytes, root);
  }
  std::vector<std::string> AllGatherRaw(const void* data, size_t bytes) override {
    return group_->AllGather(data, bytes);
  }

  CollectiveGroup* group_;
};

}  // namespace orrery::train
