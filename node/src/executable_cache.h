// The executables this node may run (docs/security.md "What a node runs", docs/protocol.md
// "Executables"): only those the head says a job registered (vouched for), and only from a
// file whose SHA-256 is the one named. Checks files by their content hash (remembered per
// file identity), keeps the copies fetched from the head in a cache directory, and asks the
// head for an executable once however many workers and jobs wait for it. Runtime envs'
// working_dir packages (folder_pack.h) are fetched the same way and kept unpacked there.
//
// Not thread-safe: used on the node's inbox thread only. With UnpackInBackground, packages
// are checked, unpacked and trimmed on a thread of its own, which hands them back through
// the function it was given.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/internal/folder_pack.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/recent_ids.h"
#include "node/src/zygote_pool.h"
#include "orrery/status.h"

namespace orrery::node {

class ExecutableCache {
 public:
  // `cache_dir`: where fetched executables are kept (made on first use, mode 0700).
  ExecutableCache(Outbox& outbox, std::string head_address, std::string cache_dir);
  // Waits for the package being unpacked, if any; what is queued after it is dropped.
  ~ExecutableCache();

  // Whether the head said a job registered the executable with this SHA-256.
  bool Vouched(const std::string& hash) const { return vouched_.count(hash) > 0; }
  // The local path of the executable with this SHA-256: `path` when its content has it, else
  // the cached copy when its content has it; empty when it must be fetched.
  std::string LocalExecutable(const std::string& path, const std::string& hash);
  // Whether the file at `path` has this SHA-256.
  bool HasContent(const std::string& path, const std::string& hash);

  // Asks the head (answering to `reply_to`) whether a job registered the executable `hash`,
  // and for its content when this node has no copy at `path` or in the cache, unless a
  // request for it is out already. `waiter` is handed back by OnReply.
  void Await(const std::string& hash, const std::string& path, const std::string& waiter,
             const std::string& reply_to);

  struct Fetched {
    std::vector<std::string> waiters;  // as given to Await, in order
    std::string error;                 // empty: vouched for, and (if sent) cached
    bool package = false;              // a working_dir's package, not an executable
  };
  // The head's kBinaryReply with its payload. NotFound for a reply that answers no request
  // out (a stray or forged one: logged, rate-limited, and otherwise ignored). A package
  // unpacked in the background (UnpackInBackground) is handed back later, with every waiter
  // that asked for it meanwhile: what this returns for it has no waiters.
  [[nodiscard]] Result<Fetched> OnReply(const proto::BinaryMsg& m, std::string bytes);

  // Checks and unpacks fetched packages, and removes the copies trimmed, on a thread of the
  // cache's own instead of the caller's: a package of 100,000 small files takes seconds, for
  // which the node's inbox (every worker's object requests included) would wait. `post` runs
  // a function on the caller's thread (thread-safe); there `unpacked` is handed each
  // package's hash and its waiters. Call once, before the first package is fetched; without
  // it OnReply unpacks on the calling thread.
  void UnpackInBackground(std::function<void(std::function<void()>)> post,
                          std::function<void(const std::string& hash, const Fetched&)> unpacked);

