// The whole wire protocol (docs/protocol.md): framing and the message-type table
// (protocol_wire.h) and every service's messages. Code that speaks one service may include
// just that service's header.
#pragma once

#include "core/internal/protocol_autoscaler.h"
#include "core/internal/protocol_calls.h"
#include "core/internal/protocol_head.h"
#include "core/internal/protocol_node.h"
#include "core/internal/protocol_objects.h"
#include "core/internal/protocol_ops.h"
#include "core/internal/protocol_wire.h"
#include "core/internal/protocol_worker.h"
