// nccl_smoke: a c10d process group of world size 1 on this host's libtorch, and one
// all-reduce through it. With CUDA (USE_C10D_NCCL) it is ProcessGroupNCCL on a CUDA tensor;
// a libtorch without CUDA gets ProcessGroupGloo on a CPU tensor (USE_C10D_GLOO), so the
// program also builds and runs where there is no GPU. The rendezvous is a FileStore, so
// nothing listens on any port.
//
//   nccl_smoke [store file]      # prints the backend, the device and the all-reduced values
//
// Exits 0 when the all-reduce gave the expected values, 1 otherwise, 77 with no backend.
#include <ATen/ATen.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <vector>

#if defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#elif defined(USE_C10D_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace {

// One all-reduce of [0, 1, 2, 3] on `device`: a world of one sums to the same values.
template <typename Group>
int AllReduceOnce(Group& group, const char* backend, at::Device device) {
  std::vector<at::Tensor> tensors = {
      at::arange(4, at::TensorOptions().dtype(at::kFloat).device(device))};
  group.allreduce(tensors)->wait();
  at::Tensor result = tensors[0].cpu();
  bool ok = result.equal(at::arange(4, at::kFloat));
  std::printf("nccl_smoke: %s all-reduce on %s, world size 1: [", backend, device.str().c_str());
  for (int i = 0; i < result.numel(); ++i)
    std::printf("%s%g", i ? ", " : "", result[i].item<float>());
  std::printf("] %s\n", ok ? "as expected" : "NOT the expected [0, 1, 2, 3]");
  return ok ? 0 : 1;
}

int Run(const std::string& path) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, /*numWorkers=*/1);
#if defined(USE_C10D_NCCL)
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, /*rank=*/0, /*size=*/1);
  return AllReduceOnce(*group, "nccl", at::Device(at::kCUDA, 0));
#elif defined(USE_C10D_GLOO)
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, /*rank=*/0, /*size=*/1, options);
  return AllReduceOnce(*group, "gloo", at::Device(at::kCPU));
#else
  (void)store;
  std::printf("nccl_smoke: this libtorch has neither NCCL nor Gloo\n");
  return 77;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "/tmp/nccl_smoke_store_" + std::to_string(getpid());
  unlink(path.c_str());
  int status = 1;
  try {
    status = Run(path);
  } catch (const std::exception& e) {
    std::printf("nccl_smoke: failed: %s\n", e.what());
  }
  unlink(path.c_str());
  return status;
}
