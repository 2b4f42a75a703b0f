// PullObject (object_transfer.h): `parallel` connections take chunks from one counter, each
// keeping a few requests in flight, and receive every chunk's bytes straight into `dest`.
// The caller's thread runs the first connection; the others run on threads of their own that
// end before PullObject returns. The first connection to fail wakes the others (an eventfd),
// and its error is the result.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/internal/clock.h"
#include "core/internal/thread_annotations.h"
#include "objects/internal/object_transfer.h"
#include "objects/internal/object_transfer_wire.h"

namespace orrery::objects {

namespace transfer {
namespace {
std::atomic<int> g_requests_in_flight{2};
}  // namespace

void SetRequestsInFlight(int n) { g_requests_in_flight.store(std::clamp(n, 1, 64)); }
}  // namespace transfer

namespace {

using transfer::Bounds;

constexpr int kMaxParallel = 16;

class Pull {
 public:
  Pull(const std::string& address, const ObjectId& id, uint64_t size, char* dest,
       const PullOptions& options, const TransferKey& key, int wake_fd)
      : address_(address),
        id_(id),
        size_(size),
        dest_(dest),
        options_(options),
        key_(key),
        chunks_(size == 0 ? 1 : (size + options.chunk_bytes - 1) / options.chunk_bytes),
        bounds_{options.stall_timeout_ms, 0, wake_fd, nullptr, options.cancel} {}

  uint64_t chunks() const { return chunks_; }

  // One connection's work; a failure is recorded and wakes the other connections.
  void Run() {
    Status s = RunConnection();
    if (s.ok()) return;
    MutexLock lock(&mu_);
    if (first_error_.ok()) {
      first_error_ = std::move(s);
      uint64_t one = 1;
      (void)!write(bounds_.wake_fd, &one, sizeof(one));
    }
  }

  Status Result() {
    MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  struct Pending {
    uint64_t offset = 0;
    uint64_t length = 0;
  };

  Status RunConnection() {
    orrery::Result<int> fd = transfer::Connect(address_, options_.stall_timeout_ms, bounds_);
    if (!fd.ok()) return fd.status();
    Bounds handshake = bounds_;  // the whole handshake within one stall timeout
    handshake.deadline = MonotonicSeconds() + options_.stall_timeout_ms / 1000.0;
    Status s = transfer::ClientHandshake(*fd, key_, handshake);
    if (s.ok()) s = Transfer(*fd);
    close(*fd);
    if (!s.ok() && s.code() != StatusCode::kCancelled &&
        s.message().find(address_) == std::string::npos) {
      s = Status(s.code(),
                 "pulling object " + id_.Hex() + " from " + address_ + ": " + s.message());
    }
    return s;
  }

  // Requests chunks (up to the in-flight depth ahead) and receives their replies in order.
  Status Transfer(int fd) {
    const size_t depth = size_t(transfer::g_requests_in_flight.load());
    std::vector<Pending> ring(depth);
    size_t head = 0, count = 0;
    char buf[transfer::Reply::kSize];
    for (;;) {
      while (count < depth) {
        uint64_t i = next_.fetch_add(1);
        if (i >= chunks_) break;
        transfer::Request req;
        req.id = id_;
        req.offset = i * options_.chunk_bytes;
        req.length = std::min<uint64_t>(options_.chunk_bytes, size_ - req.offset);
        transfer::Encode(req, buf);
        if (Status s = transfer::SendBytes(fd, buf, transfer::Request::kSize, bounds_); !s.ok()) {
          return s;
        }
        ring[(head + count++) % depth] = {req.offset, req.length};
      }
      if (count == 0) return Status::Ok();
      const Pending& want = ring[head];
      if (Status s = transfer::RecvExact(fd, buf, transfer::Reply::kSize, bounds_); !s.ok()) {
        return s;
      }
      if (Status s = Check(buf, want); !s.ok()) return s;
      if (Status s = transfer::RecvExact(fd, dest_ + want.offset, want.length, bounds_); !s.ok()) {
        return s;
      }
      head = (head + 1) % depth;
      --count;
    }
  }

  // A reply header against the request it answers.
  Status Check(const char* buf, const Pending& want) const {
    transfer::Reply rep;
    if (Status s = transfer::Decode(buf, &rep); !s.ok()) return s;
    auto mismatch = [&](const char* field, uint64_t got, uint64_t expected) {
      return Status::InvalidArgument("the reply's " + std::string(field) + " is " +
                                     std::to_string(got) + ", expected " +
                                     std::to_string(expected));
    };
    if (rep.id != id_) return Status::InvalidArgument("the reply is for object " + rep.id.Hex());
    if (rep.offset != want.offset) return mismatch("offset", rep.offset, want.offset);
    switch (rep.status) {
      case transfer::ReplyStatus::kNotFound:
        return Status::NotFound("object " + id_.Hex() + " is not held by " + address_);
      case transfer::ReplyStatus::kBadRequest:
        return Status::InvalidArgument("the server refused the request of [" +
                                       std::to_string(want.offset) + ", +" +
                                       std::to_string(want.length) + ") as out of range");
      case transfer::ReplyStatus::kInternal:
        return Status::Internal("the server could not read object " + id_.Hex());
      case transfer::ReplyStatus::kOk:
        break;
    }
    if (rep.length != want.length) return mismatch("length", rep.length, want.length);
    if (rep.object_size != size_) return mismatch("object size", rep.object_size, size_);
    return Status::Ok();
  }

  const std::string& address_;
  const ObjectId id_;
  const uint64_t size_;
  char* const dest_;
  const PullOptions& options_;
  const TransferKey& key_;
  const uint64_t chunks_;
  const Bounds bounds_;
  std::atomic<uint64_t> next_{0};  // the next chunk to request, shared by the connections
  Mutex mu_;
  Status first_error_ GUARDED_BY(mu_);
};

Status CheckArguments(uint64_t size, const char* dest, const PullOptions& options) {
  if (options.chunk_bytes == 0 || options.chunk_bytes > transfer::kMaxRequestBytes) {
    return Status::InvalidArgument("PullObject: chunk_bytes must be in [1, 64 MiB]");
  }
  if (options.stall_timeout_ms <= 0) {
    return Status::InvalidArgument("PullObject: stall_timeout_ms must be positive");
  }
  if (size > 0 && dest == nullptr) return Status::InvalidArgument("PullObject: no destination");
  return Status::Ok();
}

}  // namespace

Status PullObject(const std::string& address, const ObjectId& id, uint64_t size, char* dest,
                  const PullOptions& options, const TransferKey& key) {
  if (Status s = CheckArguments(size, dest, options); !s.ok()) return s;
  if (options.cancel && options.cancel->load()) return Status::Cancelled("cancelled");
  int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) return Status::Unavailable(std::string("eventfd: ") + strerror(errno));
  Pull pull(address, id, size, dest, options, key, wake_fd);
  int parallel =
      int(std::min<uint64_t>(std::clamp(options.parallel, 1, kMaxParallel), pull.chunks()));
  std::vector<std::thread> threads;
  for (int i = 1; i < parallel; ++i) {
    try {
      threads.emplace_back([&pull] { pull.Run(); });
    } catch (const std::system_error&) {
      break;  // fewer connections than asked for; the ones running take every chunk
    }
  }
  pull.Run();
  for (auto& t : threads) t.join();
  close(wake_fd);
  return pull.Result();
}

}  // namespace orrery::objects
