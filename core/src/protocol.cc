#include "core/src/protocol.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>

namespace orrery::proto {

uint64_t RequestIdBase() {
  // Per process: a forked child (a worker from its zygote) draws its own.
  static std::atomic<pid_t> drawn_for{0};
  static std::atomic<uint64_t> base{0};
  pid_t pid = getpid();
  if (drawn_for.load() != pid) {
    std::random_device rd;
    uint64_t r = (uint64_t(rd()) << 32) ^ rd();
    // Mixed with the pid and the time in case random_device is a deterministic fallback.
    r ^= uint64_t(pid) * 0x9e3779b97f4a7c15ull;
    r ^= uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) *
         0xbf58476d1ce4e5b9ull;
    base.store((r >> 2) | 1);
    drawn_for.store(pid);
  }
  return base.load();
}

bool IsKnownType(uint8_t t) {
  switch (MsgType(t)) {
    case MsgType::kError:
    case MsgType::kCall:
    case MsgType::kCallReply:
    case MsgType::kGetObject:
    case MsgType::kObjectReply:
    case MsgType::kCreateActor:
    case MsgType::kCreateActorReply:
    case MsgType::kSubscribeActor:
    case MsgType::kActorUpdate:
    case MsgType::kGetNamedActor:
    case MsgType::kGetNamedActorReply:
    case MsgType::kKillActor:
    case MsgType::kRequestLease:
    case MsgType::kLeaseReply:
    case MsgType::kReturnLease:
    case MsgType::kCreatePlacementGroup:
    case MsgType::kPlacementGroupReply:
    case MsgType::kRemovePlacementGroup:
    case MsgType::kWaitPlacementGroup:
    case MsgType::kGetClusterInfo:
    case MsgType::kClusterInfoReply:
    case MsgType::kAck:
    case MsgType::kRegisterJob:
    case MsgType::kPutBinary:
    case MsgType::kFetchBinary:
    case MsgType::kBinaryReply:
    case MsgType::kPutRecord:
    case MsgType::kRegisterNode:
    case MsgType::kStartActor:
    case MsgType::kGrantLease:
    case MsgType::kKillWorker:
    case MsgType::kWorkerEvent:
    case MsgType::kReleaseLease:
    case MsgType::kWorkerRegister:
    case MsgType::kAssign:
    case MsgType::kAssignReply:
    case MsgType::kExit:
    case MsgType::kPing:
    case MsgType::kPong:
      return true;
  }
  return false;
}

const char* TypeName(MsgType t) {
  switch (t) {
    case MsgType::kError:
      return "Error";
    case MsgType::kCall:
      return "Call";
    case MsgType::kCallReply:
      return "CallReply";
    case MsgType::kGetObject:
      return "GetObject";
    case MsgType::kObjectReply:
      return "ObjectReply";
    case MsgType::kCreateActor:
      return "CreateActor";
    case MsgType::kCreateActorReply:
      return "CreateActorReply";
    case MsgType::kSubscribeActor:
      return "SubscribeActor";
    case MsgType::kActorUpdate:
      return "ActorUpdate";
    case MsgType::kGetNamedActor:
      return "GetNamedActor";
    case MsgType::kGetNamedActorReply:
      return "GetNamedActorReply";
    case MsgType::kKillActor:
      return "KillActor";
    case MsgType::kRequestLease:
      return "RequestLease";
    case MsgType::kLeaseReply:
      return "LeaseReply";
    case MsgType::kReturnLease:
      return "ReturnLease";
    case MsgType::kCreatePlacementGroup:
      return "CreatePlacementGroup";
    case MsgType::kPlacementGroupReply:
      return "PlacementGroupReply";
    case MsgType::kRemovePlacementGroup:
      return "RemovePlacementGroup";
    case MsgType::kWaitPlacementGroup:
      return "WaitPlacementGroup";
    case MsgType::kGetClusterInfo:
      return "GetClusterInfo";
    case MsgType::kClusterInfoReply:
      return "ClusterInfoReply";
    case MsgType::kAck:
      return "Ack";
    case MsgType::kRegisterJob:
      return "RegisterJob";
    case MsgType::kPutBinary:
      return "PutBinary";
    case MsgType::kFetchBinary:
      return "FetchBinary";
    case MsgType::kBinaryReply:
      return "BinaryReply";
    case MsgType::kPutRecord:
      return "PutRecord";
    case MsgType::kRegisterNode:
      return "RegisterNode";
    case MsgType::kStartActor:
      return "StartActor";
    case MsgType::kGrantLease:
      return "GrantLease";
    case MsgType::kKillWorker:
      return "KillWorker";
    case MsgType::kWorkerEvent:
      return "WorkerEvent";
    case MsgType::kReleaseLease:
      return "ReleaseLease";
    case MsgType::kWorkerRegister:
      return "WorkerRegister";
    case MsgType::kAssign:
      return "Assign";
    case MsgType::kAssignReply:
      return "AssignReply";
    case MsgType::kExit:
      return "Exit";
    case MsgType::kPing:
      return "Ping";
    case MsgType::kPong:
      return "Pong";
  }
  return "Unknown";
}

Result<Header> DecodeHeader(const void* data, size_t size) {
  if (size < kHeaderSize) {
    return Status::InvalidArgument("frame of " + std::to_string(size) +
                                   " bytes is shorter than the " + std::to_string(kHeaderSize) +
                                   "-byte header");
  }
  auto* b = static_cast<const uint8_t*>(data);
  if (b[0] != kMagic0 || b[1] != kMagic1)
    return Status::InvalidArgument("bad magic: not an Orrery frame");
  if (b[2] != kProtocolVersion) {
    return Status::InvalidArgument("protocol version " + std::to_string(b[2]) +
                                   " is not supported (this is " +
                                   std::to_string(kProtocolVersion) + ")");
  }
  if (!IsKnownType(b[3]))
    return Status::InvalidArgument("unknown message type " + std::to_string(b[3]));
  return Header{MsgType(b[3]),
                std::string_view(static_cast<const char*>(data) + kHeaderSize, size - kHeaderSize)};
}

}  // namespace orrery::proto
