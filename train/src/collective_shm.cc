// CollectiveGroup's large all-reduce inside one host: through shared memory, or straight
// between the workers' vectors (collective.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "train/src/collective.h"
#include "train/src/reduce_ops.h"

namespace orrery::train {

namespace {

bool TurnedOff(const char* variable) {
  const char* env = std::getenv(variable);
  return env != nullptr && std::string(env) == "0";
}

}  // namespace

static_assert(std::atomic<uint64_t>::is_always_lock_free, "the piece counter is a plain word");

bool CollectiveGroup::AllAgree(bool ok) {
  const char flag = ok ? 1 : 0;
  bool all = true;
  for (const auto& f : Gather(&flag, 1, "AllReduce")) all = all && f.size() == 1 && f[0] == 1;
  return all;
}

bool CollectiveGroup::AgreeOnCrossMemory(bool want) {
  bool ok = want && cross_memory_wanted_ && !TurnedOff("ORRERY_COLLECTIVE_CMA");
  // Every worker offers one word of its memory (its process, the word's address, its value);
  // every other one reads it and writes it back.
  cross_memory_probe_ = 0x6f72726572790000ull + uint64_t(rank_);
  const uint64_t mine[3] = {ok ? uint64_t(getpid()) : 0,
                            uint64_t(reinterpret_cast<uintptr_t>(&cross_memory_probe_)),
                            cross_memory_probe_};
  const auto offers = Gather(mine, sizeof(mine), "AllReduce");
  vectors_.assign(size_t(size()), PeerVector{});
  for (size_t p = 0; ok && p < offers.size(); ++p) {
    uint64_t theirs[3];
    if (offers[p].size() != sizeof(theirs)) {
      ok = false;
      break;
    }
    std::memcpy(theirs, offers[p].data(), sizeof(theirs));
    ok = theirs[0] > 0 && theirs[0] <= uint64_t(INT_MAX);
    vectors_[p].pid = pid_t(theirs[0]);
    if (!ok || int(p) == rank_) continue;
    uint64_t seen = 0;
    ok = ReadOtherProcess(vectors_[p].pid, theirs[1], &seen, sizeof(seen)) && seen == theirs[2] &&
         WriteOtherProcess(vectors_[p].pid, &seen, theirs[1], sizeof(seen));
  }
  return AllAgree(ok);
}

void CollectiveGroup::SetUpShm() {
  const bool want = shm_wanted_ && !TurnedOff("ORRERY_COLLECTIVE_SHM");
  // Between vectors, the region holds only the barrier, the failure word and every
  // worker's length and address; otherwise two regions of slots follow the header. Every
  // worker takes part in each agreement, whatever it wants, so all call the same collectives.
  const bool cross = AgreeOnCrossMemory(want);
  size_t slot = cross ? 0 : (kShmRegionBytes / size_t(size())) & ~size_t(63);
  size_t header = (kShmCountsOffset + 16 * size_t(size()) + 4095) & ~size_t(4095);
  size_t total = header + 2 * slot * size_t(size());
  std::string name;
  if (rank_ == 0 && want) {
    shm_ = std::make_unique<ShmRegion>();
    if (shm_->Create(total).ok()) {
      name = shm_->name();
    } else {
      shm_.reset();
    }
  }
  std::string rank0_name = Gather(name.data(), name.size(), "AllReduce")[0];
  bool ok = want && !rank0_name.empty();
  if (ok && rank_ != 0) {
    shm_ = std::make_unique<ShmRegion>();
    ok = shm_->Open(rank0_name, total).ok();
  }
  const bool all = AllAgree(ok);
  if (shm_ && rank_ == 0) shm_->Unlink();  // everyone has it mapped, or gave up
  if (!all) shm_.reset();
  shm_state_ = all ? 1 : -1;
  shm_slot_bytes_ = slot;
  shm_header_bytes_ = header;
  if (all) shm_barrier_ = std::make_unique<ShmBarrier>(shm_->data(), size());
  if (all && cross) reducer_ = std::make_unique<CrossMemoryReducer>(size());
}

void CollectiveGroup::CheckLengths(const uint64_t* counts, size_t count) {
  size_t other = 0;
  while (other < size_t(size()) && counts[other] == count) ++other;
  if (other == size_t(size())) return;
  // Every worker sees a length unlike its own; all read the lengths before any of them
  // leaves (and may write its next call's) - one more barrier.
  const uint64_t theirs = counts[other];
  ShmBarrierWait();
  throw TrainingFailedError("AllReduce: rank " + std::to_string(other) + " passed " +
                            std::to_string(theirs) + " elements, rank " + std::to_string(rank_) +
                            " has " + std::to_string(count) +
                            "; every worker must pass vectors of the same length");
}

void CollectiveGroup::ShmAllReduce(char* data, size_t count, int dtype, ReduceOp op) {
  if (shm_broken_) {
    throw TrainingFailedError(
        "AllReduce: an earlier all-reduce of this group failed in shared "
        "memory on rank " +
        std::to_string(rank_) + "; the group cannot all-reduce large vectors again");
  }
  if (reducer_) return CrossMemoryAllReduce(data, count, dtype, op);
  const size_t n = size_t(size()), r = size_t(rank_), esize = ElementSize(dtype);
  const size_t per_slot = shm_slot_bytes_ / esize;
  // Every worker notes its length; the first barrier makes them all visible.
  auto* counts = reinterpret_cast<uint64_t*>(shm_->data() + kShmCountsOffset);
  counts[r] = count;
  std::vector<const char*> sources(n);
  for (size_t start = 0; start < count; start += per_slot, ++shm_piece_) {
    // Consecutive pieces (over all calls) alternate between two regions, so a worker that
    // is still copying a result out is never overwritten by a faster one's next piece.
    const size_t m = std::min(per_slot, count - start);
    char* region = shm_->data() + shm_header_bytes_ + (shm_piece_ % 2) * shm_slot_bytes_ * n;
    auto slot = [&](size_t p) { return region + p * shm_slot_bytes_; };
    // Worker s reduces segment s of the piece: bytes [begin(s), begin(s + 1)).
    auto begin = [&](size_t s) { return s * m / n * esize; };
    char* piece = data + start * esize;
    // In: every segment but this worker's own, which it reads from its own memory.
    for (size_t s = 0; s < n; ++s)
      if (s != r) std::memcpy(slot(r) + begin(s), piece + begin(s), begin(s + 1) - begin(s));
    ShmBarrierWait();
    if (start == 0) CheckLengths(counts, count);
    // Reduce this worker's segment in rank order, in one pass over the sources, into its own
    // memory and into its slot, where the others copy it from.
    const size_t b = begin(r), e = begin(r + 1);
    for (size_t p = 0; p < n; ++p) sources[p] = (p == r ? piece : slot(p)) + b;
    Fold(piece + b, slot(r) + b, sources, (e - b) / esize, dtype, op);
    ShmBarrierWait();
    // Out: every other worker's reduced segment.
    for (size_t s = 0; s < n; ++s)
      if (s != r) std::memcpy(piece + begin(s), slot(s) + begin(s), begin(s + 1) - begin(s));
  }
}

void CollectiveGroup::CrossMemoryAllReduce(char* data, size_t count, int dtype, ReduceOp op) {
  const size_t n = size_t(size()), r = size_t(rank_), esize = ElementSize(dtype);
  auto* counts = reinterpret_cast<uint64_t*>(shm_->data() + kShmCountsOffset);
  auto* addresses = counts + n;
  auto* failed = reinterpret_cast<std::atomic<uint32_t>*>(shm_->data() + kShmFailedOffset);
  counts[r] = count;
  addresses[r] = uint64_t(reinterpret_cast<uintptr_t>(data));
  // Once everyone is here, no worker's vector changes but through this call.
  ShmBarrierWait();
  CheckLengths(counts, count);
  for (size_t p = 0; p < n; ++p) vectors_[p].address = addresses[p];
  // The vectors are cut into pieces that the workers claim one at a time from a counter in
  // the region (it only grows: this call's pieces are numbered from pieces_claimed_). The
  // worker that claims a piece reduces it from every vector in rank order and writes the
  // result into all of them; nobody else touches those bytes, so one barrier at the end is
  // all the rest needs, and a worker that the scheduler sets aside holds nobody up.
  auto* next = reinterpret_cast<std::atomic<uint64_t>*>(shm_->data() + kShmPiecesOffset);
  const size_t bytes = count * esize;
  const size_t piece =
      std::clamp(bytes / (4 * n), size_t(64) << 10, size_t(4) << 20) / esize * esize;
  const uint64_t pieces = (bytes + piece - 1) / piece;
  std::string error;
  while (error.empty()) {
    const uint64_t k = next->fetch_add(1, std::memory_order_relaxed) - pieces_claimed_;
    if (k >= pieces) break;
    error = reducer_->Reduce(data, k * piece, std::min<size_t>(bytes, (k + 1) * piece), rank_,
                             vectors_, dtype, op);
  }
  // Every worker's last claim finds nothing left: the counter grew by pieces + n in all.
  pieces_claimed_ += pieces + n;
  if (!error.empty()) failed->store(uint32_t(rank_) + 1, std::memory_order_relaxed);
  ShmBarrierWait();
  const uint32_t who = failed->load(std::memory_order_relaxed);
  if (who == 0) return;
  shm_broken_ = true;
  throw TrainingFailedError(
      "AllReduce: " +
      (error.empty() ? "rank " + std::to_string(who - 1) + " could not reach the others' vectors"
                     : "rank " + std::to_string(rank_) + " " + error) +
      "; the group cannot all-reduce large vectors again");
}

void CollectiveGroup::ShmBarrierWait() {
  using Clock = std::chrono::steady_clock;
  uint32_t ticket = 0;
  if (shm_barrier_->Arrive(&ticket)) return;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::min(timeout_s_, 1e9)));
  while (!shm_barrier_->WaitOpen(ticket, std::min(deadline, Clock::now() + kShmLookEvery))) {
    // A worker that ran this collective through messages (its vector under the ring
    // threshold: another length) never comes here. Its message says so; answering it with an
    // empty one makes it fail at once too.
    if (int peer = PeerSendingNow(); peer >= 0) {
      shm_broken_ = true;
      for (int p = 0; p < size(); ++p)
        if (p != rank_) Send(p, 0, nullptr, 0);
      throw TrainingFailedError("AllReduce: rank " + std::to_string(peer) +
                                " reduces through messages, rank " + std::to_string(rank_) +
                                " through shared memory; every worker must pass vectors of the "
                                "same length");
    }
    if (Clock::now() < deadline) continue;
    shm_broken_ = true;  // counted in at a barrier nobody else reached: unusable from now on
    throw TimedOut("AllReduce", "the other workers in shared memory");
  }
}

}  // namespace orrery::train
