// Who may read the dashboard (docs/dashboard.md, "Authentication").
//
// Bound to a loopback address the dashboard is open, as anything else on this host. Bound to
// any other address it requires the cluster token: a browser logs in once (the login form,
// POST /login with the token, or a one-time URL /login?ticket=T that `orrery dashboard`
// prints) and then holds a session cookie (HttpOnly, SameSite=Strict) whose value is a
// random session id, never the token; scripts send `Authorization: Bearer <token>` to /api.
// Without either, every page answers 401 with the login page and every /api route 401 with a
// JSON error.
//
// Every input here comes from whoever reaches the port: header and body sizes are bounded,
// secrets are compared in constant time, failed guesses are rate-limited, and the sets of
// sessions and tickets are bounded. No sockets: the server (server.h) feeds it requests.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "dashboard/src/http_reply.h"

namespace orrery::dashboard {

// Whether binding `host` keeps the dashboard to this machine: 127.0.0.0/8, ::1 (also as
// [::1]) and localhost. Everything else (0.0.0.0, ::, a host name, an interface address)
// counts as reachable from elsewhere.
bool IsLoopbackHost(const std::string& host);

// Request parsing, bounded: each returns "" when the piece is absent, malformed or longer
// than kMaxCredentialBytes.
constexpr size_t kMaxCredentialBytes = 4096;
// The value of cookie `name` in a Cookie header ("a=1; b=2").
std::string CookieValue(std::string_view header, std::string_view name);
// The token of an "Authorization: Bearer <token>" header (scheme case-insensitive).
std::string BearerToken(std::string_view header);
// Field `name` of an application/x-www-form-urlencoded body, percent-decoded.
std::string FormValue(std::string_view body, std::string_view name);

// What Auth::Check looks at, copied out of the HTTP request.
struct AuthRequest {
  std::string method;
  std::string path;           // without the query
  std::string ticket;         // the query's `ticket` parameter
  std::string cookie;         // the Cookie header
  std::string authorization;  // the Authorization header
  std::string body;           // the body (read for POST /login)
};

class Auth {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr const char* kCookieName = "orrery_dashboard_session";
  static constexpr size_t kMaxSessions = 64;  // the oldest is dropped beyond this
  static constexpr size_t kMaxTickets = 16;   // likewise for unused one-time tickets
  static constexpr std::chrono::hours kSessionLifetime{12};
  // Wrong tokens and tickets (login form, ticket, bearer) allowed per second, all clients
  // together; beyond that such requests answer 429 without being checked.
  static constexpr int kMaxFailuresPerSecond = 10;

  // `token` "" makes an open dashboard: Check lets every request through.
  explicit Auth(std::string token);
  Auth(const Auth&) = delete;
  Auth& operator=(const Auth&) = delete;

  bool required() const { return !token_.empty(); }

  // A new one-time ticket for /login?ticket=..., valid until used (or until kMaxTickets
  // newer ones exist). "" when no token is required.
  std::string NewTicket();

  // Null when the request may go on to the dashboard's routes (HandleRequest); otherwise
  // the answer: the login page, the login form's and ticket's redirects with the session
  // cookie, logout, 401 or 429. Thread-safe; never throws.
  std::optional<HttpReply> Check(const AuthRequest& request, Clock::time_point now);

 private:
  struct Entry {
    std::string value;
    Clock::time_point created;
  };

  bool ValidSession(const std::string& cookie, Clock::time_point now);
  bool TakeTicket(const std::string& ticket);
  // Counts one wrong guess; true when the caller must be turned away (over the limit).
  bool OverLimit(Clock::time_point now);
  void Fail(Clock::time_point now);
  HttpReply LoggedIn(Clock::time_point now);
  // The answers of /logout and /login (when a token is required).
  HttpReply Logout(const AuthRequest& req);
  HttpReply Login(const AuthRequest& req, Clock::time_point now);
  HttpReply LoginWithToken(const AuthRequest& req, Clock::time_point now);  // POST /login

  const std::string token_;
  std::mutex mu_;
  std::deque<Entry> sessions_;        // guarded by mu_
  std::deque<std::string> tickets_;   // guarded by mu_
  Clock::time_point window_start_{};  // guarded by mu_
  int failures_in_window_ = 0;        // guarded by mu_
};

}  // namespace orrery::dashboard
