// The limits the object benchmarks compare with (bench/object_bench.cc), measured in the
// same run: a copy into new memory, a raw TCP stream over loopback, and msgpack unpacking of
// 10,000 refs.
#pragma once

#include <orrery/orrery.h>

#include <cstddef>
#include <vector>

namespace orrery::bench {

// Copies `n` bytes from `src` into new memory the way the fastest fresh buffer is filled on
// this host: an anonymous mapping advised to use transparent huge pages, one memcpy (which
// faults it in, the kernel zeroing each page first), then unmapped. No Orrery code runs.
void FreshCopy(const void* src, size_t n);

// Seconds to move `src` into `dst` (as large) over one loopback TCP connection, timed at the
// receiver. Throws std::runtime_error when the stream cannot be set up or ends early.
double RawTcpSeconds(const std::vector<char>& src, std::vector<char>& dst);

// GB/s of a TCP stream of `bytes` over loopback between two threads (send from one
// pre-touched buffer, recv into another): the median of `iterations` streams.
double RawTcpGbps(size_t bytes, int iterations);

// Packs `refs` as a Put would and unpacks the bytes into (id, owner) strings, without the
// runtime: what a Get of a value holding them cannot beat.
void UnpackRefsLimit(const std::vector<ObjectRef<int>>& refs);

}  // namespace orrery::bench
