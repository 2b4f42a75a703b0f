// orrery::Buffer: a read-only run of bytes whose storage is shared, so that a large value
// can be read where it lies (a node's shared-memory store) instead of being copied out.
// docs/api.md "Large values and orrery::Buffer".
#pragma once

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <cstddef>
#include <cstdint>
#include <memory>
#include <msgpack.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace orrery {

// A read-only, contiguous run of bytes that shares its storage: cheap to copy, immutable.
// Its storage is either its own (a std::string or vector it took) or memory kept alive by a
// keeper (a shared-memory object's mapping, for zero-copy reads). Every copy of a Buffer,
// and every view obtained from it, holds the storage alive through the same keeper, so the
// bytes stay valid for as long as any copy lives. Safe to read from any thread; the bytes
// are never written through a Buffer.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::string bytes);
  explicit Buffer(std::vector<uint8_t> bytes);
  // A Buffer owning a copy of [data, data + size).
  static Buffer Copy(const void* data, size_t size);
  // A view of [data, data + size), which `keeper` keeps alive and unchanged: the caller
  // promises that nobody writes those bytes while the keeper lives.
  Buffer(const uint8_t* data, size_t size, std::shared_ptr<const void> keeper);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  std::vector<uint8_t> ToVector() const { return {data_, data_ + size_}; }
  std::string ToString() const { return std::string(view()); }
  // What keeps the bytes alive (null for an empty Buffer).
  const std::shared_ptr<const void>& keeper() const { return keeper_; }

  // msgpack: packs as bin (at most 4 GiB - 1, msgpack's limit; larger throws). Unpacks a
  // bin or a str: it shares the input when the input bytes are held by the current
  // internal::ScopedUnpackKeeper (no copy); otherwise it copies.
  template <typename Packer>
  void msgpack_pack(Packer& pk) const {
    uint32_t n = msgpack::checked_get_container_size(size_);
    pk.pack_bin(n);
    pk.pack_bin_body(reinterpret_cast<const char*>(data_), n);
  }
  void msgpack_unpack(const msgpack::object& o);

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> keeper_;
};

namespace internal {

// For the duration of an unpack whose input [begin, begin+size) is kept alive by `keeper`
// (thread-local, nestable): a Buffer unpacked from bytes inside that range shares them.
// Create it on the thread that unpacks, around the unpack and the conversion; scopes nest
// (the innermost whose range holds the bytes wins) and must end in reverse order.
class ScopedUnpackKeeper {
 public:
  ScopedUnpackKeeper(const char* begin, size_t size, std::shared_ptr<const void> keeper);
  ~ScopedUnpackKeeper();
  ScopedUnpackKeeper(const ScopedUnpackKeeper&) = delete;
  ScopedUnpackKeeper& operator=(const ScopedUnpackKeeper&) = delete;

  // A view of [data, data + size) if a keeper in force on this thread holds those bytes;
  // an empty Buffer with no keeper otherwise.
  static Buffer Share(const char* data, size_t size);

 private:
  const char* begin_;
  size_t size_;
  std::shared_ptr<const void> keeper_;
  const ScopedUnpackKeeper* outer_;
};

}  // namespace internal
}  // namespace orrery
