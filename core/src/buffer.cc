#include "orrery/buffer.h"

#include <cstring>

#include "orrery/api/serialize.h"

namespace orrery {

namespace {
// The innermost ScopedUnpackKeeper of this thread (a stack linked through outer_).
thread_local const internal::ScopedUnpackKeeper* tls_unpack_keeper = nullptr;
}  // namespace

Buffer::Buffer(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  data_ = reinterpret_cast<const uint8_t*>(owned->data());
  size_ = owned->size();
  keeper_ = std::move(owned);
}

Buffer::Buffer(std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  data_ = owned->data();
  size_ = owned->size();
  keeper_ = std::move(owned);
}

Buffer Buffer::Copy(const void* data, size_t size) {
  if (size == 0) return Buffer();
  return Buffer(std::string(static_cast<const char*>(data), size));
}

Buffer::Buffer(const uint8_t* data, size_t size, std::shared_ptr<const void> keeper)
    : data_(data), size_(size), keeper_(std::move(keeper)) {}

void Buffer::msgpack_unpack(const msgpack::object& o) {
  const char* ptr = nullptr;
  size_t size = 0;
  if (o.type == msgpack::type::BIN) {
    ptr = o.via.bin.ptr;
    size = o.via.bin.size;
  } else if (o.type == msgpack::type::STR) {
    ptr = o.via.str.ptr;
    size = o.via.str.size;
  } else {
    throw internal::ConvertError(std::string("orrery::Buffer: expected binary, got ") +
                                 internal::MsgpackTypeName(o));
  }
  if (size == 0) {
    *this = Buffer();
    return;
  }
  Buffer shared = internal::ScopedUnpackKeeper::Share(ptr, size);
  *this = shared.keeper() ? std::move(shared) : Copy(ptr, size);
}

namespace internal {

ScopedUnpackKeeper::ScopedUnpackKeeper(const char* begin, size_t size,
                                       std::shared_ptr<const void> keeper)
    : begin_(begin), size_(size), keeper_(std::move(keeper)), outer_(tls_unpack_keeper) {
  tls_unpack_keeper = this;
}

ScopedUnpackKeeper::~ScopedUnpackKeeper() { tls_unpack_keeper = outer_; }

Buffer ScopedUnpackKeeper::Share(const char* data, size_t size) {
  // Compared as integers: the pointers may belong to unrelated objects.
  auto at = reinterpret_cast<uintptr_t>(data);
  for (const ScopedUnpackKeeper* k = tls_unpack_keeper; k != nullptr; k = k->outer_) {
    auto begin = reinterpret_cast<uintptr_t>(k->begin_);
    if (k->keeper_ && at >= begin && size <= k->size_ && at - begin <= k->size_ - size) {
      return Buffer(reinterpret_cast<const uint8_t*>(data), size, k->keeper_);
    }
  }
  return Buffer();
}

}  // namespace internal
}  // namespace orrery
