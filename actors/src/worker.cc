#include "actors/src/worker.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>

#include "actors/src/errors_util.h"
#include "actors/src/executor.h"
#include "actors/src/runtime.h"
#include "core/src/log.h"
#include "orrery/api/registry.h"
#include "orrery/errors.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {

class WorkerServer {
 public:
  WorkerServer(Runtime* rt, std::string worker_id, std::string node_address)
      : rt_(rt), worker_id_(std::move(worker_id)), node_address_(std::move(node_address)) {
    where_ = "worker pid " + std::to_string(getpid());
  }

  // On the runtime's inbox thread.
  bool Handle(transport::Envelope& env) {
    switch (env.type) {
      case MsgType::kAssign: {
        proto::AssignMsg m;
        Status s = env.Decode(&m);
        if (!s.ok()) throw std::runtime_error(s.message());
        OnAssign(m);
        return true;
      }
      case MsgType::kCall: {
        auto call = std::make_shared<proto::CallMsg>();
        Status s = env.Decode(call.get());
        if (!s.ok()) throw std::runtime_error(s.message());
        auto payload = std::make_shared<std::string>(env.PayloadString());
        OnCall(std::move(call), std::move(payload));
        return true;
      }
      case MsgType::kExit: {
        RequestExit();
        return true;
      }
      default:
        return false;
    }
  }

  void WaitForExit() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return exit_; });
  }

 private:
  void RequestExit() {
    std::lock_guard<std::mutex> lock(mu_);
    exit_ = true;
    cv_.notify_all();
  }

  void OnAssign(const proto::AssignMsg& m) {
    if (executor_) return;  // assigned already
    where_ += " on node " + UniqueId::FromBinary(m.node_id).Hex().substr(0, 8);
    if (!m.is_actor) {
      executor_ = std::make_unique<Executor>(1);
      transport::Send(node_address_, MsgType::kAssignReply, proto::AssignReplyMsg{worker_id_, "", true, "", "", ""});
      return;
    }
    const auto& spec = m.actor.spec;
    actor_id_ = spec.actor_id;
    executor_ = std::make_unique<Executor>(spec.options.max_concurrency);
    log::SetProcessTag("worker " + std::to_string(getpid()) + " " + spec.factory);
    executor_->Submit([this, spec] {
      proto::AssignReplyMsg reply{worker_id_, spec.actor_id, true, "", "", ""};
      const internal::FunctionEntry* e = internal::FindByName(spec.factory);
      if (!e || e->kind != internal::FunctionKind::kFactory) {
        reply.ok = false;
        reply.error_kind = "FunctionNotFoundError";
        reply.message = "actor factory '" + spec.factory + "' is not registered in this executable";
      } else {
        try {
          msgpack::object_handle oh = msgpack::unpack(spec.args.data(), spec.args.size());
          void* instance = nullptr;
          e->invoke(nullptr, oh.get(), &instance);
          instance_ = instance;
          deleter_ = e->deleter;
        } catch (const std::exception& ex) {
          reply.ok = false;
          reply.error_kind = "RemoteError";
          reply.error_type = CurrentExceptionType(&ex);
          reply.message = ex.what();
        } catch (...) {
          reply.ok = false;
          reply.error_kind = "RemoteError";
          reply.error_type = CurrentExceptionType(nullptr);
          reply.message = "a non-standard exception";
        }
      }
      ready_ = reply.ok;
      transport::Send(node_address_, MsgType::kAssignReply, reply);
    });
  }

  void OnCall(std::shared_ptr<proto::CallMsg> call, std::shared_ptr<std::string> payload) {
    if (!executor_) {
      Reply(*call, false, "Error", "", "this worker has no assignment yet", nullptr);
      return;
    }
    if (call->actor_id.empty()) {
      executor_->Submit([this, call, payload] { Execute(*call, *payload); });
      return;
    }
    if (call->actor_id != actor_id_) {
      Reply(*call, false, "ActorDiedError", "", "this worker does not host that actor", nullptr);
      return;
    }
    // Start calls of one caller in sequence order.
    auto& order = order_[call->reply_to];
    if (call->seq < order.next) {
      Reply(*call, false, "Error", "", "duplicate call sequence number", nullptr);
      return;
    }
    order.waiting.emplace(call->seq, std::make_pair(call, payload));
    while (!order.waiting.empty() && order.waiting.begin()->first == order.next) {
      auto [c, p] = order.waiting.begin()->second;
      order.waiting.erase(order.waiting.begin());
      ++order.next;
      executor_->Submit([this, c = c, p = p] { Execute(*c, *p); });
    }
  }

  void Reply(const proto::CallMsg& call, bool ok, const std::string& kind, const std::string& type,
             const std::string& message, const std::string* result) {
    proto::ReplyMsg r;
    r.object_id = call.object_id;
    r.ok = ok;
    r.error_kind = kind;
    r.error_type = type;
    r.message = message;
    r.function = call.function;
    r.where = where_;
    r.actor_id = call.actor_id;
    r.seq = call.seq;
    r.lease_id = call.lease_id;
    static const std::string kEmpty;
    transport::Send(call.reply_to, MsgType::kCallReply, r, result ? result : &kEmpty);
  }

  // On an executor thread.
  void Execute(const proto::CallMsg& call, const std::string& args) {
    const internal::FunctionEntry* e = internal::FindByName(call.function);
    bool is_actor = !call.actor_id.empty();
    if (!e) {
      Reply(call, false, "FunctionNotFoundError", "",
            "'" + call.function + "' is not registered in the worker's executable", nullptr);
      return;
    }
    if (is_actor ? e->kind != internal::FunctionKind::kMethod : e->kind != internal::FunctionKind::kFunction) {
      Reply(call, false, "FunctionNotFoundError", "",
            "'" + call.function + "' is not " + (is_actor ? "an actor method" : "a remote function"), nullptr);
      return;
    }
    if (is_actor && !ready_) {
      Reply(call, false, "ActorDiedError", "", "the actor was not created", nullptr);
      return;
    }
    try {
      msgpack::object_handle oh = msgpack::unpack(args.data(), args.size());
      std::string result = e->invoke(instance_, oh.get(), nullptr);
      Reply(call, true, "", "", "", &result);
    } catch (const internal::ConvertError& ex) {
      Reply(call, false, "RemoteError", "orrery::ArgumentError", ex.what(), nullptr);
    } catch (const std::exception& ex) {
      Reply(call, false, "RemoteError", CurrentExceptionType(&ex), ex.what(), nullptr);
    } catch (...) {
      Reply(call, false, "RemoteError", CurrentExceptionType(nullptr), "a non-standard exception", nullptr);
    }
  }

  struct CallerOrder {
    uint64_t next = 0;
    std::map<uint64_t, std::pair<std::shared_ptr<proto::CallMsg>, std::shared_ptr<std::string>>> waiting;
  };

  Runtime* rt_;
  std::string worker_id_;
  std::string node_address_;
  std::string where_;
  std::string actor_id_;
  std::unique_ptr<Executor> executor_;
  void* instance_ = nullptr;
  internal::Deleter deleter_ = nullptr;
  std::atomic<bool> ready_{false};
  std::map<std::string, CallerOrder> order_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool exit_ = false;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

