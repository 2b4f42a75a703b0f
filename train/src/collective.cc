#include "train/src/collective.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <zmq.hpp>

#include "core/internal/security.h"
#include "orrery/errors.h"
#include "train/src/reduce_ops.h"

namespace orrery::train {

// What precedes every message's payload (kHeaderBytes on the wire).
struct MessageHeader {
  uint32_t magic;
  int32_t source;
  uint64_t seq;
  uint32_t part;
};

namespace {

constexpr uint32_t kMagic = 0x5643524f;  // "ORCV"
constexpr size_t kHeaderBytes = 20;      // magic, source rank, sequence, part

void EncodeHeader(const MessageHeader& h, char* out) {
  std::memcpy(out, &h.magic, 4);
  std::memcpy(out + 4, &h.source, 4);
  std::memcpy(out + 8, &h.seq, 8);
  std::memcpy(out + 16, &h.part, 4);
}

bool DecodeHeader(const zmq::message_t& m, MessageHeader* h) {
  if (m.size() != kHeaderBytes) return false;
  const char* p = static_cast<const char*>(m.data());
  std::memcpy(&h->magic, p, 4);
  std::memcpy(&h->source, p + 4, 4);
  std::memcpy(&h->seq, p + 8, 8);
  std::memcpy(&h->part, p + 16, 4);
  return h->magic == kMagic;
}

uint32_t Part(size_t step, size_t chunk) { return uint32_t(step << 16) | uint32_t(chunk); }

}  // namespace

CollectiveGroup::CollectiveGroup() : ctx_(std::make_unique<zmq::context_t>(1)) {}

CollectiveGroup::~CollectiveGroup() {
  push_.clear();
  if (pull_) security::StopWatching(*pull_, handshake_watch_);
  pull_.reset();
  zap_.reset();
  ctx_.reset();
}

orrery::Result<std::string> CollectiveGroup::Bind(const std::string& host) {
  try {
    pull_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pull);
    pull_->set(zmq::sockopt::rcvhwm, 0);
    pull_->set(zmq::sockopt::linger, 0);
    if (security::Enabled()) {
      zap_ = std::make_unique<security::ZapHandler>(*ctx_);
      security::ConfigureServer(*ctx_, *pull_);
    }
    pull_->bind("tcp://" + host + ":*");
    std::string endpoint = pull_->get(zmq::sockopt::last_endpoint);
    handshake_watch_ =
        security::WatchHandshakes(*ctx_, *pull_, "the collective socket at " + endpoint);
    return endpoint;
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind the collective socket on " + host + ": " + e.what());
  }
}

void CollectiveGroup::Connect(int rank, std::vector<std::string> addresses, double timeout_s) {
  rank_ = rank;
  addresses_ = std::move(addresses);
  timeout_s_ = timeout_s > 0 ? timeout_s : 1800;
}

void CollectiveGroup::Send(int peer, uint32_t part, const void* data, size_t bytes) {
  auto& sock = push_[peer];
  if (!sock) {
    sock = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::push);
    sock->set(zmq::sockopt::sndhwm, 0);
    sock->set(zmq::sockopt::linger, 0);
    security::ConfigureClient(*sock);
    sock->connect(addresses_.at(size_t(peer)));
  }
  char header[kHeaderBytes];
  EncodeHeader(MessageHeader{kMagic, int32_t(rank_), seq_, part}, header);
  sock->send(zmq::const_buffer(header, kHeaderBytes), zmq::send_flags::sndmore);
  sock->send(zmq::const_buffer(data, bytes), zmq::send_flags::none);
}

zmq::message_t CollectiveGroup::Recv(int peer, uint32_t part, const char* what) {
  auto key = std::make_tuple(seq_, peer, part);
  if (auto it = early_.find(key); it != early_.end()) {
    zmq::message_t m(std::move(*it->second));
    early_.erase(it);
    return m;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw TimedOut(what, "rank " + std::to_string(peer));
    MessageHeader h;
    zmq::message_t payload;
    if (!ReceiveOne(std::min<std::chrono::milliseconds>(left, std::chrono::milliseconds(1000)), &h,
                    &payload))
      continue;
    if (h.seq == seq_ && h.source == peer && h.part == part) return payload;
    if (h.seq < seq_) continue;  // cannot happen between well-behaved peers; ignore
    early_[std::make_tuple(h.seq, int(h.source), h.part)] =
        std::make_unique<zmq::message_t>(std::move(payload));
  }
}

