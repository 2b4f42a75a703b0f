// Content hashes of files (the driver's executable, shipped to nodes that lack it).
#pragma once

#include <string>

namespace orrery {

// 32 hex characters: two independent 64-bit FNV-1a hashes of the content, plus the size
// folded in. Empty when the file cannot be read. Not cryptographic: it names content.
std::string HashFile(const std::string& path);
std::string HashBytes(const std::string& bytes);

// The machine architecture this process runs on ("x86_64", "aarch64"); ORRERY_ARCH
// overrides it (a node can declare itself for tests).
std::string MachineArch();

}  // namespace orrery
