// A minimal synchronous hiredis client for the cluster tests: reads what the head wrote.
// It authenticates with the password in $ORRERY_REDIS_PASSWORD_FILE (the cluster fixture's),
// as every client of the cluster's Redis must.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace orrery_cluster {

class Redis {
 public:
  explicit Redis(int port) : Redis(port, PasswordFromEnvironment()) {}
  // `password` "": no AUTH (what a stranger does).
  Redis(int port, const std::string& password) {
    timeval tv{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (ok() && !password.empty()) {
      auto* r =
          static_cast<redisReply*>(redisCommand(c_, "AUTH %b", password.data(), password.size()));
      // A Redis without a password (one a test started itself) answers an error: keep going.
      if (r) {
        if (r->type == REDIS_REPLY_ERROR) auth_error_.assign(r->str, r->len);
        freeReplyObject(r);
      }
    }
  }
  // "host:port"
  explicit Redis(const std::string& address)
      : Redis(std::atoi(address.c_str() + address.rfind(':') + 1)) {}
  ~Redis() {
    if (c_) redisFree(c_);
  }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  bool ok() const { return c_ && !c_->err; }
  // Redis's answer to AUTH when it refused it ("" when it accepted it or none was sent).
  const std::string& auth_error() const { return auth_error_; }
  // The reply to `argv` as Redis's error text ("" when it was not an error).
  std::string Error(const std::vector<std::string>& argv) {
    redisReply* r = Command(argv);
    std::string out = r && r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
    if (r) freeReplyObject(r);
    return out;
  }

  // The first line of the file $ORRERY_REDIS_PASSWORD_FILE names, "" when unset.
  static std::string PasswordFromEnvironment() {
    const char* file = std::getenv("ORRERY_REDIS_PASSWORD_FILE");
    if (!file || !*file) return "";
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line;
  }
  redisContext* raw() { return c_; }

  // The reply as strings: an array's elements, or a single string/status.
  std::vector<std::string> Strings(const std::vector<std::string>& argv) {
    std::vector<std::string> out;
    redisReply* r = Command(argv);
    if (!r) return out;
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i)
        out.emplace_back(r->element[i]->str, r->element[i]->len);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
      out.emplace_back(r->str, r->len);
    }
    freeReplyObject(r);
    return out;
  }
  std::string HGet(const std::string& key, const std::string& field) {
    auto v = Strings({"HGET", key, field});
    return v.empty() ? "" : v[0];
  }
  std::map<std::string, std::string> HGetAll(const std::string& key) {
    auto flat = Strings({"HGETALL", key});
    std::map<std::string, std::string> out;
    for (size_t i = 0; i + 1 < flat.size(); i += 2) out[flat[i]] = flat[i + 1];
    return out;
  }
  std::string Type(const std::string& key) {
    auto v = Strings({"TYPE", key});
    return v.empty() ? "" : v[0];
  }
  // XRANGE key - +: each entry's fields.
  std::vector<std::map<std::string, std::string>> XRange(const std::string& key) {
    std::vector<std::map<std::string, std::string>> out;
    redisReply* r = Command({"XRANGE", key, "-", "+"});
    if (r && r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) {
        redisReply* e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[1]->type != REDIS_REPLY_ARRAY)
          continue;
        std::map<std::string, std::string> fields;
        redisReply* f = e->element[1];
        for (size_t k = 0; k + 1 < f->elements; k += 2) {
          fields[std::string(f->element[k]->str, f->element[k]->len)] =
              std::string(f->element[k + 1]->str, f->element[k + 1]->len);
        }
        out.push_back(std::move(fields));
      }
    }
    if (r) freeReplyObject(r);
    return out;
  }

 private:
  redisReply* Command(const std::vector<std::string>& argv) {
    std::vector<const char*> p;
    std::vector<size_t> l;
    for (const auto& a : argv) {
      p.push_back(a.data());
      l.push_back(a.size());
    }
    return static_cast<redisReply*>(redisCommandArgv(c_, int(argv.size()), p.data(), l.data()));
  }
  redisContext* c_ = nullptr;
  std::string auth_error_;
};

}  // namespace orrery_cluster
