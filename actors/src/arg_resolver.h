// Resolves a call's ObjectRef arguments before it is sent (docs/architecture.md "Client
// runtime"): fetches values owned elsewhere and packs the arguments once all are ready.
// Thread-safety: any thread; `ready` runs on the thread that completes the last argument
// (the caller's, or the inbox thread's).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/src/object_store.h"
#include "actors/src/submission.h"

namespace orrery::runtime {

class ArgResolver {
 public:
  // All three outlive the resolver.
  ArgResolver(ObjectStore& store, Outbox& outbox, const ProcessIdentity& self)
      : store_(store), outbox_(outbox), self_(self) {}

  // Resolves the call's ObjectRef arguments, then runs `ready`: call->args holds the packed
  // arguments, or call->dep_error the first argument's error.
  void Resolve(const std::shared_ptr<PendingCall>& call, std::function<void()> ready);
  // Asks the owner of a value held elsewhere for it, once.
  void EnsureFetch(const internal::RefHolder& ref);
  static std::string PackArgs(const std::vector<internal::ArgSlot>& slots);

 private:
  ObjectStore& store_;
  Outbox& outbox_;
  const ProcessIdentity& self_;
};

}  // namespace orrery::runtime