TrainingFailedError CollectiveGroup::TimedOut(const char* what, const std::string& whom) const {
  char waited[32];
  std::snprintf(waited, sizeof(waited), "%g", timeout_s_);
  return TrainingFailedError(std::string("collective ") + what + " (call #" +
                             std::to_string(calls_) + ") on rank " + std::to_string(rank_) +
                             " waited " + waited + " s for " + whom +
                             "; every worker must call the same collectives in the same order");
}

bool CollectiveGroup::ReceiveOne(std::chrono::milliseconds wait, MessageHeader* h,
                                 zmq::message_t* payload) {
  zmq::pollitem_t item{pull_->handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, wait);
  if (!(item.revents & ZMQ_POLLIN)) return false;
  zmq::message_t header;
  (void)pull_->recv(header, zmq::recv_flags::none);
  if (!header.more())
    throw TrainingFailedError("collective: a message without a payload reached rank " +
                              std::to_string(rank_));
  (void)pull_->recv(*payload, zmq::recv_flags::none);
  if (payload->more() || !DecodeHeader(header, h) || h->source < 0 || h->source >= size()) {
    throw TrainingFailedError("collective: rank " + std::to_string(rank_) +
                              " received a malformed message");
  }
  return true;
}

int CollectiveGroup::PeerSendingNow() {
  MessageHeader h;
  zmq::message_t payload;
  while (ReceiveOne(std::chrono::milliseconds(0), &h, &payload)) {
    if (h.seq < seq_) continue;
    early_[std::make_tuple(h.seq, int(h.source), h.part)] =
        std::make_unique<zmq::message_t>(std::move(payload));
  }
  auto it = early_.lower_bound(std::make_tuple(seq_, -1, uint32_t(0)));
  return it != early_.end() && std::get<0>(it->first) == seq_ ? std::get<1>(it->first) : -1;
}

void CollectiveGroup::AllReduce(void* data, size_t count, int dtype, ReduceOp op) {
  size_t bytes = count * ElementSize(dtype);
  bool large = size() > 1 && bytes >= kRingThresholdBytes && count >= size_t(size());
  ++calls_;
  if (large && shm_state_ == 0) SetUpShm();
  ++seq_;
  if (large && shm_state_ == 1) {
    ShmAllReduce(static_cast<char*>(data), count, dtype, op);
  } else if (large) {
    RingAllReduce(static_cast<char*>(data), count, dtype, op);
  } else if (size() > 1) {
    DirectAllReduce(static_cast<char*>(data), count, dtype, op);
  }
  if (op == ReduceOp::kAvg) Divide(static_cast<char*>(data), count, dtype, size());
}

void CollectiveGroup::DirectAllReduce(char* data, size_t count, int dtype, ReduceOp op) {
  size_t bytes = count * ElementSize(dtype);
  for (int p = 0; p < size(); ++p)
    if (p != rank_) Send(p, 0, data, bytes);
  // Every rank reduces rank 0's vector with rank 1's, then rank 2's, ...: the same
  // operations in the same order everywhere, so every rank gets the same bits.
  std::string mine(data, bytes);
  for (int p = 0; p < size(); ++p) {
    const char* src = mine.data();
    zmq::message_t m;
    if (p != rank_) {
      m = Recv(p, 0, "AllReduce");
      if (m.size() != bytes) {
        throw TrainingFailedError("AllReduce: rank " + std::to_string(p) + " sent " +
                                  std::to_string(m.size()) + " bytes, rank " +
                                  std::to_string(rank_) + " has " + std::to_string(bytes) +
                                  "; every worker must pass vectors of the same length");
      }
      src = static_cast<const char*>(m.data());
    }
    if (p == 0) {
      // An empty vector's data() (and an empty message's) may be null: memcpy needs valid
      // pointers even for 0 bytes.
      if (bytes > 0) std::memcpy(data, src, bytes);
    } else {
      Reduce(data, src, count, dtype, op);
    }
  }
}

