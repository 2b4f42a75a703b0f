// A minimal synchronous hiredis client for the cluster tests: reads what the head wrote.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace orrery_cluster {

class Redis {
 public:
  explicit Redis(int port) {
    timeval tv{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  }
  // "host:port"
  explicit Redis(const std::string& address) : Redis(std::atoi(address.c_str() + address.rfind(':') + 1)) {}
  ~Redis() {
    if (c_) redisFree(c_);
  }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  bool ok() const { return c_ && !c_->err; }
  redisContext* raw() { return c_; }

  // The reply as strings: an array's elements, or a single string/status.
  std::vector<std::string> Strings(const std::vector<std::string>& argv) {
    std::vector<std::string> out;
    redisReply* r = Command(argv);
    if (!r) return out;
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
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
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[1]->type != REDIS_REPLY_ARRAY) continue;
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
};

}  // namespace orrery_cluster
