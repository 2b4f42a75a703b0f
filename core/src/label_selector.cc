// Label selectors: "key": "value" (equality), "in(a,b)" and "!in(a,b)".
#include <sstream>

#include "core/internal/labels.h"

namespace orrery {

namespace {
bool InList(const std::string& list, const std::string& value) {
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b != std::string::npos && item.substr(b, e - b + 1) == value) return true;
  }
  return false;
}
}  // namespace

bool MatchesSelector(const Labels& labels, const Labels& selector) {
  for (const auto& [key, want] : selector) {
    auto it = labels.find(key);
    bool negate = want.rfind("!in(", 0) == 0;
    bool in = negate || want.rfind("in(", 0) == 0;
    if (in && want.back() == ')') {
      std::string list = want.substr(negate ? 4 : 3, want.size() - (negate ? 5 : 4));
      bool member = it != labels.end() && InList(list, it->second);
      if (member == negate) return false;
    } else if (it == labels.end() || it->second != want) {
      return false;
    }
  }
  return true;
}

}  // namespace orrery
