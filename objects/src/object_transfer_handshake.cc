// The data channel's handshake (object_transfer_wire.h, docs/protocol.md "Object transfer"):
// ServerHello -> ClientHello -> ServerAccept, a mutual challenge-response over the transfer key
// when both sides have one, a version and mode check when neither has.
#include "objects/internal/object_transfer_wire.h"

namespace orrery::objects::transfer {

namespace {

Status SendAccept(int fd, AcceptStatus status, const Mac& mac, const Bounds& bounds) {
  ServerAccept accept;
  accept.status = status;
  accept.mac = mac;
  char buf[ServerAccept::kSize];
  Encode(accept, buf);
  return SendBytes(fd, buf, sizeof(buf), bounds);
}

const char* Mode(bool auth) { return auth ? "with the cluster's key" : "without a key"; }

}  // namespace

Status ClientHandshake(int fd, const TransferKey& key, const Bounds& bounds) {
  char buf[ClientHello::kSize];
  static_assert(ClientHello::kSize >= ServerHello::kSize &&
                ClientHello::kSize >= ServerAccept::kSize);
  if (Status s = RecvExact(fd, buf, ServerHello::kSize, bounds); !s.ok()) {
    return Status(s.code(), "waiting for the server's hello: " + s.message());
  }
  ServerHello hello;
  if (Status s = Decode(buf, &hello); !s.ok()) return s;
  if (hello.status == HelloStatus::kBusy) {
    return Status::Unavailable("the server is busy (it serves at most " +
                               std::to_string(kMaxConnections) + " connections)");
  }
  ClientHello mine;
  mine.flags = key.enabled ? kFlagAuth : 0;
  mine.nonce = RandomNonce();
  if (key.enabled) mine.mac = ClientMac(key.key, hello.nonce, mine.nonce);
  Encode(mine, buf);
  // Sent even when the modes differ, so the server logs the mismatch too.
  Status sent = SendBytes(fd, buf, ClientHello::kSize, bounds);
  bool server_auth = (hello.flags & kFlagAuth) != 0;
  if (server_auth != key.enabled) {
    return Status::PermissionDenied(std::string("the data channel's server runs ") +
                                    Mode(server_auth) + " and this process " + Mode(key.enabled) +
                                    " (one side was started with --insecure)");
  }
  if (!sent.ok()) return Status(sent.code(), "sending the client hello: " + sent.message());
  if (Status s = RecvExact(fd, buf, ServerAccept::kSize, bounds); !s.ok()) {
    return Status(s.code(), "waiting for the server's accept: " + s.message());
  }
  ServerAccept accept;
  if (Status s = Decode(buf, &accept); !s.ok()) return s;
  switch (accept.status) {
    case AcceptStatus::kAuthFailed:
      return Status::PermissionDenied(
          "the data channel's server refused this process's key (a different cluster's token)");
    case AcceptStatus::kAuthMismatch:
      return Status::PermissionDenied(
          "the data channel's server and this process disagree on authentication "
          "(one side was started with --insecure)");
    case AcceptStatus::kOk:
      break;
  }
  if (key.enabled && !MacEquals(accept.mac, ServerMac(key.key, hello.nonce, mine.nonce))) {
    return Status::PermissionDenied(
        "the data channel's server did not prove it holds the cluster's key");
  }
  return Status::Ok();
}

Status ServerHandshake(int fd, const TransferKey& key, const Bounds& bounds) {
  ServerHello hello;
  hello.flags = key.enabled ? kFlagAuth : 0;
  hello.nonce = RandomNonce();
  char buf[ClientHello::kSize];
  Encode(hello, buf);
  if (Status s = SendBytes(fd, buf, ServerHello::kSize, bounds); !s.ok()) return s;
  if (Status s = RecvExact(fd, buf, ClientHello::kSize, bounds); !s.ok()) {
    return Status(s.code(), "waiting for the client's hello: " + s.message());
  }
  ClientHello theirs;
  if (Status s = Decode(buf, &theirs); !s.ok()) return s;
  bool client_auth = (theirs.flags & kFlagAuth) != 0;
  if (client_auth != key.enabled) {
    (void)SendAccept(fd, AcceptStatus::kAuthMismatch, Mac{}, bounds);
    return Status::PermissionDenied(std::string("a client ") + Mode(client_auth) +
                                    " connected to a server " + Mode(key.enabled));
  }
  Mac mac{};
  if (key.enabled) {
    if (!MacEquals(theirs.mac, ClientMac(key.key, hello.nonce, theirs.nonce))) {
      (void)SendAccept(fd, AcceptStatus::kAuthFailed, Mac{}, bounds);
      return Status::PermissionDenied("a client failed authentication (wrong key)");
    }
    mac = ServerMac(key.key, hello.nonce, theirs.nonce);
  }
  return SendAccept(fd, AcceptStatus::kOk, mac, bounds);
}

}  // namespace orrery::objects::transfer
