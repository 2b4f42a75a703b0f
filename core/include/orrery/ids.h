// Identifiers: random 128-bit ids printed as 32 hex characters.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

namespace orrery {

class UniqueId {
 public:
  static constexpr size_t kSize = 16;
  UniqueId() { bytes_.fill(0); }
  static UniqueId Random();
  // Parses 32 hex characters; returns Nil() on malformed input.
  static UniqueId FromHex(const std::string& hex);
  static UniqueId FromBinary(const std::string& binary);
  static UniqueId Nil() { return UniqueId(); }

  bool IsNil() const;
  std::string Hex() const;
  std::string Binary() const {
    return std::string(reinterpret_cast<const char*>(bytes_.data()), kSize);
  }
  const uint8_t* data() const { return bytes_.data(); }

  bool operator==(const UniqueId& o) const { return bytes_ == o.bytes_; }
  bool operator!=(const UniqueId& o) const { return bytes_ != o.bytes_; }
  bool operator<(const UniqueId& o) const { return bytes_ < o.bytes_; }
  size_t Hash() const {
    size_t h;
    std::memcpy(&h, bytes_.data(), sizeof(h));
    return h;
  }

 private:
  std::array<uint8_t, kSize> bytes_;
};

// Distinct types so an ActorId cannot be passed where a NodeId is expected.
#define ORRERY_DEFINE_ID(Name)                                                       \
  class Name : public UniqueId {                                                     \
   public:                                                                           \
    Name() = default;                                                                \
    explicit Name(const UniqueId& id) : UniqueId(id) {}                              \
    static Name Random() { return Name(UniqueId::Random()); }                        \
    static Name FromHex(const std::string& h) { return Name(UniqueId::FromHex(h)); } \
  }

ORRERY_DEFINE_ID(ActorId);
ORRERY_DEFINE_ID(ObjectId);
ORRERY_DEFINE_ID(NodeId);
ORRERY_DEFINE_ID(WorkerId);
ORRERY_DEFINE_ID(JobId);
ORRERY_DEFINE_ID(PlacementGroupId);

#undef ORRERY_DEFINE_ID

struct IdHash {
  size_t operator()(const UniqueId& id) const { return id.Hash(); }
};

}  // namespace orrery
