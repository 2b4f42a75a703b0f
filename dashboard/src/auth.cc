#include "dashboard/internal/auth.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/internal/security.h"

namespace orrery::dashboard {

namespace {

constexpr const char* kHtmlType = "text/html; charset=utf-8";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of a form value ('+' is a space); nullopt when malformed.
std::optional<std::string> FormDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = HexDigit(s[i + 1]), lo = HexDigit(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += char(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The login page: self-contained (no asset is served before login), `message` one of the
// fixed strings below, never request content.
std::string LoginPage(const char* message) {
  std::string page = R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Orrery dashboard: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;background:#f6f7f9;color:#1d2430;display:flex;
justify-content:center;margin-top:12vh}
form{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:24px 28px;width:26em}
h1{font-size:1.2em;margin:0 0 12px}p{font-size:.9em;color:#4a5568}
input[type=password]{width:100%;box-sizing:border-box;padding:6px;margin:8px 0 12px;
font-family:monospace}.msg{color:#b42318}
</style></head><body>
<form method="post" action="/login" id="login">
<h1>Orrery dashboard</h1>
<p>This dashboard serves a network address, so it asks for the cluster token (the file
<code>&lt;session dir&gt;/token</code> on the head's host), or open the one-time link that
<code>orrery dashboard</code> or <code>orrery start --head</code> printed.</p>
<p class="msg" id="login-message">)";
  page += message;
  page += R"(</p>
<label>Cluster token<input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Log in</button>
</form></body></html>
)";
  return page;
}

HttpReply Page(int status, const char* message) {
  return {status, kHtmlType, LoginPage(message), {{"Cache-Control", "no-store"}}};
}

HttpReply Json(int status, const std::string& error) {
  // `error` is one of the fixed strings below (no escaping needed).
  return {status, kJsonType, "{\"error\": \"" + error + "\"}", {{"Cache-Control", "no-store"}}};
}

HttpReply TooManyFailures() {
  HttpReply r = Page(429, "Too many failed attempts; wait a second and try again.");
  r.headers["Retry-After"] = "1";
  return r;
}

bool IsApi(const std::string& path) { return path == "/api" || path.rfind("/api/", 0) == 0; }

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // 127.0.0.0/8 in dotted form: four numbers, the first 127.
  if (host.rfind("127.", 0) != 0) return false;
  int parts = 0;
  size_t i = 0;
  while (i <= host.size()) {
    size_t end = host.find('.', i);
    if (end == std::string::npos) end = host.size();
    std::string part = host.substr(i, end - i);
    if (part.empty() || part.size() > 3 ||
        !std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c); }) ||
        std::stoi(part) > 255)
      return false;
    ++parts;
    i = end + 1;
  }
  return parts == 4;
}

std::string CookieValue(std::string_view header, std::string_view name) {
  if (header.size() > kMaxCredentialBytes || name.empty()) return "";
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = Trim(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || Trim(pair.substr(0, eq)) != name) continue;
    std::string_view value = Trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    return std::string(value);
  }
  return "";
}

std::string BearerToken(std::string_view header) {
  if (header.size() > kMaxCredentialBytes) return "";
  header = Trim(header);
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size()) return "";
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return "";
  }
  if (header[kScheme.size()] != ' ' && header[kScheme.size()] != '\t') return "";
  return std::string(Trim(header.substr(kScheme.size())));
}

std::string FormValue(std::string_view body, std::string_view name) {
  if (body.size() > kMaxCredentialBytes || name.empty()) return "";
  while (!body.empty()) {
    size_t amp = body.find('&');
    std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    auto key = FormDecode(pair.substr(0, eq));
    if (!key || *key != name) continue;
    auto value = FormDecode(pair.substr(eq + 1));
    return value ? *value : "";
  }
  return "";
}

Auth::Auth(std::string token) : token_(std::move(token)) {}

std::string Auth::NewTicket() {
  if (!required()) return "";
  std::string ticket = security::NewToken();
  std::lock_guard<std::mutex> lock(mu_);
  tickets_.push_back(ticket);
  while (tickets_.size() > kMaxTickets) tickets_.pop_front();
  return ticket;
}

