// Which Orrery this is: the project's version and the version of its wire protocol
// (docs/cli.md "Versions"). Processes of one cluster must speak the same protocol version;
// a peer of another is refused with a message naming both.
#pragma once

namespace orrery {

// The project's version, "MAJOR.MINOR.PATCH" (CMake's project(VERSION)).
const char* Version();
// The protocol version of every frame this library sends and takes (docs/protocol.md).
int ProtocolVersion();
// "orrery 0.1.0 (protocol version 3)": what `orrery --version` prints.
const char* VersionLine();

}  // namespace orrery
