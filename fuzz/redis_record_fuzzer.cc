// libFuzzer target: a record as the head reads it back from Redis when it restarts
// (scheduler/src/records.h). Redis is input like any peer: whoever can write to it can put
// any bytes in a hash field. The first byte picks the table (nodes, actors, placement groups,
// jobs, leases), the rest is the field's value. Parsing must never crash, throw or hang; a
// record it accepts must survive a write and a second read (what the head writes it can
// read back).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "scheduler/src/records.h"

namespace {

namespace records = orrery::scheduler::records;

template <typename Parse, typename Write>
void RoundTrip(std::string_view text, Parse parse, Write write) {
  auto first = parse(text);
  if (!first.ok()) return;
  std::string again = write(first.value());
  if (!parse(again).ok()) std::abort();  // the head could not read what it wrote
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      RoundTrip(text, records::ParseNodeRecord, records::NodeRecordJson);
      break;
    case 1:
      RoundTrip(text, records::ParseActorRecord, records::ActorRecordJson);
      break;
    case 2:
      RoundTrip(text, records::ParsePgRecord, records::PgRecordJson);
      break;
    case 3:
      RoundTrip(text, records::ParseJobRecord, records::JobRecordJson);
      break;
    case 4:
      RoundTrip(text, records::ParseLeaseRecord, records::LeaseRecordJson);
      break;
  }
  return 0;
}
