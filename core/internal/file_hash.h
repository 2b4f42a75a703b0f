// Content hashes of executables (the driver's program, shipped to nodes that lack it).
#pragma once

#include <string>

namespace orrery {

// SHA-256 of a file's content / of bytes, as 64 lowercase hex characters (the name an
// executable has on the wire, in the head's store and in a node's cache). HashFile is empty
// when the file cannot be read.
std::string HashFile(const std::string& path);
std::string HashBytes(const std::string& bytes);

// Whether `hash` is a well-formed executable hash: exactly 64 lowercase hex characters.
// Every hash from a peer or from the state store is checked with this before it names a
// file or is compared.
bool IsContentHash(const std::string& hash);

// The machine architecture this process runs on ("x86_64", "aarch64"); ORRERY_ARCH
// overrides it (a node can declare itself for tests).
std::string MachineArch();

}  // namespace orrery
