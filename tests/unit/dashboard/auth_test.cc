// The dashboard's authentication (dashboard/internal/auth.h) as pure logic: requests in, answers
// out, a clock passed in. No sockets.
#include "dashboard/internal/auth.h"

#include <gtest/gtest.h>

#include <string>

#include "orrery/dashboard.h"

namespace orrery::dashboard {
namespace {

using namespace std::chrono_literals;

const std::string kToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const Auth::Clock::time_point kT0 = Auth::Clock::time_point() + 1000h;

AuthRequest Get(const std::string& path) { return {"GET", path, "", "", "", ""}; }

AuthRequest WithCookie(const std::string& path, const std::string& session) {
  AuthRequest r = Get(path);
  r.cookie = std::string("theme=dark; ") + Auth::kCookieName + "=" + session;
  return r;
}

AuthRequest LoginForm(const std::string& body) { return {"POST", "/login", "", "", "", body}; }

// The session id out of a login answer's Set-Cookie, checking its attributes.
std::string SessionOf(const HttpReply& r) {
  EXPECT_EQ(r.status, 303);
  EXPECT_EQ(r.headers.at("Location"), "/");
  const std::string& c = r.headers.at("Set-Cookie");
  EXPECT_NE(c.find("HttpOnly"), std::string::npos) << c;
  EXPECT_NE(c.find("SameSite=Strict"), std::string::npos) << c;
  EXPECT_NE(c.find("Path=/"), std::string::npos) << c;
  std::string prefix = std::string(Auth::kCookieName) + "=";
  EXPECT_EQ(c.rfind(prefix, 0), 0u) << c;
  return c.substr(prefix.size(), c.find(';') - prefix.size());
}

TEST(DashboardAuth, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"})
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  for (const char* h :
       {"0.0.0.0", "::", "", "10.0.0.5", "127.0.0.1.evil.com", "127.0.0", "127.0.0.256",
        "127.0.0.1:80", "localhost.localdomain", "128.0.0.1", "::ffff:127.0.0.1"})
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
}

TEST(DashboardAuth, OpenDashboardLetsEverythingThrough) {
  Auth auth("");
  EXPECT_FALSE(auth.required());
  EXPECT_EQ(auth.NewTicket(), "");
  EXPECT_FALSE(auth.Check(Get("/"), kT0));
  EXPECT_FALSE(auth.Check(Get("/api/cluster"), kT0));
  auto login = auth.Check(Get("/login"), kT0);  // nothing to log into: back to the overview
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 303);
}

TEST(DashboardAuth, EveryPageAndApiRouteNeedsTheToken) {
  Auth auth(kToken);
  ASSERT_TRUE(auth.required());
  for (const char* path :
       {"/", "/nodes", "/runs/0123456789abcdef0123456789abcdef", "/static/app.js", "/nope"}) {
    auto r = auth.Check(Get(path), kT0);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_NE(r->content_type.find("text/html"), std::string::npos) << path;
    EXPECT_NE(r->body.find("action=\"/login\""), std::string::npos) << path;
  }
  for (const char* path : {"/api", "/api/cluster", "/api/nodes", "/api/runs/x"}) {
    auto r = auth.Check(Get(path), kT0);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_NE(r->content_type.find("application/json"), std::string::npos) << path;
    EXPECT_NE(r->body.find("\"error\""), std::string::npos) << path;
    EXPECT_EQ(r->headers.count("WWW-Authenticate"), 1u) << path;
  }
  // Other methods too (the routes would answer 405, but only after authentication).
  auto post = auth.Check({"POST", "/api/nodes", "", "", "", ""}, kT0);
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  // The login page itself is served.
  auto page = auth.Check(Get("/login"), kT0);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
}

TEST(DashboardAuth, BearerToken) {
  Auth auth(kToken);
  AuthRequest r = Get("/api/cluster");
  r.authorization = "Bearer " + kToken;
  EXPECT_FALSE(auth.Check(r, kT0));
  r.authorization = "bearer  " + kToken + " ";
  EXPECT_FALSE(auth.Check(r, kT0));
  for (std::string wrong : {"Bearer " + kToken.substr(1), "Bearer " + kToken + "0",
                            "Basic " + kToken, kToken, std::string("Bearer "), "Bearer" + kToken}) {
    r.authorization = wrong;
    auto a = auth.Check(r, kT0 + 10s);  // a fresh rate-limit window: each counts as a guess
    ASSERT_TRUE(a) << wrong;
    EXPECT_EQ(a->status, 401) << wrong;
  }
}

TEST(DashboardAuth, LoginFormSetsACookieThatIsNotTheToken) {
  Auth auth(kToken);
  auto wrong = auth.Check(LoginForm("token=" + kToken.substr(0, 63)), kT0);
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->headers.count("Set-Cookie"), 0u);

