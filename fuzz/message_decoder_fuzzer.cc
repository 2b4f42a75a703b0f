// libFuzzer target: frame 0 of a wire message as a peer can send it (core/internal/protocol.h).
// DecodeHeader validates magic, version and type; the meta bytes are then decoded into every
// message body, as any receiver might (a receiver picks the body by type, but a hostile peer
// picks the type). Decoding must never crash, hang or allocate without bound: a bad frame
// is an InvalidArgument Status, nothing else.
#include <cstddef>
#include <cstdint>

#include "core/internal/protocol.h"

namespace {

using namespace orrery::proto;  // NOLINT: the message bodies

template <typename... Msgs>
void DecodeAll(std::string_view meta) {
  auto one = [&](auto msg) {
    orrery::Status s = DecodeMeta(meta, &msg);
    (void)s;  // ok or InvalidArgument; both are fine, a crash is not
  };
  (one(Msgs{}), ...);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orrery::Result<Header> header = DecodeHeader(data, size);
  if (!header.ok()) return 0;
  (void)IsKnownType(uint8_t(header->type));
  (void)TypeName(header->type);
  DecodeAll<ErrorMsg, AckMsg, CallMsg, ReplyMsg, GetObjectMsg, ActorOptionsMsg, ActorSpecMsg,
            CreateActorMsg, ActorUpdateMsg, SubscribeActorMsg, NamedActorMsg, KillActorMsg,
            LeaseRequestMsg, LeaseReplyMsg, ReturnLeaseMsg, PlacementGroupMsg,
            PlacementGroupReplyMsg, NodeInfoMsg, ClusterInfoMsg, RegisterNodeMsg, StartActorMsg,
            GrantLeaseMsg, KillWorkerMsg, WorkerEventMsg, ReleaseLeaseMsg, WorkerRegisterMsg,
            AssignMsg, AssignReplyMsg, JobMsg, RecordMsg, BinaryMsg, PingMsg, ObjectStoreMsg,
            ObjectStoreReplyMsg, ObjectFreeMsg, ObjectCopiedMsg, ListObjectsMsg,
            ListObjectsReplyMsg, ObjectArgMsg, BorrowMsg, CancelMsg, StreamItemMsg, StreamAckMsg>(
      header->meta);
  return 0;
}
