// libtorch integration of Orrery Train (docs/train.md "libtorch"): a ready c10d process group
// for the training loop, the worker's tensor device, and data-parallel helpers.
//
//   #include <torch/torch.h>
//   #include "orrery/train/torch.h"
//
//   void TrainLoop(orrery::train::Context& ctx) {
//     namespace ot = orrery::train_torch;
//     auto pg = ot::ProcessGroup(ctx);              // Gloo on CPU, NCCL on CUDA
//     torch::Device device = ot::TorchDevice(ctx);  // cpu, cuda:N
//     MyNet net; net->to(device);
//     ot::BroadcastParameters(*net, *pg);           // every rank starts from rank 0's weights
//     for (...) {
//       optimizer.zero_grad(); loss.backward();
//       ot::AllReduceGradients(*net, *pg);          // mean gradient over the group
//       optimizer.step();
//     }
//   }
//
// Only in builds with libtorch (ORRERY_WITH_TORCH=AUTO|ON and Debian's libtorch-dev and
// libgloo-dev installed): link Orrery::train_torch, which brings libtorch's include
// directories and libraries and the definition USE_C10D_GLOO. Other Orrery headers never
// include libtorch.
//
// The namespace is orrery::train_torch (not orrery::train::torch), so `torch::` keeps
// meaning libtorch in code that says `using namespace orrery::train;`.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "orrery/train/context.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace orrery::train_torch {

using train::Context;

struct ProcessGroupOptions {
  // "gloo", "nccl" or empty: NCCL when Device() is "cuda:N" (this libtorch must have been
  // built with CUDA and NCCL), Gloo otherwise ("cpu", and "xla:0", see TorchDevice()).
  std::string backend;
  // Rendezvous (every rank must reach the store within it) and collective timeout. The
  // trainer's TorchConfig::timeout_s is not visible to the loop; pass the same value here
  // when you changed it. 1800 s is both TorchConfig's and c10d's default.
  std::chrono::milliseconds timeout = std::chrono::seconds(1800);
};

// The c10d process group of the loop's worker group: rank ctx.WorldRank(), size
// ctx.WorldSize(). Built on the first call from the rendezvous the trainer's backend
// exported (MASTER_ADDR, MASTER_PORT from ctx.Environment(), else the process environment):
// rank 0 hosts a c10d::TCPStore at MASTER_ADDR:MASTER_PORT, the other ranks connect to it.
// Every rank of the group must call it (the first call is itself a collective and blocks
// until all ranks have arrived or the timeout passes). Later calls with the same rendezvous
// and backend return the same group, so the loop may call it where it needs it; the group
// lives until the process exits (it is never destroyed, so exiting never waits on a peer).
// Gloo binds to this worker's node address (GLOO_SOCKET_IFNAME, when set, names the network
// interface instead).
// Thread-safe; concurrent first calls are serialized.
// Throws orrery::ConfigError when the rendezvous variables are missing or the backend is
// not built in, orrery::TrainingFailedError when the rendezvous fails or times out.
c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroup(const Context& ctx,
                                                    const ProcessGroupOptions& options = {});

// The torch device the worker's tensors belong on: "cpu" -> kCPU, "cuda:N" -> (kCUDA, N).
// "xla:0" -> kCPU: there is no torch_xla for C++, so a libtorch loop on a TPU host computes
// on the host CPU (a warning is logged once). Throws orrery::AcceleratorNotAvailableError
// for "cuda:N" when this libtorch has no usable CUDA, orrery::ConfigError for a device name
// it does not know.
c10::Device TorchDevice(const Context& ctx);

// Gives every rank root's parameters and buffers (in place, in registration order). Call
// it once after building the model so that all ranks start from the same weights.
// Collective: every rank calls it with the same architecture.
void BroadcastParameters(::torch::nn::Module& module, c10d::ProcessGroup& pg, int root = 0);

// Replaces each parameter's gradient by its mean over the group (sum, then divide by the
// group size), flattening the gradients of one dtype and device into a single buffer so a
// step costs one allreduce per dtype. Parameters that require a gradient but have none
// yet get a zero gradient first, so every rank sends the same layout. Collective: call it
// on every rank after backward() and before the optimizer step.
void AllReduceGradients(::torch::nn::Module& module, c10d::ProcessGroup& pg);

}  // namespace orrery::train_torch