  auto ok = auth.Check(LoginForm("other=1&token=+" + kToken + "%0A"), kT0);  // as pasted
  ASSERT_TRUE(ok);
  std::string session = SessionOf(*ok);
  EXPECT_EQ(session.size(), 64u);
  EXPECT_NE(session, kToken);
  EXPECT_EQ(ok->headers.at("Set-Cookie").find(kToken), std::string::npos);

  EXPECT_FALSE(auth.Check(WithCookie("/", session), kT0 + 1s));
  EXPECT_FALSE(auth.Check(WithCookie("/api/nodes", session), kT0 + 1s));
  // A cookie that is not a session, and the token itself as a cookie, are refused.
  EXPECT_EQ(auth.Check(WithCookie("/api/nodes", session.substr(1) + "0"), kT0)->status, 401);
  EXPECT_EQ(auth.Check(WithCookie("/api/nodes", kToken), kT0)->status, 401);
  // Sessions end after their lifetime.
  EXPECT_EQ(auth.Check(WithCookie("/", session), kT0 + Auth::kSessionLifetime)->status, 401);
}

TEST(DashboardAuth, PercentEncodedToken) {
  Auth auth("a+b c%&=d-0123456789012345678901234567890");
  auto ok = auth.Check(LoginForm("token=a%2Bb+c%25%26%3Dd-0123456789012345678901234567890"), kT0);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 303);
}

TEST(DashboardAuth, TicketWorksOnce) {
  Auth auth(kToken);
  std::string ticket = auth.NewTicket();
  ASSERT_EQ(ticket.size(), 64u);
  EXPECT_NE(ticket, kToken);
  AuthRequest r = Get("/login");
  r.ticket = ticket;
  auto first = auth.Check(r, kT0);
  ASSERT_TRUE(first);
  std::string session = SessionOf(*first);
  EXPECT_FALSE(auth.Check(WithCookie("/", session), kT0));
  auto again = auth.Check(r, kT0);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 401);
  EXPECT_EQ(again->headers.count("Set-Cookie"), 0u);
  // HEAD (a link preview) does not use a ticket up.
  Auth other(kToken);
  AuthRequest head = Get("/login");
  head.method = "HEAD";
  head.ticket = other.NewTicket();
  EXPECT_EQ(other.Check(head, kT0)->status, 200);
  head.method = "GET";
  EXPECT_EQ(other.Check(head, kT0)->status, 303);
  // The token is not a ticket.
  r.ticket = kToken;
  EXPECT_EQ(auth.Check(r, kT0)->status, 401);
}

TEST(DashboardAuth, TicketsAndSessionsAreBounded) {
  Auth auth(kToken);
  std::string oldest = auth.NewTicket();
  for (size_t i = 0; i < Auth::kMaxTickets; ++i) auth.NewTicket();
  AuthRequest r = Get("/login");
  r.ticket = oldest;
  EXPECT_EQ(auth.Check(r, kT0)->status, 401);

  std::string first = SessionOf(*auth.Check(LoginForm("token=" + kToken), kT0));
  for (size_t i = 0; i < Auth::kMaxSessions; ++i) auth.Check(LoginForm("token=" + kToken), kT0);
  EXPECT_EQ(auth.Check(WithCookie("/", first), kT0)->status, 401);
}