void CollectiveGroup::RingAllReduce(char* data, size_t count, int dtype, ReduceOp op) {
  const size_t n = size_t(size()), r = size_t(rank_), esize = ElementSize(dtype);
  const int next = int((r + 1) % n), prev = int((r + n - 1) % n);
  auto seg_begin = [&](size_t s) { return s * count / n; };
  const size_t chunk_elems = std::max<size_t>(1, kChunkBytes / esize);
  auto chunks_of = [&](size_t s) {
    return (seg_begin(s + 1) - seg_begin(s) + chunk_elems - 1) / chunk_elems;
  };
  auto chunk_range = [&](size_t s, size_t c) {
    size_t b = seg_begin(s) + c * chunk_elems;
    return std::make_pair(b, std::min(seg_begin(s + 1), b + chunk_elems));
  };
  auto send_chunk = [&](size_t step, size_t s, size_t c) {
    auto [b, e] = chunk_range(s, c);
    Send(next, Part(step, c), data + b * esize, (e - b) * esize);
  };
  auto recv_chunk = [&](size_t step, size_t s, size_t c, const char* what) {
    auto [b, e] = chunk_range(s, c);
    zmq::message_t m = Recv(prev, Part(step, c), what);
    if (m.size() != (e - b) * esize) {
      throw TrainingFailedError(
          std::string(what) + ": rank " + std::to_string(prev) +
          " sent a segment of another length; every worker must pass vectors of the same length");
    }
    return std::make_tuple(b, e, std::move(m));
  };
  // Reduce-scatter: at step t, rank r receives segment r-t-1 from its predecessor, adds its
  // own, and passes the chunk on at once (step t+1), so the ring stays busy.
  for (size_t c = 0; c < chunks_of(r); ++c) send_chunk(0, r, c);
  for (size_t t = 0; t + 1 < n; ++t) {
    size_t s = (r + 2 * n - t - 1) % n;
    for (size_t c = 0; c < chunks_of(s); ++c) {
      auto [b, e, m] = recv_chunk(t, s, c, "AllReduce");
      Reduce(data + b * esize, static_cast<const char*>(m.data()), e - b, dtype, op);
      if (t + 2 < n) send_chunk(t + 1, s, c);
    }
  }
  // Rank r now holds the full reduction of segment r+1. All-gather: pass finished
  // segments round the ring.
  const size_t base = n - 1;
  size_t own = (r + 1) % n;
  for (size_t c = 0; c < chunks_of(own); ++c) send_chunk(base, own, c);
  for (size_t t = 0; t + 1 < n; ++t) {
    size_t s = (r + n - t) % n;
    for (size_t c = 0; c < chunks_of(s); ++c) {
      auto [b, e, m] = recv_chunk(base + t, s, c, "AllReduce");
      std::memcpy(data + b * esize, m.data(), (e - b) * esize);
      if (t + 2 < n) send_chunk(base + t + 1, s, c);
    }
  }
}

void CollectiveGroup::Broadcast(void* data, size_t bytes, int root) {
  ++calls_;
  ++seq_;
  if (root < 0 || root >= size()) {
    throw TrainingFailedError("Broadcast: root " + std::to_string(root) +
                              " is not a rank of this group of " + std::to_string(size()));
  }
  if (rank_ == root) {
    for (int p = 0; p < size(); ++p)
      if (p != rank_) Send(p, 0, data, bytes);
    return;
  }
  zmq::message_t m = Recv(root, 0, "Broadcast");
  if (m.size() != bytes) {
    throw TrainingFailedError("Broadcast: rank " + std::to_string(root) + " sent " +
                              std::to_string(m.size()) + " bytes where " + std::to_string(bytes) +
                              " were expected");
  }
  std::memcpy(data, m.data(), bytes);
}

std::vector<std::string> CollectiveGroup::AllGather(const void* data, size_t bytes) {
  ++calls_;
  return Gather(data, bytes, "AllGather");
}

std::vector<std::string> CollectiveGroup::Gather(const void* data, size_t bytes, const char* what) {
  ++seq_;
  for (int p = 0; p < size(); ++p)
    if (p != rank_) Send(p, 0, data, bytes);
  std::vector<std::string> out(static_cast<size_t>(size()));
  for (int p = 0; p < size(); ++p) {
    if (p == rank_) {
      out[size_t(p)].assign(static_cast<const char*>(data), bytes);
    } else {
      zmq::message_t m = Recv(p, 0, what);
      out[size_t(p)].assign(static_cast<const char*>(m.data()), m.size());
    }
  }
  return out;
}

void CollectiveGroup::Barrier() {
  ++calls_;
  (void)Gather(nullptr, 0, "Barrier");
}

}  // namespace orrery::train
