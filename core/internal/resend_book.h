// Messages a process sends without waiting for their answer but must not lose: each is kept
// (its encoded frame 0, by request id) and sent again every resend_s until its answer takes
// it out, or given up, with a warning, after give_up_s. A peer that stops as a message
// arrives loses it with its connection (docs/protocol.md "Messages the head must not
// lose"). The client runtime's HeadClient and the node's HeadEvents keep one each.
//
// Not thread-safe: its owner locks around it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/internal/log.h"
#include "core/internal/outbox.h"

namespace orrery {

class ResendBook {
 public:
  // `outbox` outlives the book; `to`: where everything in it goes; `what`: the warning's
  // name for its messages ("a worker event").
  ResendBook(Outbox& outbox, std::string to, std::string what, double resend_s, double give_up_s)
      : outbox_(outbox),
        to_(std::move(to)),
        what_(std::move(what)),
        resend_s_(resend_s),
        give_up_s_(give_up_s) {}

  // Sends frame0 now and keeps it under `request_id`.
  void Send(uint64_t request_id, std::string frame0, double now) {
    outbox_.SendFrame(to_, frame0, nullptr);
    Keep(request_id, std::move(frame0), now);
  }
  // Keeps frame0 without sending it (the caller sends it once the entry exists, so that an
  // answer on another thread finds it).
  void Keep(uint64_t request_id, std::string frame0, double now) {
    entries_[request_id] = Entry{std::move(frame0), now, now};
  }
  // The answer came: true when `request_id` was kept (it is no more).
  bool Remove(uint64_t request_id) { return entries_.erase(request_id) > 0; }
  bool Has(uint64_t request_id) const { return entries_.count(request_id) > 0; }
  size_t size() const { return entries_.size(); }

  // Sends again, in request-id order, what has waited resend_s since it was last sent; drops
  // what has waited give_up_s since it was first sent. Returns the ids dropped.
  std::vector<uint64_t> Resend(double now) {
    std::vector<uint64_t> dropped;
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (now - e.first_sent >= give_up_s_) {
        LOG_WARN("gave up sending " + what_ + " to " + to_ + ": no answer in " +
                 std::to_string(int(give_up_s_)) + " s");
        dropped.push_back(it->first);
        it = entries_.erase(it);
        continue;
      }
      if (now - e.sent_at >= resend_s_) {
        e.sent_at = now;
        (void)outbox_.TrySendFrame(to_, e.frame0, nullptr);
      }
      ++it;
    }
    return dropped;
  }

 private:
  struct Entry {
    std::string frame0;
    double first_sent = 0;
    double sent_at = 0;
  };
  Outbox& outbox_;
  const std::string to_;
  const std::string what_;
  const double resend_s_;
  const double give_up_s_;
  std::map<uint64_t, Entry> entries_;
};

}  // namespace orrery
