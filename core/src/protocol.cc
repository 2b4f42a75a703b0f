#include "core/internal/protocol.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>

#include "orrery/version.h"

namespace orrery::proto {

namespace {
// Ends both sides' messages about another protocol version.
constexpr const char* kSameVersionRule =
    ": every process of a cluster must run the same protocol version (docs/cli.md \"Versions\")";
}  // namespace

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
#define ORRERY_MSG_CASE(name, value) case MsgType::k##name:
    ORRERY_MESSAGE_TYPES(ORRERY_MSG_CASE)
#undef ORRERY_MSG_CASE
    return true;
  }
  return false;
}

const char* TypeName(MsgType t) {
  switch (t) {
#define ORRERY_MSG_NAME(name, value) \
  case MsgType::k##name:             \
    return #name;
    ORRERY_MESSAGE_TYPES(ORRERY_MSG_NAME)
#undef ORRERY_MSG_NAME
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
    return Status::Incompatible("the peer speaks protocol version " + std::to_string(b[2]) +
                                "; this is " + VersionLine() + kSameVersionRule);
  }
  if (!IsKnownType(b[3]))
    return Status::InvalidArgument("unknown message type " + std::to_string(b[3]));
  return Header{MsgType(b[3]),
                std::string_view(static_cast<const char*>(data) + kHeaderSize, size - kHeaderSize)};
}

std::string EncodeVersionRefusal() {
  std::string out{char(kMagic0), char(kMagic1), char(kProtocolVersion), char(kVersionRefusalType)};
  out += std::string(Version()).substr(0, kMaxRefusalText);
  return out;
}

std::optional<Status> DecodeVersionRefusal(const void* data, size_t size, const std::string& from) {
  auto* b = static_cast<const uint8_t*>(data);
  if (size < kHeaderSize || size > kHeaderSize + kMaxRefusalText || b[0] != kMagic0 ||
      b[1] != kMagic1 || b[3] != kVersionRefusalType) {
    return std::nullopt;
  }
  // The peer's version text, printable ASCII only (it comes from the network).
  std::string theirs;
  for (size_t i = kHeaderSize; i < size; ++i) {
    char c = char(b[i]);
    theirs += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (theirs.empty()) theirs = "unknown";
  return Status::Incompatible(from + " runs orrery " + theirs + " (protocol version " +
                              std::to_string(b[2]) + ") and refused this " + VersionLine() +
                              kSameVersionRule);
}

}  // namespace orrery::proto
