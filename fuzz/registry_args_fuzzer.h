// Shared by registry_args_fuzzer.cc and make_corpus.cc: the functions the target registers,
// in the order byte 0 of an input picks them, and the struct one of them takes.
#pragma once

#include <array>
#include <string>

#include "orrery/api/serialize.h"

namespace fuzz {

struct Point {
  int x = 0;
  double y = 0;
  std::string label;
  MSGPACK_DEFINE(x, y, label);
};

// Registered names (ORRERY_REMOTE strips '&' and spaces). Byte 0 of an input, modulo the
// count, picks one; append only, so that committed seeds keep their meaning.
inline constexpr std::array<const char*, 14> kEntryNames = {
    "fuzz::Add",
    "fuzz::Widen",
    "fuzz::Not",
    "fuzz::Mean",
    "fuzz::Concat",
    "fuzz::CountNested",
    "fuzz::Mirror",
    "fuzz::Swap",
    "fuzz::Grid",
    "fuzz::Sink",
    "fuzz::Account::Create",
    "fuzz::Account::Deposit",
    "fuzz::Account::Rename",
    "fuzz::Account::Points",
};

}  // namespace fuzz
