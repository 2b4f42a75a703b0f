// Hooks for Orrery's own tests (not part of the public API).
#pragma once

#include <string>

namespace orrery::internal {

// The head's inbox address ("tcp://127.0.0.1:port") seen by this process.
std::string HeadAddressForTest();
// This process's inbox address; inside an actor method: the actor's worker address.
std::string WorkerAddressForTest();

}  // namespace orrery::internal
