// libFuzzer target: a runtime env's working_dir package as a node unpacks it after fetching
// it from the head (core/internal/folder_pack.h). Any bytes may arrive; unpacking must never
// crash, hang or write outside its destination. Each input is unpacked into dest/ inside a
// scratch folder nested two deep; afterwards nothing but dest/ may exist there, and nothing
// at all when the package was refused.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/internal/folder_pack.h"

namespace {

namespace fs = std::filesystem;

const std::string& Scratch() {
  static const std::string root = [] {
    char tmpl[] = "/tmp/orrery-fuzz-pack-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    fs::create_directories(std::string(tmpl) + "/outer/inner");
    return std::string(tmpl);
  }();
  return root;
}

size_t Entries(const fs::path& dir) {
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& root = Scratch();
  fs::path inner = root + "/outer/inner", dest = inner / "dest";
  orrery::Status s = orrery::folder_pack::Unpack(
      std::string_view(reinterpret_cast<const char*>(data), size), dest.string());
  // Written outside dest/: beside it, or above it.
  if (Entries(root) != 1 || Entries(root + "/outer") != 1) std::abort();
  if (Entries(inner) != (s.ok() ? 1u : 0u)) std::abort();
  if (s.ok() && !fs::is_directory(fs::symlink_status(dest))) std::abort();
  std::error_code ec;
  fs::remove_all(dest, ec);
  return 0;
}
