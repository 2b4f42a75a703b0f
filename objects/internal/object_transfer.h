// The object data channel: moves a sealed object's bytes from the node that holds it to a node
// that needs it, over plain TCP (docs/protocol.md "Object transfer").
//
// Each node runs one ObjectServer that serves reads of the objects in its store; a node that
// needs an object calls PullObject, which receives straight into the destination (the node's
// shared-memory arena) in chunks, over a few connections with several requests in flight each.
// Connections start with a mutual challenge-response over a key derived from the cluster's
// token (ProcessTransferKey); the object bytes themselves cross the wire unencrypted, for speed
// (docs/security.md). Every byte from a peer is validated: a server bounds what a client can
// hold, a client checks every reply against the request it sent.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::objects {

// A sealed object's bytes, kept valid while `pin` lives.
struct ObjectBytes {
  const char* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<void> pin;
};

// The data channel's key: 32 bytes when enabled.
struct TransferKey {
  bool enabled = false;
  std::string key;
};

// The key for the data channel: derived from this process's cluster credentials
// (security::ProcessCredentials()) with a domain-separation label, so it differs from the CURVE
// keys; disabled when credentials are off (--insecure). Every process of a cluster derives the
// same key.
TransferKey ProcessTransferKey();

// Serves reads of sealed objects to PullObject clients. One thread accepts; each connection has
// a thread of its own (at most kMaxConnections; more are told the server is busy and closed).
// Thread-safe: Start, address and Stop may be called from any thread.
class ObjectServer {
 public:
  // Called on the server's connection threads, concurrently (must be thread-safe), once per
  // request: the bytes of a sealed object, or NotFound. The server holds the returned pin only
  // while it sends that request's reply.
  using Lookup = std::function<Result<ObjectBytes>(const ObjectId& id)>;

  ObjectServer(Lookup lookup, TransferKey key);
  ~ObjectServer();  // Stop()
  ObjectServer(const ObjectServer&) = delete;
  ObjectServer& operator=(const ObjectServer&) = delete;

  // Binds bind_host:0 (an ephemeral port) and starts serving. address() is then
  // advertise_host (or bind_host when empty) ":" port. Fails when the host does not parse or
  // the bind fails, or when the server was started before.
  Status Start(const std::string& bind_host, const std::string& advertise_host = "");
  std::string address() const;
  // Closes the listener and every connection (transfers in flight end at their next wait)
  // and joins the threads (so it waits for Lookup calls in progress to return). Idempotent; after
  // it the server cannot be started again.
  void Stop();

 private:
  struct State;  // shared with the server's threads (object_transfer.cc)
  std::shared_ptr<State> state_;
};

struct PullOptions {
  uint64_t chunk_bytes = 4 << 20;  // bytes per request (at most 64 MiB)
  int parallel = 2;                // connections, each with a few requests in flight
  int stall_timeout_ms = 10000;    // no byte received (or sent) for this long: Unavailable
  const std::atomic<bool>* cancel = nullptr;  // set: stop soon (within ~50 ms) with Cancelled
};

// Pulls bytes [0, size) of object `id` from the server at `address` ("host:port", IPv6 hosts
// in brackets) into `dest` (size bytes, caller-owned; on failure its content is unspecified).
// Blocking; every wait is bounded by the stall timeout. Returns OK, or:
//   Unavailable       cannot connect, the server is busy, the peer closed or died mid-way, or
//                     nothing moved for stall_timeout_ms;
//   NotFound          the server does not hold the object;
//   InvalidArgument   the peer sent something that does not match the protocol or the request
//                     (wrong id, offset, length or object size, bad magic or version), or
//                     refused a request as out of range; the connection is dropped;
//   PermissionDenied  authentication failed (wrong key, or one side without a key);
//   Internal          the server's lookup failed otherwise (or threw);
//   Cancelled         options.cancel was set.
Status PullObject(const std::string& address, const ObjectId& id, uint64_t size, char* dest,
                  const PullOptions& options, const TransferKey& key);

}  // namespace orrery::objects
