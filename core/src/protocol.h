// The whole wire protocol (docs/protocol.md): framing and the message-type table
// (protocol_wire.h) and every service's messages. Code that speaks one service may include
// just that service's header.
#pragma once

#include "core/src/protocol_autoscaler.h"
#include "core/src/protocol_calls.h"
#include "core/src/protocol_head.h"
#include "core/src/protocol_node.h"
#include "core/src/protocol_objects.h"
#include "core/src/protocol_ops.h"
#include "core/src/protocol_wire.h"
#include "core/src/protocol_worker.h"
