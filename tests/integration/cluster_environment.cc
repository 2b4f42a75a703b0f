// Registers the shared embedded cluster (Init once, Shutdown at exit) for the integration
// binaries that link this file. The lifecycle binary does not: it tests Init itself.
#include "test_support.h"

namespace {
[[maybe_unused]] ::testing::Environment* const kCluster =
    ::testing::AddGlobalTestEnvironment(new orrery_test::ClusterEnvironment());
}  // namespace
