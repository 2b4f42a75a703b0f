// What the submitter tests share: the pieces a submitter is built from, with a recording
// outbox and a real object store (results and failures land there).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "actors/src/arg_resolver.h"
#include "actors/src/head_client.h"
#include "actors/src/object_store.h"
#include "actors/src/submission.h"
#include "orrery/api/object_ref.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::runtime::testing {

using ::orrery::testing::RecordingOutbox;
using ::orrery::testing::SentMessage;

class SubmitterFixture : public ::testing::Test {
 protected:
  SubmitterFixture() : head_(outbox_, "tcp://head"), resolver_(store_, outbox_, self_) {
    self_.address = "tcp://me";
    self_.job = JobId::Random();
    self_.argv = {"/bin/driver"};
    head_.SetReplyTo(self_.address);
  }

  // A call to `function` whose result the store expects and keeps; `arg` is passed by value.
  std::shared_ptr<PendingCall> NewCall(const std::string& function, const std::string& arg = "") {
    auto call = std::make_shared<PendingCall>();
    call->return_id = ObjectId::Random();
    store_.MarkPending(call->return_id);
    store_.AddRef(call->return_id);  // as the caller's ObjectRef does: the result is kept
    call->function = function;
    if (!arg.empty()) call->slots.push_back(internal::ArgSlot{arg, nullptr});
    return call;
  }
  // Adds an argument passed by reference to an object of this process not produced yet.
  ObjectId AddPendingRef(PendingCall& call) {
    ObjectId id = ObjectId::Random();
    store_.MarkPending(id);
    call.slots.push_back(
        internal::ArgSlot{"", std::make_shared<internal::RefHolder>(id, self_.address)});
    return id;
  }
  // The stored error kind of the call's result; "" while it has none (or has a value).
  std::string ErrorKind(const PendingCall& call) {
    auto r = store_.Get(call.return_id, 0);
    if (!r.ok() || !r->error) return "";
    return proto::ErrorKindName(r->error->kind);
  }
  std::string ErrorMessage(const PendingCall& call) {
    auto r = store_.Get(call.return_id, 0);
    return r.ok() && r->error ? r->error->message : "";
  }

  ProcessIdentity self_;
  RecordingOutbox outbox_;
  ObjectStore store_;
  HeadClient head_;
  ArgResolver resolver_;
};

}  // namespace orrery::runtime::testing