  // Where work with the runtime env `env` starts on this host: env.working_dir itself when
  // it names no package or this host sees that very folder, else this node's copy of the
  // package. Empty while the package must be fetched: asked for here (answering to
  // `reply_to`, once however many wait), unpacked by OnReply, which hands `waiter` back.
  std::string WorkingFolder(const proto::RuntimeEnvMsg& env, const std::string& waiter,
                            const std::string& reply_to);
  // The bytes of fetched packages that wait for the background thread at most
  // (UnpackInBackground): two of the largest by default. Past it a package is unpacked on
  // the calling thread, as without the background thread.
  static constexpr size_t kMaxBacklogBytes = 2 * folder_pack::kMaxPackageBytes;
  void SetBacklogLimit(size_t bytes) { max_backlog_bytes_ = bytes; }
  // Unpacked packages kept at most (each at most folder_pack::kMaxPackageBytes): past it,
  // the one used longest ago that no worker or job runs in goes (`in_use` says which do).
  static constexpr size_t kMaxUnpacked = 32;
  void SetUnpackedLimit(size_t n) { max_unpacked_ = n; }
  void SetInUse(std::function<bool(const std::string& folder)> in_use) {
    in_use_ = std::move(in_use);
  }
  // Sends again, with the same nonce, each request the head has not answered: first
  // kFirstResendS after it went out, then at gaps that double up to kMaxResendGapS. A request
  // sent as the head stops is lost with its connection, and its waiters (a lease's worker, a
  // job) would otherwise wait out kFetchTimeoutS. A reply to a request answered already is
  // dropped.
  void Resend(double now);
  static constexpr double kFirstResendS = 1;
  static constexpr double kMaxResendGapS = 16;
  // The requests the head has not answered within kFetchTimeoutS of `now` (a reply it
  // could not queue, a head that never came back): each fails its waiters, with its hash.
  std::vector<std::pair<std::string, Fetched>> Expire(double now);
  static constexpr double kFetchTimeoutS = 120;

  const std::string& dir() const { return dir_; }

 private:
  // Writes the fetched bytes as dir_/hash (through a temporary file); an error message or "".
  std::string Store(const std::string& hash, const std::string& bytes);

  Outbox& outbox_;
  const std::string head_address_;
  const std::string dir_;
  // Key: the hash, with kPackageKey before it for a package.
  static constexpr char kPackageKey[] = "package:";
  // Sends the request for `key` (nonce_ remembers it) unless one is out; adds the waiter.
  void Request(const std::string& key, proto::BinaryMsg ask, const std::string& waiter);
  // The folder this node unpacked the package `hash` into; empty when it has none yet.
  std::string PackageFolder(const std::string& hash) const;
  // Checks and unpacks a fetched package; an error message or "". Touches only files (any
  // thread).
  std::string Unpack(const std::string& hash, const std::string& bytes) const;
  // On the caller's thread, once the background thread has unpacked `hash`: trims, and hands
  // its waiters to unpacked_.
  void Unpacked(const std::string& hash, const std::string& error);
  // Removes unpacked packages used longest ago, but `keep` and those in use, while there
  // are more than max_unpacked_. In the background, each is renamed away at once and removed
  // there.
  void TrimUnpacked(const std::string& keep);
  // Removes an unpacked copy (in the background: renames it away, then removes it there);
  // false, logged, when it cannot.
  bool RemoveCopy(const std::string& folder);

  std::map<std::string, std::vector<std::string>> awaiting_;  // key -> waiters
  // A request out to the head, and when it is sent again (Resend).
  struct Asked {
    proto::BinaryMsg ask;  // its request_id is the nonce of the head's expected reply
    double asked_at = 0;   // first sent (monotonic): Expire counts from here
    double next_send = 0;
    double gap = kFirstResendS;
  };
  std::map<std::string, Asked> asked_;  // key -> its request out
  // Nonces of requests answered: a reply to one of their resends is dropped without a word.
  RecentIds<uint64_t> answered_{256};
  size_t max_unpacked_ = kMaxUnpacked;
  std::function<bool(const std::string&)> in_use_;
  std::set<std::string> vouched_;
  std::map<std::string, std::pair<ExecutableIdentity, std::string>>
      hashes_;  // path -> (file, hash)

  // Packages being unpacked in the background, by hash, and their bytes in all (at most
  // max_backlog_bytes_).
  struct Unpacking {
    std::vector<std::string> waiters;
    size_t bytes = 0;
  };
  std::map<std::string, Unpacking> unpacking_;
  size_t backlog_bytes_ = 0;
  size_t max_backlog_bytes_ = kMaxBacklogBytes;
  std::function<void(const std::string&, const Fetched&)> unpacked_;
  class Background;  // the thread, and the functions queued for it
  std::unique_ptr<Background> background_;
};

}  // namespace orrery::node
