// The libtorch integration (orrery/train/torch.h). The only translation unit of Orrery that
// includes libtorch's headers; it is built into its own library, orrery_train_torch, and
// only when libtorch was found (train/CMakeLists.txt).
#include "orrery/train/torch.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "core/internal/log.h"
#include "core/internal/thread_annotations.h"
#include "orrery/api/runtime_context.h"
#include "orrery/errors.h"

namespace orrery::train_torch {

namespace {

// A short message for an exception from libtorch (c10::Error's what() carries a backtrace).
std::string Describe(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

// A rendezvous variable from the context (what the backend set), else from the process.
std::string EnvOf(const Context& ctx, const std::string& name) {
  const auto& env = ctx.Environment();
  if (auto it = env.find(name); it != env.end() && !it->second.empty()) return it->second;
  const char* v = std::getenv(name.c_str());
  return v ? v : "";
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string ResolveBackend(const Context& ctx, const ProcessGroupOptions& options) {
  if (options.backend == "gloo") return "gloo";
  if (options.backend == "nccl") {
#ifdef USE_C10D_NCCL
    return "nccl";
#else
    throw ConfigError(
        "ProcessGroup: backend nccl asked for, but this libtorch was built without CUDA/NCCL "
        "(Debian's libtorch-dev is CPU-only); use gloo");
#endif
  }
  if (!options.backend.empty()) {
    throw ConfigError("ProcessGroup: unknown backend '" + options.backend + "' (gloo or nccl)");
  }
#ifdef USE_C10D_NCCL
  if (StartsWith(ctx.Device(), "cuda")) return "nccl";
#endif
  return "gloo";
}

// The Gloo transport device: the interface GLOO_SOCKET_IFNAME names, else this worker's node
// address (what Orrery's own traffic uses), else whatever the hostname resolves to.
std::shared_ptr<::gloo::transport::Device> GlooDevice() {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  std::string ip = GetRuntimeContext().node_ip;
  if (!ip.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(ip);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::ProcessGroup> Create(const std::string& backend, const std::string& addr,
                                              uint16_t port, int rank, int size,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = port;
  store_options.isServer = rank == 0;
  store_options.numWorkers = size_t(size);
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(addr, store_options);
#ifdef USE_C10D_NCCL
  if (backend == "nccl") {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  }
#endif
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(GlooDevice());
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

void Wait(const c10::intrusive_ptr<c10d::Work>& work) {
  if (!work->wait()) throw TrainingFailedError("c10d collective did not complete");
}

}  // namespace

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroup(const Context& ctx,
                                                    const ProcessGroupOptions& options) {
  const std::string backend = ResolveBackend(ctx, options);
  const std::string addr = EnvOf(ctx, "MASTER_ADDR"), port_text = EnvOf(ctx, "MASTER_PORT");
  if (addr.empty() || port_text.empty()) {
    throw ConfigError(
        "ProcessGroup: MASTER_ADDR and MASTER_PORT are not set; call it from a training loop "
        "that TorchTrainer runs (gloo or nccl backend)");
  }
  int port = 0;
  try {
    port = std::stoi(port_text);
  } catch (const std::exception&) {
  }
  if (port <= 0 || port > 65535)
    throw ConfigError("ProcessGroup: MASTER_PORT=" + port_text + " is not a port");
  const int rank = ctx.WorldRank(), size = ctx.WorldSize();
  const std::string where = addr + ":" + port_text;
  const std::string key =
      backend + " " + where + " " + std::to_string(rank) + "/" + std::to_string(size);

  // Never destroyed: a group's destructor joins threads that may wait on dead peers.
  static auto* mu = new Mutex;
  static auto* groups PT_GUARDED_BY(*mu) =
      new std::map<std::string, c10::intrusive_ptr<c10d::ProcessGroup>>;
  MutexLock lock(mu);
  if (auto it = groups->find(key); it != groups->end()) return it->second;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  try {
    pg = Create(backend, addr, uint16_t(port), rank, size, options.timeout);
  } catch (const std::exception& e) {
    throw TrainingFailedError("c10d " + backend + " rendezvous at " + where + " failed (rank " +
                              std::to_string(rank) + " of " + std::to_string(size) +
                              "): " + Describe(e));
  }
  LOG_INFO("c10d " + backend + " process group ready: rank " + std::to_string(rank) + " of " +
           std::to_string(size) + ", store " + where);
  groups->emplace(key, pg);
  return pg;
}

c10::Device TorchDevice(const Context& ctx) {
  const std::string& name = ctx.Device();
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "cuda" || StartsWith(name, "cuda:")) {
    int index = 0;
    if (name.size() > 5) {
      try {
        index = std::stoi(name.substr(5));
      } catch (const std::exception&) {
        throw ConfigError("TorchDevice: malformed device name '" + name + "'");
      }
    }
    if (!::torch::cuda::is_available()) {
      throw AcceleratorNotAvailableError(
          "TorchDevice: the worker's device is " + name +
          " but this libtorch has no usable CUDA (Debian's libtorch-dev is CPU-only)");
    }
    if (index < 0 || size_t(index) >= ::torch::cuda::device_count()) {
      throw AcceleratorNotAvailableError(
          "TorchDevice: " + name + " is not visible (CUDA_VISIBLE_DEVICES shows " +
          std::to_string(::torch::cuda::device_count()) + " devices)");
    }
    return c10::Device(c10::kCUDA, c10::DeviceIndex(index));
  }
  if (StartsWith(name, "xla")) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      LOG_WARN("TorchDevice: " + name +
               " has no libtorch device (torch_xla is Python-only); tensors stay on the CPU");
    });
    return c10::Device(c10::kCPU);
  }
  throw ConfigError("TorchDevice: unknown device '" + name + "' (cpu, cuda:N or xla:N)");
}

void BroadcastParameters(::torch::nn::Module& module, c10d::ProcessGroup& pg, int root) {
  ::torch::NoGradGuard no_grad;
  c10d::BroadcastOptions options;
  options.rootRank = root;
  std::vector<at::Tensor> tensors = module.parameters(/*recurse=*/true);
  for (auto& b : module.buffers(/*recurse=*/true)) tensors.push_back(b);
  for (auto& t : tensors) {
    std::vector<at::Tensor> one{t.is_contiguous() ? t : t.contiguous()};
    Wait(pg.broadcast(one, options));
    if (!one[0].is_same(t)) t.copy_(one[0]);
  }
}

void AllReduceGradients(::torch::nn::Module& module, c10d::ProcessGroup& pg) {
  ::torch::NoGradGuard no_grad;
  // Buckets by (dtype, device), in an order every rank computes alike.
  std::map<std::pair<int, std::string>, std::vector<at::Tensor>> buckets;
  for (auto& p : module.parameters(/*recurse=*/true)) {
    if (!p.requires_grad()) continue;
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    if (p.grad().is_sparse()) throw Error("AllReduceGradients: sparse gradients are not supported");
    buckets[{int(p.scalar_type()), p.device().str()}].push_back(p.grad());
  }
  const double size = double(pg.getSize());
  for (auto& [type, grads] : buckets) {
    std::vector<at::Tensor> flat_parts;
    flat_parts.reserve(grads.size());
    for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
    std::vector<at::Tensor> flat{at::cat(flat_parts)};
    Wait(pg.allreduce(flat));  // SUM: Gloo has no AVG
    flat[0].div_(size);
    int64_t offset = 0;
    for (auto& g : grads) {
      g.copy_(flat[0].narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
}

}  // namespace orrery::train_torch
