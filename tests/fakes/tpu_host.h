// A host root (for ORRERY_SYSROOT) with four TPU chips: /dev/accel0..3 with vendor 0x1ae0
// (Google's), as docs/accelerators.md "Detection" reads them.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace orrery::testing {

inline void MakeTpuHostRoot(const std::string& root) {
  for (int i = 0; i < 4; ++i) {
    std::filesystem::create_directories(root + "/dev");
    std::ofstream(root + "/dev/accel" + std::to_string(i)).close();
    std::string sys = root + "/sys/class/accel/accel" + std::to_string(i) + "/device";
    std::filesystem::create_directories(sys);
    std::ofstream(sys + "/vendor") << "0x1ae0\n";
  }
}

}  // namespace orrery::testing
