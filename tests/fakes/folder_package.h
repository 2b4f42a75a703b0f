// A working_dir package made by hand (core/internal/folder_pack.h's format): entries
// [path, kind, content] as given, in that order, valid or not. For tests of what a node
// refuses, and for the fuzzer's seeds.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "orrery/api/serialize.h"

namespace orrery::testing {

inline std::string FolderPackage(
    const std::vector<std::tuple<std::string, int, std::string>>& entries) {
  std::string out;
  internal::StringWriter w{out};
  msgpack::packer<internal::StringWriter> pk(w);
  pk.pack_array(uint32_t(entries.size()));
  for (const auto& [path, kind, content] : entries) {
    pk.pack_array(3);
    pk.pack(path);
    pk.pack(kind);
    pk.pack_bin(uint32_t(content.size()));
    pk.pack_bin_body(content.data(), uint32_t(content.size()));
  }
  return out;
}

}  // namespace orrery::testing
