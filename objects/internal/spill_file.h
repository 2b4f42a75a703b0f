// Spill files: an object the node's store had no room for, kept as <spill dir>/<id hex>
// (docs/architecture.md, "Object store (shared memory and spilling)"). Written by the node
// (NodeObjects), read back by the node, its object server and the processes of its host
// (ObjectClient) when the store has no room to restore the object into.
//
// A spill file is untrusted when read back: it must be a regular file (not a link) of exactly
// the size written, read in full. A file at the final path is always complete: it is written
// under another name and renamed into place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "orrery/status.h"

namespace orrery::objects {

// Writes [data, data + size) to `path` (via `path`.partial, renamed). Unavailable, naming the
// file and errno (e.g. "No space left on device"), when it cannot; nothing is left behind.
Status WriteSpillFile(const std::string& path, const char* data, uint64_t size);

// Opens `path` for reading after checking that it is what was written: a regular file of
// `size` bytes. Returns the descriptor (the caller closes it). NotFound when the file is
// missing; Internal naming why otherwise ("size 5, written 7", "not a regular file").
Result<int> OpenSpillFile(const std::string& path, uint64_t size);

// Reads exactly `size` bytes of `fd` into `out`; Internal naming why when it cannot (an
// error, or the file ended early: truncated since it was opened).
Status ReadSpillBytes(int fd, char* out, uint64_t size);

// OpenSpillFile and ReadSpillBytes into a new buffer of `size` bytes.
Result<std::shared_ptr<std::string>> ReadSpillFile(const std::string& path, uint64_t size);

}  // namespace orrery::objects
