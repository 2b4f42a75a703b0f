// What the parts of the security module (security.cc, security_secrets.cc, security_zap.cc)
// share and nobody else uses.
#pragma once

#include <cstdint>

namespace zmq {
class socket_t;
}  // namespace zmq

namespace orrery::security::internal {

// The ZAP domain every CURVE server socket of the cluster names (ConfigureServer).
constexpr const char* kZapDomain = "orrery";
// The ZAP domain of the same-host channel's server sockets (ConfigureLocalServer).
constexpr const char* kLocalZapDomain = "orrery-local";
// The PLAIN user name of the same-host channel.
constexpr const char* kLocalUser = "orrery";

// Reads one event from a socket monitor's PAIR socket without waiting: its id and value
// (the endpoint frame is read and dropped). False when none is waiting or it is malformed.
bool ReadMonitorEvent(zmq::socket_t& pair, uint16_t* event, uint32_t* value);

}  // namespace orrery::security::internal
