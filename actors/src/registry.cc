#include "orrery/api/registry.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <sstream>

#include "core/internal/thread_annotations.h"
#include "orrery/errors.h"

namespace orrery::internal {

namespace {
// Entries are never moved once added (std::map nodes are stable), so FindByName and
// FindNameByKey return pointers that stay valid after the lock is released; only
// UnregisterForTest removes entries.
struct Registry {
  Mutex mu;
  std::map<std::string, FunctionEntry> by_name GUARDED_BY(mu);
  std::map<std::string, std::string> name_by_key GUARDED_BY(mu);
  std::vector<std::string> errors GUARDED_BY(mu);
};
Registry& Get() {
  static Registry* r = new Registry();  // used during static initialization: never destroyed
  return *r;
}
}  // namespace

Status RegisterEntry(FunctionEntry entry, const std::string& key) {
  Registry& r = Get();
  MutexLock lock(&r.mu);
  if (r.by_name.count(entry.name)) {
    std::string msg =
        "the remote function name '" + entry.name + "' is registered twice (ORRERY_REMOTE)";
    r.errors.push_back(msg);
    return Status::InvalidArgument(msg);
  }
  r.name_by_key[key] = entry.name;
  std::string name = entry.name;
  r.by_name.emplace(std::move(name), std::move(entry));
  return Status::Ok();
}

const FunctionEntry* FindByName(const std::string& name) {
  Registry& r = Get();
  MutexLock lock(&r.mu);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : &it->second;
}

const std::string* FindNameByKey(const std::string& key) {
  Registry& r = Get();
  MutexLock lock(&r.mu);
  auto it = r.name_by_key.find(key);
  return it == r.name_by_key.end() ? nullptr : &it->second;
}

std::vector<std::string> RegisteredNames() {
  Registry& r = Get();
  MutexLock lock(&r.mu);
  std::vector<std::string> out;
  for (const auto& [name, e] : r.by_name) out.push_back(name);
  return out;
}

std::vector<std::string> RegistrationErrors() {
  Registry& r = Get();
  MutexLock lock(&r.mu);
  return r.errors;
}

void UnregisterForTest(const std::string& name) {
  Registry& r = Get();
  MutexLock lock(&r.mu);
  r.by_name.erase(name);
  for (auto it = r.name_by_key.begin(); it != r.name_by_key.end();) {
    it = it->second == name ? r.name_by_key.erase(it) : std::next(it);
  }
  for (auto it = r.errors.begin(); it != r.errors.end();) {
    it = it->find("'" + name + "'") != std::string::npos ? r.errors.erase(it) : std::next(it);
  }
}

namespace {
// Best effort: the symbol name of the callable in a key (needs -rdynamic, which
// Orrery::orrery adds to executables that link it).
std::string SymbolOf(const std::string& key) {
  size_t hash = key.find('#');
  if (hash == std::string::npos || key.size() < hash + 1 + sizeof(void*)) return "";
  uintptr_t addr;
  std::memcpy(&addr, key.data() + hash + 1, sizeof(addr));
  // A member function pointer (two words, Itanium ABI) with its low bit set is a virtual
  // one: an offset into the vtable, no address to look up. A plain function's address may be
  // odd (gcc aligns functions only when optimizing).
  bool member = key.size() - hash - 1 == 2 * sizeof(void*);
  if (member && (addr & 1)) return "";
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(addr), &info) || !info.dli_sname) return "";
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : info.dli_sname;
  std::free(demangled);
  return out;
}
}  // namespace

const std::string& NameOfOrThrow(const std::string& key, const char* what) {
  if (const std::string* name = FindNameByKey(key)) return *name;
  std::ostringstream os;
  std::string symbol = SymbolOf(key);
  os << "the " << what << " "
     << (symbol.empty() ? std::string("(unknown symbol)") : "'" + symbol + "'")
     << " is not registered: add it to ORRERY_REMOTE(...). Registered: ";
  auto names = RegisteredNames();
  if (names.empty()) os << "(none)";
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << names[i];
  throw FunctionNotFoundError(os.str());
}

std::vector<std::string> SplitRemoteNames(const char* csv) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream ss(csv ? csv : "");
  while (std::getline(ss, item, ',')) {
    std::string clean;
    for (char c : item)
      if (!std::isspace(static_cast<unsigned char>(c)) && c != '&') clean.push_back(c);
    if (!clean.empty()) out.push_back(clean);
  }
  return out;
}

}  // namespace orrery::internal