TEST(DashboardAuth, FailedGuessesAreRateLimited) {
  Auth auth(kToken);
  std::string session = SessionOf(*auth.Check(LoginForm("token=" + kToken), kT0 - 5s));
  for (int i = 0; i < Auth::kMaxFailuresPerSecond; ++i)
    EXPECT_EQ(auth.Check(LoginForm("token=wrong"), kT0)->status, 401) << i;
  // Over the limit even the right token is not looked at until the window has passed.
  auto limited = auth.Check(LoginForm("token=" + kToken), kT0 + 500ms);
  ASSERT_TRUE(limited);
  EXPECT_EQ(limited->status, 429);
  EXPECT_EQ(limited->headers.at("Retry-After"), "1");
  AuthRequest bearer = Get("/api/nodes");
  bearer.authorization = "Bearer " + kToken;
  EXPECT_EQ(auth.Check(bearer, kT0 + 900ms)->status, 429);
  // A logged-in browser is not locked out by someone else's guessing, and once the window
  // has passed the token is accepted again.
  EXPECT_FALSE(auth.Check(WithCookie("/api/nodes", session), kT0 + 900ms));
  EXPECT_EQ(SessionOf(*auth.Check(LoginForm("token=" + kToken), kT0 + 1s)).size(), 64u);
}

TEST(DashboardAuth, LogoutEndsTheSession) {
  Auth auth(kToken);
  std::string session = SessionOf(*auth.Check(LoginForm("token=" + kToken), kT0));
  AuthRequest out = WithCookie("/logout", session);
  out.method = "POST";
  auto r = auth.Check(out, kT0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 303);
  EXPECT_NE(r->headers.at("Set-Cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(auth.Check(WithCookie("/", session), kT0)->status, 401);
}

TEST(DashboardAuth, Parsers) {
  EXPECT_EQ(CookieValue("a=1; orrery=xyz ; b=2", "orrery"), "xyz");
  EXPECT_EQ(CookieValue("orrery=\"q\"", "orrery"), "q");
  EXPECT_EQ(CookieValue("xorrery=1; orrery", "orrery"), "");
  EXPECT_EQ(CookieValue(";;;=;", "orrery"), "");
  EXPECT_EQ(CookieValue(std::string(kMaxCredentialBytes + 1, 'a') + "; orrery=1", "orrery"), "");
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER\tabc"), "abc");
  EXPECT_EQ(BearerToken("Bearerabc"), "");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken("Bearer " + std::string(kMaxCredentialBytes, 'a')), "");
  EXPECT_EQ(FormValue("a=1&token=x%41y+z", "token"), "xAy z");
  EXPECT_EQ(FormValue("token=%4", "token"), "");
  EXPECT_EQ(FormValue("token=%zz", "token"), "");
  EXPECT_EQ(FormValue("tok%65n=v", "token"), "v");
  EXPECT_EQ(FormValue("&&token", "token"), "");
  EXPECT_EQ(FormValue("token=" + std::string(kMaxCredentialBytes, 'a'), "token"), "");
  // Garbage of every byte value never crashes.
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  for (size_t i = 0; i < all.size(); ++i) {
    std::string s = all.substr(i) + all.substr(0, i);
    (void)CookieValue(s, "orrery");
    (void)BearerToken(s);
    (void)FormValue(s, "token");
  }
}

// Start checks the options before it binds anything.
TEST(DashboardServer, RefusesANonLoopbackHostWithoutAToken) {
  for (const char* host : {"0.0.0.0", "::", "10.1.2.3"}) {
    Dashboard d({.redis_address = "", .host = host, .port = 0});
    auto r = d.Start();
    ASSERT_FALSE(r.ok()) << host;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << host;
    EXPECT_NE(r.status().message().find("without authentication"), std::string::npos)
        << r.status().message();
  }
  Dashboard weak({.redis_address = "", .host = "0.0.0.0", .port = 0, .token = "short"});
  auto r = weak.Start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too short"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace orrery::dashboard