void WorkerMain() {
  std::string worker_id = Env("ORRERY_WORKER_ID");
  std::string node = Env("ORRERY_NODE_ADDRESS");
  std::string head = Env("ORRERY_HEAD_ADDRESS");
  unsetenv("ORRERY_ROLE");
  unsetenv("ORRERY_ZYGOTE_FD");
  Config config;
  try {
    config = ApplyEnvironment(Config{});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orrery worker: bad configuration: %s\n", e.what());
    _exit(2);
  }
  log::SetLevel(config.log_level.empty() ? "warn" : config.log_level);
  log::SetProcessTag("worker " + std::to_string(getpid()));
  ObjectStore::SetBlockHooks(&Executor::BeforeBlock, &Executor::AfterBlock);
  // Leaked on purpose: the process ends with _exit, never by unwinding.
  auto* rt = new Runtime(config, head, JobId(), "worker pid " + std::to_string(getpid()));
  auto* server = new WorkerServer(rt, worker_id, node);
  rt->SetExtraHandler([server](transport::Envelope& env) { return server->Handle(env); });
  Status s = rt->Start(config.node_ip.empty() ? "127.0.0.1" : config.node_ip);
  if (!s.ok()) {
    std::fprintf(stderr, "orrery worker: %s\n", s.message().c_str());
    _exit(2);
  }
  SetCurrent(rt);
  transport::Send(node, MsgType::kWorkerRegister, proto::WorkerRegisterMsg{worker_id, rt->address(), int(getpid())});
  server->WaitForExit();
  std::fflush(nullptr);
  _exit(0);
}

}  // namespace orrery::runtime