bool Auth::ValidSession(const std::string& cookie, Clock::time_point now) {
  if (cookie.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  while (!sessions_.empty() && now - sessions_.front().created >= kSessionLifetime)
    sessions_.pop_front();
  // Every entry is compared (no early exit), each in constant time.
  bool found = false;
  for (const Entry& e : sessions_) found |= security::SecretEquals(e.value, cookie);
  return found;
}

bool Auth::TakeTicket(const std::string& ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto match = tickets_.end();
  for (auto it = tickets_.begin(); it != tickets_.end(); ++it) {
    if (security::SecretEquals(*it, ticket)) match = it;
  }
  if (match == tickets_.end()) return false;
  tickets_.erase(match);
  return true;
}

bool Auth::OverLimit(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (now - window_start_ >= std::chrono::seconds(1) || now < window_start_) {
    window_start_ = now;
    failures_in_window_ = 0;
  }
  return failures_in_window_ >= kMaxFailuresPerSecond;
}

void Auth::Fail(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (now - window_start_ >= std::chrono::seconds(1) || now < window_start_) {
    window_start_ = now;
    failures_in_window_ = 0;
  }
  ++failures_in_window_;
}

HttpReply Auth::LoggedIn(Clock::time_point now) {
  std::string session = security::NewToken();
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.push_back({session, now});
    while (sessions_.size() > kMaxSessions) sessions_.pop_front();
  }
  HttpReply r{303, "text/plain; charset=utf-8", "logged in; continue at /\n", {}};
  r.headers["Location"] = "/";
  r.headers["Cache-Control"] = "no-store";
  r.headers["Set-Cookie"] = std::string(kCookieName) + "=" + session +
                            "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" +
                            std::to_string(std::chrono::seconds(kSessionLifetime).count());
  return r;
}

HttpReply Auth::Logout(const AuthRequest& req) {
  if (req.method != "POST")
    return HttpReply{
        405, "text/plain; charset=utf-8", "405 method not allowed\n", {{"Allow", "POST"}}};
  std::string cookie = CookieValue(req.cookie, kCookieName);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (security::SecretEquals(it->value, cookie)) {
        sessions_.erase(it);
        break;
      }
    }
  }
  HttpReply r{303, "text/plain; charset=utf-8", "", {}};
  r.headers["Location"] = "/login";
  r.headers["Set-Cookie"] =
      std::string(kCookieName) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0";
  return r;
}

HttpReply Auth::LoginWithToken(const AuthRequest& req, Clock::time_point now) {
  if (OverLimit(now)) return TooManyFailures();
  // Surrounding white space is dropped, as ReadTokenFile does (a pasted line, a file).
  std::string token = FormValue(req.body, "token");
  size_t first = token.find_first_not_of(" \t\r\n");
  token = first == std::string::npos
              ? ""
              : token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
  if (!token.empty() && security::SecretEquals(token, token_)) return LoggedIn(now);
  Fail(now);
  return Page(401, "Wrong token.");
}

HttpReply Auth::Login(const AuthRequest& req, Clock::time_point now) {
  if (req.method == "POST") return LoginWithToken(req, now);
  if (req.method != "GET" && req.method != "HEAD") {
    return HttpReply{405,
                     "text/plain; charset=utf-8",
                     "405 method not allowed\n",
                     {{"Allow", "GET, HEAD, POST"}}};
  }
  if (!req.ticket.empty() && req.method == "HEAD") {
    // A link preview or prefetch must not use up the one-time ticket.
    return Page(200, "");
  }
  if (!req.ticket.empty()) {
    if (OverLimit(now)) return TooManyFailures();
    if (req.ticket.size() <= kMaxCredentialBytes && TakeTicket(req.ticket)) return LoggedIn(now);
    Fail(now);
    return Page(401, "This link was already used or is not valid; log in with the token.");
  }
  if (ValidSession(CookieValue(req.cookie, kCookieName), now)) {
    return HttpReply{303, "text/plain; charset=utf-8", "", {{"Location", "/"}}};
  }
  return Page(200, "");
}

std::optional<HttpReply> Auth::Check(const AuthRequest& req, Clock::time_point now) {
  if (req.path == "/login" || req.path == "/logout") {
    if (!required()) {
      // An open dashboard has nothing to log into; a ticket URL still lands on the overview.
      HttpReply r{303, "text/plain; charset=utf-8", "", {{"Location", "/"}}};
      return r;
    }
    if (req.path == "/logout") return Logout(req);
    return Login(req, now);
  }
  if (!required()) return std::nullopt;
  if (ValidSession(CookieValue(req.cookie, kCookieName), now)) return std::nullopt;
  bool api = IsApi(req.path);
  if (!req.authorization.empty()) {
    std::string bearer = BearerToken(req.authorization);
    if (!bearer.empty()) {
      if (OverLimit(now)) {
        HttpReply r = Json(429, "too many failed attempts; retry in a second");
        r.headers["Retry-After"] = "1";
        return r;
      }
      if (security::SecretEquals(bearer, token_)) return std::nullopt;
      Fail(now);
    }
  }
  if (api) {
    HttpReply r =
        Json(401,
             "authentication required: send 'Authorization: Bearer <cluster token>' or log in "
             "at /login");
    r.headers["WWW-Authenticate"] = "Bearer realm=\"orrery dashboard\"";
    return r;
  }
  return Page(401, "");
}

}  // namespace orrery::dashboard
