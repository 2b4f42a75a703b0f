// Checks of the host a process publishes for its peers to dial (--advertise-address,
// ORRERY_ADVERTISE_ADDRESS; docs/cli.md "Advertised addresses").
#pragma once

#include <string_view>

#include "orrery/status.h"

namespace orrery::text {

// OK for a dotted IPv4 address other than 0.0.0.0, or a DNS name (labels of letters, digits
// and '-', 1 to 63 bytes, none starting or ending with '-'; 253 bytes in all).
// InvalidArgument saying why otherwise, the value escaped; an IPv6 address is refused
// because the daemons' ZeroMQ sockets speak IPv4 only.
Status CheckAdvertisedHost(std::string_view host);

}  // namespace orrery::text
