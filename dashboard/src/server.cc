#include "dashboard/src/server.h"

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "dashboard/src/api.h"
#include "dashboard/src/assets.h"
#include "dashboard/src/events.h"
#include "dashboard/src/live_state.h"

namespace orrery::dashboard {

using nlohmann::json;

namespace {

bool IsRunId(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// job_ and lowercase hex (docs/jobs.md).
bool IsSubmissionId(const std::string& s) {
  return s.size() > 4 && s.size() <= 64 && s.rfind("job_", 0) == 0 &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
}

HttpReply JsonReply(int status, const json& body) {
  // Records are shown as stored: bytes that are not UTF-8 are replaced, never fatal.
  return {status,
          kJsonType,
          body.dump(-1, ' ', false, json::error_handler_t::replace),
          {{"Cache-Control", "no-store"}}};
}

HttpReply AssetReply(const char* name, const char* type) {
  std::string_view bytes = Asset(name);
  return {200,
          type,
          std::string(bytes),
          {{"Cache-Control", "no-cache"}, {"X-Content-Type-Options", "nosniff"}}};
}

HttpReply NotFound() { return {404, "text/plain; charset=utf-8", "404 page not found\n", {}}; }

// Reads the given tables into `tables`, stopping at the first failure (after which every
// table is left empty, so a response never mixes fresh and missing data).
RedisState Read(RedisReader* reader, const std::string& address,
                std::initializer_list<std::pair<const char*, Table*>> want) {
  RedisState state{address, false, ""};
  if (!reader) {
    state.error = "no Redis address given (orrery dashboard --redis-address HOST:PORT)";
    return state;
  }
  for (const auto& [name, table] : want) {
    auto r = reader->GetTable(name);
    if (!r.ok()) {
      state.error = r.status().message();
      for (const auto& entry : want) entry.second->clear();
      return state;
    }
    *table = std::move(r.value());
  }
  state.ok = true;
  return state;
}

HttpReply Run(const std::string& id, RedisReader* reader, const std::string& address) {
  RedisState state{address, false, ""};
  if (!reader) {
    state = Read(nullptr, address, {});
    return JsonReply(200, RunResponse(state, "null", {}));
  }
  auto record = reader->GetRecord("train_runs", id);
  if (!record.ok() && record.status().code() == StatusCode::kNotFound) {
    state.ok = true;
    json body = ErrorResponse("no training run " + id);
    body["redis"] = RedisJson(state);
    return JsonReply(404, body);
  }
  if (!record.ok()) {
    state.error = record.status().message();
    return JsonReply(200, RunResponse(state, "null", {}));
  }
  auto metrics = reader->RunMetrics(id);
  state.ok = metrics.ok();
  if (!metrics.ok()) state.error = metrics.status().message();
  return JsonReply(200, RunResponse(state, record.value(),
                                    metrics.ok() ? metrics.value() : std::vector<StreamEntry>{}));
}

// A submitted job's record and output (`id` given), or the workers' lines: the newest
// kMaxLogEntries entries of `stream`.
HttpReply Logs(const std::string& stream, const std::string& id, RedisReader* reader,
               const std::string& address) {
  constexpr size_t kMaxLogEntries = 1000;
  RedisState state;
  state.address = address;
  std::string record = "null";
  if (!id.empty()) {
    auto r = reader->GetRecord("submissions", id);
    if (!r.ok() && r.status().code() == StatusCode::kNotFound)
      return JsonReply(404, ErrorResponse("no submitted job " + id));
    if (r.ok()) record = r.value();
  }
  auto entries = reader->LastEntries(stream, kMaxLogEntries);
  state.ok = entries.ok();
  if (!entries.ok()) state.error = entries.status().message();
  return JsonReply(200, LogsResponse(state, record,
                                     entries.ok() ? entries.value() : std::vector<StreamEntry>{}));
}

HttpReply Api(const std::string& path, RedisReader* reader, const std::string& address) {
  Tables t;
  if (path == "/api/cluster") {
    RedisState s = Read(reader, address,
                        {{"nodes", &t.nodes},
                         {"actors", &t.actors},
                         {"placement_groups", &t.placement_groups},
                         {"train_runs", &t.train_runs}});
    return JsonReply(200, ClusterResponse(s, t));
  }
  if (path == "/api/nodes") {
    RedisState s = Read(
        reader, address,
        {{"nodes", &t.nodes}, {"actors", &t.actors}, {"placement_groups", &t.placement_groups}});
    return JsonReply(200, NodesResponse(s, t));
  }
  for (const char* table : {"actors", "placement_groups", "jobs", "submissions", "autoscaler"}) {
    if (path == std::string("/api/") + table) {
      Table rows;
      RedisState s = Read(reader, address, {{table, &rows}});
      return JsonReply(200, ListResponse(s, table, rows));
    }
  }
  if (path == "/api/events") {  // HEAD (GET streams, InstallHandlers)
    return {200, "text/event-stream", "", {{"Cache-Control", "no-store"}}};
  }
  if (path == "/api/runs") {
    RedisState s = Read(reader, address, {{"train_runs", &t.train_runs}});
    return JsonReply(200, RunsResponse(s, t.train_runs));
  }
  const std::string runs_prefix = "/api/runs/";
  if (path.rfind(runs_prefix, 0) == 0 && IsRunId(path.substr(runs_prefix.size()))) {
    return Run(path.substr(runs_prefix.size()), reader, address);
  }
  const std::string subs_prefix = "/api/submissions/";
  if (path.rfind(subs_prefix, 0) == 0 && IsSubmissionId(path.substr(subs_prefix.size())))
    return Logs("job_logs:" + path.substr(subs_prefix.size()), path.substr(subs_prefix.size()),
                reader, address);
  if (path == "/api/logs") return Logs("logs", "", reader, address);
  return JsonReply(404, ErrorResponse("unknown API path " + path));
}

bool IsPage(const std::string& path) {
  static const char* kPages[] = {"/",     "/nodes", "/actors",      "/placement-groups",
                                 "/jobs", "/runs",  "/submissions", "/autoscaler"};
  for (const char* p : kPages) {
    if (path == p) return true;
  }
  if (path.rfind("/submissions/", 0) == 0) return IsSubmissionId(path.substr(13));
  return path.rfind("/runs/", 0) == 0 && IsRunId(path.substr(6));
}

// Streams `feed`'s events on `res` (events.h), or answers 503 when no stream may open. The
// stream ends when a write fails (the client went away) or the server stops.
void StreamEvents(ChangeFeed* feed, httplib::Response& res) {
  if (!feed || !feed->OpenStream()) {
    HttpReply r = JsonReply(503, ErrorResponse("too many event streams are open (at most " +
                                               std::to_string(ChangeFeed::kMaxStreams) +
                                               "); poll the JSON API instead"));
    res.status = r.status;
    res.set_header("Retry-After", "5");
    res.set_content(std::move(r.body), r.content_type);
    return;
  }
  struct Stream {
    uint64_t sent = 0;
    ChangeFeed::Clock::time_point last_write = ChangeFeed::Clock::now();
  };
  auto stream = std::make_shared<Stream>();
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  // httplib calls the provider until it returns false or the server stops: each call waits
  // a little (bounded, so a stopping server is not held up), then writes what is due.
  res.set_chunked_content_provider(
      "text/event-stream",
      [feed, stream](size_t, httplib::DataSink& sink) {
        if (stream->sent != 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
        auto now = ChangeFeed::Clock::now();
        FeedState state = feed->Current(now);
        std::string out;
        if (state.version != stream->sent) {
          out = FormatEvent(state);
          stream->sent = state.version;
        } else if (now - stream->last_write >= ChangeFeed::kHeartbeat) {
          out = kHeartbeatComment;
        }
        if (out.empty()) return sink.is_writable();
        stream->last_write = now;
        return sink.write(out.data(), out.size());
      },
      [feed](bool) { feed->CloseStream(); });
}

}  // namespace

HttpReply HandleRequest(const std::string& method, const std::string& path, RedisReader* reader,
                        const std::string& redis_address) {
  bool api = path == "/api" || path.rfind("/api/", 0) == 0;
  try {
    if (method != "GET" && method != "HEAD") {
      HttpReply r =
          api ? JsonReply(405, ErrorResponse("method " + method +
                                             " not allowed; the dashboard only reads"))
              : HttpReply{405, "text/plain; charset=utf-8", "405 method not allowed\n", {}};
      r.headers["Allow"] = "GET, HEAD";
      return r;
    }
    if (api) return Api(path, reader, redis_address);
    if (IsPage(path)) return AssetReply("index.html", "text/html; charset=utf-8");
    if (path == "/static/app.js") return AssetReply("app.js", "text/javascript; charset=utf-8");
    if (path == "/static/app.css") return AssetReply("app.css", "text/css; charset=utf-8");
    return NotFound();
  } catch (const std::exception& e) {
    // Nothing above is expected to throw; a request must never take the server down.
    return JsonReply(500, ErrorResponse(std::string("internal error: ") + e.what()));
  }
}

void InstallHandlers(httplib::Server& http, RedisReader* reader, const std::string& redis_address,
                     Auth* auth, ChangeFeed* feed) {
  auto respond = [reader, redis_address, auth, feed](const httplib::Request& req,
                                                     httplib::Response& res) {
    HttpReply r;
    try {
      AuthRequest a{req.method, req.path, "", "", "", ""};
      if (req.path == "/login") a.ticket = req.get_param_value("ticket");
      a.cookie = req.get_header_value("Cookie");
      a.authorization = req.get_header_value("Authorization");
      if (req.method == "POST" && req.path == "/login") a.body = req.body;
      auto denied = auth ? auth->Check(a, Auth::Clock::now()) : std::nullopt;
      if (!denied && req.method == "GET" && req.path == "/api/events")
        return StreamEvents(feed, res);
      if (!denied && req.method == "GET" &&
          (req.path == "/api/workers" || req.path == "/api/tasks")) {
        LiveFilter f{req.get_param_value("state"), req.get_param_value("node"),
                     req.get_param_value("job")};
        r = JsonReply(200, req.path == "/api/workers" ? WorkersResponse(reader, redis_address, f)
                                                      : TasksResponse(reader, redis_address, f));
      } else {
        r = denied ? std::move(*denied)
                   : HandleRequest(req.method, req.path, reader, redis_address);
      }
    } catch (const std::exception& e) {
      // Nothing above is expected to throw (bad_alloc aside); a request must never take
      // the server down, nor get through unchecked.
      r = JsonReply(500, ErrorResponse(std::string("internal error: ") + e.what()));
    }
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k, v);
    res.set_content(std::move(r.body), r.content_type);
  };
  http.set_pre_routing_handler([respond](const httplib::Request& req, httplib::Response& res) {
    // The login form's body is read by httplib only for a routed handler (below).
    if (req.method == "POST" && req.path == "/login")
      return httplib::Server::HandlerResponse::Unhandled;
    respond(req, res);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.Post("/login", respond);
}

Server::Server(DashboardOptions options) : options_(std::move(options)) {
  if (!options_.redis_address.empty()) {
    reader_ = std::make_unique<RedisReader>(options_.redis_address, options_.cluster,
                                            options_.redis_timeout_ms, options_.redis_password);
  }
}

Server::~Server() { Stop(); }

Result<int> Server::Start() {
  if (front_) return Status::InvalidArgument("the dashboard was already started");
  if (!options_.insecure && options_.token.empty() && !IsLoopbackHost(options_.host)) {
    return Status::InvalidArgument(
        "the dashboard would serve " + options_.host +
        ", a non-loopback address, without authentication: give it the cluster token "
        "(--token-file F or ORRERY_TOKEN_FILE), bind 127.0.0.1, or pass --insecure to serve "
        "it open to anyone who reaches this host");
  }
  if (!options_.insecure && !options_.token.empty() && options_.token.size() < 32) {
    return Status::InvalidArgument("the dashboard's token is too short: at least 32 characters");
  }
  // On loopback the dashboard stays open, as everything else this host serves there.
  bool open = options_.insecure || IsLoopbackHost(options_.host);
  auth_ = std::make_unique<Auth>(open ? std::string() : options_.token);
  feed_ = std::make_unique<ChangeFeed>(reader_.get());
  FrontOptions f;
  f.host = options_.host;
  f.port = options_.port;
  f.threads = options_.threads > 0 ? options_.threads : 1;
  f.header_timeout = std::chrono::milliseconds(options_.header_timeout_ms);
  f.body_timeout = std::chrono::milliseconds(options_.body_timeout_ms);
  f.write_timeout = std::chrono::milliseconds(options_.write_timeout_ms);
  f.max_connections = options_.max_connections;
  f.max_connections_per_address = options_.max_connections_per_address;
  processor_ = std::make_unique<Processor>(reader_.get(), options_.redis_address, auth_.get(),
                                           feed_.get(), f.max_body_bytes);
  front_ = std::make_unique<Front>(
      f, [p = processor_.get()](const Exchange& e) { return p->Handle(e); }, Processor::Streams);
  auto port = front_->Start();
  if (!port.ok()) {
    front_.reset();
    return Status::Unavailable("the dashboard cannot listen on " + options_.host + ":" +
                               std::to_string(options_.port) + ": " + port.status().message());
  }
  port_ = port.value();
  return port_;
}

void Server::Stop() {
  // Streams end first (they watch the processor), so the front's Stop can wait for them.
  if (processor_) processor_->SetServing(false);
  if (front_) front_->Stop();
}

Dashboard::Dashboard(DashboardOptions options)
    : server_(std::make_unique<Server>(std::move(options))) {}
Dashboard::~Dashboard() { Stop(); }
Result<int> Dashboard::Start() { return server_->Start(); }
void Dashboard::Stop() { server_->Stop(); }
std::string Dashboard::url() const {
  std::string host = server_->options().host;
  if (host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty()) {
    // Bound to every interface: the name other hosts reach this one by.
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 && name[0] ? name : "127.0.0.1";
  } else if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";
  }
  return "http://" + host + ":" + std::to_string(server_->port());
}
std::string Dashboard::login_url() {
  std::string ticket = server_->NewTicket();
  return ticket.empty() ? url() : url() + "/login?ticket=" + ticket;
}

}  // namespace orrery::dashboard
