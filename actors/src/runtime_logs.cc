// Workers' output printed by their driver (runtime.h; docs/logs.md): each line with its
// source, as "(Counter pid=4242, node=ab12cd) text", on stdout or stderr as it was written.
#include <cstdio>

#include "actors/internal/runtime.h"
#include "core/internal/text.h"

namespace orrery::runtime {

void Runtime::PrintLogs(const proto::LogBatchMsg& batch) const {
  if (!config_.log_to_driver) return;
  // The head checked these, but this process trusts no peer: escaped again, bounded.
  std::string node = text::EscapeControl(batch.node_id.substr(0, 6));
  for (const auto& g : batch.groups) {
    std::string prefix = "(" + text::EscapeControl(g.name.substr(0, 128)) +
                         " pid=" + std::to_string(g.pid) + ", node=" + node + ") ";
    std::string out;
    for (const auto& line : g.lines) out += prefix + text::EscapeControl(line) + "\n";
    FILE* f = g.is_stderr ? stderr : stdout;
    std::fwrite(out.data(), 1, out.size(), f);
    std::fflush(f);
  }
}

}  // namespace orrery::runtime
