// ObjectRef<T>: a future for a value produced by a task, an actor method or Put.
#pragma once

#include <memory>
#include <string>

#include "orrery/api/serialize.h"
#include "orrery/ids.h"

namespace orrery {

namespace internal {
// Keeps the referenced object alive in the owner's store while any copy of the ref lives; in
// a process other than the owner, it registers this process as a borrower with the owner
// while any copy lives (docs/objects.md "Lifetime").
class RefHolder : public std::enable_shared_from_this<RefHolder> {
 public:
  RefHolder(ObjectId id, std::string owner);
  ~RefHolder();
  RefHolder(const RefHolder&) = delete;
  RefHolder& operator=(const RefHolder&) = delete;
  const ObjectId& id() const { return id_; }
  const std::string& owner() const { return owner_; }
  // The ref is being packed inside a value: the value's holder keeps the object alive (a
  // ScopedRefCollector active on this thread collects the ref), or else the object is kept
  // for as long as this process lives.
  void Share() const;

 private:
  ObjectId id_;
  std::string owner_;  // address of the process that owns the value
};

std::shared_ptr<RefHolder> MakeRef(const ObjectId& id, const std::string& owner);
}  // namespace internal

template <typename T>
class ObjectRef {
 public:
  ObjectRef() = default;
  explicit ObjectRef(std::shared_ptr<internal::RefHolder> holder) : holder_(std::move(holder)) {}

  const ObjectId& ID() const { return holder_->id(); }
  const std::string& Owner() const { return holder_->owner(); }
  bool IsNull() const { return !holder_; }
  const std::shared_ptr<internal::RefHolder>& Holder() const { return holder_; }

  // Blocks until the value is ready. Throws what the producer threw (RemoteError, ...).
  auto Get() const;
  // As Get(), but throws GetTimeoutError after timeout_ms (-1: forever).
  auto Get(int timeout_ms) const;

  bool operator==(const ObjectRef& o) const { return ID() == o.ID(); }

  // Serializable: a ref passed inside a value stays a ref; the receiver fetches the value
  // from its owner.
  template <typename Packer>
  void msgpack_pack(Packer& pk) const {
    if (holder_) holder_->Share();
    pk.pack_array(2);
    pk.pack(holder_ ? holder_->id().Binary() : std::string());
    pk.pack(holder_ ? holder_->owner() : std::string());
  }
  void msgpack_unpack(const msgpack::object& o) {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
    auto id = o.via.array.ptr[0].as<std::string>();
    auto owner = o.via.array.ptr[1].as<std::string>();
    holder_ = id.empty() ? nullptr : internal::MakeRef(ObjectId(UniqueId::FromBinary(id)), owner);
  }

 private:
  std::shared_ptr<internal::RefHolder> holder_;
};

template <typename T>
struct IsObjectRef : std::false_type {};
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {};

}  // namespace orrery
