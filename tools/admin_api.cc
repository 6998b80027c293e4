#include "tools/admin_api.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/field_values.h"
#include "core/json_writer.h"
#include "core/signature.h"
#include "tools/feed_long_polls.h"
#include "tools/read_views.h"

namespace eventfold::cli {
namespace {

constexpr const char* kNdjson = "application/x-ndjson";

HttpResponse Error(int status, std::string_view message) {
  JsonWriter w;
  w.BeginObject().Key("error").String(message).EndObject();
  return HttpResponse{status, "application/json", w.str(), {}};
}

// 405 names what the resource takes (RFC 9110 §15.5.6).
HttpResponse NotAllowed(std::string_view allow, std::string_view message) {
  HttpResponse r = Error(405, message);
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

// 401 names the scheme it wants (RFC 9110 §11.6.1).
HttpResponse Unauthorized() {
  HttpResponse r = Error(401, "missing or wrong bearer token");
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

HttpResponse FromStatus(const Status& st) {
  return Error(st.IsNotFound() ? 404 : st.IsInvalidArgument() ? 400 : 503, st.message());
}

// The query string's parameters, percent-decoded; nullopt when malformed.
std::optional<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    auto name = PercentDecode(pair.substr(0, eq));
    auto value = PercentDecode(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (!name || !value) return std::nullopt;
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

class Request {
 public:
  std::string path;                // as received, for error messages
  std::vector<std::string> parts;  // decoded segments after "/v1/"
  std::vector<std::pair<std::string, std::string>> query;

  const std::string* Param(std::string_view name) const {
    for (const auto& [k, v] : query) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  // An unsigned parameter in [min, max]; `fallback` when absent.
  Result<uint64_t> Number(std::string_view name, uint64_t fallback, uint64_t max,
                          uint64_t min = 0) const {
    const std::string* v = Param(name);
    if (v == nullptr) return fallback;
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (v->empty() || ec != std::errc() || end != v->data() + v->size() || n < min || n > max) {
      return Status::InvalidArgument(std::string(name) + ": wants an integer from " +
                                     std::to_string(min) + " to " + std::to_string(max) +
                                     ", got \"" + *v + "\"");
    }
    return n;
  }
};

// The endpoints, each once: by the first segment of its path below /v1/
// and its number of segments, with the query parameters it takes (space
// separated). Any other parameter is refused: a misspelt one silently
// ignored would page or wait other than its caller meant.
enum class Endpoint { kShow, kList, kLog, kStatus, kRefused, kSubscriptions, kFeed, kBackup };
struct EndpointSpec {
  std::string_view first;
  size_t segments;
  std::string_view params;
  Endpoint endpoint;
};
constexpr EndpointSpec kEndpoints[] = {
    {"projections", 3, "", Endpoint::kShow},
    {"projections", 1, "entity after limit", Endpoint::kList},
    {"log", 3, "", Endpoint::kLog},
    {"status", 1, "", Endpoint::kStatus},
    {"refused", 1, "after limit", Endpoint::kRefused},
    {"subscriptions", 1, "", Endpoint::kSubscriptions},
    {"feed", 1, "after limit wait_ms", Endpoint::kFeed},
    {"backup", 1, "to", Endpoint::kBackup},
};

// The endpoint `parts` names; nullptr for a path that is none (404).
const EndpointSpec* FindEndpoint(const std::vector<std::string>& parts) {
  for (const EndpointSpec& e : kEndpoints) {
    if (parts.size() == e.segments && parts[0] == e.first) return &e;
  }
  return nullptr;
}

// 400 for a parameter `endpoint` does not take, one given twice, or an
// empty entity; nullopt when the query is fine.
std::optional<HttpResponse> CheckQuery(const Request& req, const EndpointSpec& endpoint) {
  const std::string_view allowed = endpoint.params;
  for (size_t i = 0; i < req.query.size(); ++i) {
    const std::string& name = req.query[i].first;
    bool known = false;
    for (std::string_view rest = allowed; !rest.empty() && !known;) {
      const size_t space = rest.find(' ');
      known = rest.substr(0, space) == name;
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    if (!known) {
      return Error(400, "unknown parameter \"" + name + "\"" +
                            (allowed.empty() ? std::string(": this endpoint takes none")
                                             : "; this endpoint takes: " + std::string(allowed)));
    }
    for (size_t j = 0; j < i; ++j) {
      if (req.query[j].first == name) {
        return Error(400, "parameter \"" + name + "\" given more than once");
      }
    }
  }
  if (const std::string* e = req.Param("entity"); e != nullptr && e->empty()) {
    return Error(400, "entity: wants an entity type; leave it out to list every entity");
  }
  return std::nullopt;
}

// Splits a request target into *req; the error answer when it is not one
// of ours (404) or its percent-encoding is malformed (400).
std::optional<HttpResponse> ParseTarget(std::string_view target, Request* req) {
  const size_t qm = target.find('?');
  // Segments are decoded after splitting, so an id may hold "%2F".
  std::string_view path = target.substr(0, qm);
  auto query = ParseQuery(qm == std::string_view::npos ? "" : target.substr(qm + 1));
  bool malformed = !query;
  if (path.substr(0, 4) != "/v1/") return Error(404, "no such endpoint: " + std::string(path));
  path.remove_prefix(4);
  while (true) {
    const size_t slash = path.find('/');
    std::optional<std::string> part = PercentDecode(path.substr(0, slash));
    malformed = malformed || !part;
    req->parts.push_back(part.value_or(""));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  if (malformed) return Error(400, "malformed percent-encoding in the request target");
  req->path = std::string(target.substr(0, qm));
  req->query = std::move(*query);
  return std::nullopt;
}

class AdminApi final : public Receiver {
 public:
  AdminApi(Store* store, AdminApiOptions options) : store_(store), opt_(std::move(options)) {
    if (opt_.clock == nullptr) opt_.clock = SystemClock();
  }

  HttpResponse Handle(std::string_view method, std::string_view target, const Headers& headers,
                      std::string_view) override {
    if (std::optional<HttpResponse> r = AnswerWithoutStore(method, target, headers)) return *r;
    Request req;
    if (std::optional<HttpResponse> error = ParseTarget(target, &req)) return *error;
    const EndpointSpec* endpoint = FindEndpoint(req.parts);
    if (endpoint == nullptr) return Error(404, "no such endpoint: " + req.path);
    if (std::optional<HttpResponse> error = CheckQuery(req, *endpoint)) return *error;
    return Route(req, endpoint->endpoint);
  }

  // Starts the thread that answers parked long-polls (FeedLongPolls::Start).
  [[nodiscard]] Status StartLongPolls() { return polls_.Start(); }

  // The token first: a client without it learns nothing of the API, not
  // even that it takes no body.
  HttpResponse RefuseOversized(std::string_view, std::string_view, const Headers& headers,
                               uint64_t) override {
    if (!Authorized(headers)) return Unauthorized();
    return Error(413, "the admin API takes no request body");
  }
  HttpResponse RefuseOverloaded(std::string_view why) override { return Error(503, why); }
  std::string MetricsText() override { return ""; }

 private:
  // Exactly one Authorization field, with the token: with two, which one
  // counts would be a choice a client could play on.
  bool Authorized(const Headers& headers) const {
    if (CountHeader(headers, "Authorization") != 1) return false;
    std::optional<std::string_view> auth = FindHeader(headers, "Authorization");
    // RFC 9110 §11.4: the scheme's name in any case, then one or more
    // spaces, then the token.
    constexpr std::string_view kBearer = "Bearer";
    if (!auth || auth->size() <= kBearer.size() ||
        !EqualsIgnoringCase(auth->substr(0, kBearer.size()), kBearer) ||
        (*auth)[kBearer.size()] != ' ') {
      return false;
    }
    std::string_view token = auth->substr(kBearer.size());
    token.remove_prefix(std::min(token.find_first_not_of(' '), token.size()));
    // Compared as MACs of equal length, so that the time taken says
    // nothing about the token's length either.
    return ConstantTimeEquals(HmacSha256(opt_.token, token), token_mac_);
  }

  // What needs no store is answered on the event loop's thread: health,
  // a refused token, a wrong method. So busy workers neither starve a
  // health check nor let unauthenticated requests queue. A feed read that
  // would wait is parked (FeedLongPolls) rather than holding a worker.
  bool TryHandleWithoutBlocking(std::string_view method, std::string_view target, Headers& headers,
                                std::string& body, AnswerCallback& done) override {
    (void)body;
    if (std::optional<HttpResponse> r = AnswerWithoutStore(method, target, headers)) {
      std::exchange(done, nullptr)(std::move(*r));
      return true;
    }
    return ParkLongPoll(target, done);
  }

  // Parks a feed read that has nothing to answer yet and may wait; false
  // (done untouched) for everything else, which a worker answers.
  bool ParkLongPoll(std::string_view target, AnswerCallback& done) {
    Request req;
    if (ParseTarget(target, &req)) return false;
    const EndpointSpec* endpoint = FindEndpoint(req.parts);
    if (endpoint == nullptr || endpoint->endpoint != Endpoint::kFeed ||
        CheckQuery(req, *endpoint)) {
      return false;
    }
    Result<FeedQuery> q = FeedQueryOf(req);
    if (!q.ok() || q->wait_ms == 0 || Stopping()) return false;
    ChangeFeed& feed = store_->feed();
    if (feed.LastSeq() > q->after) return false;
    auto wait = std::make_shared<ParkedRead>(ParkedRead{*q, std::exchange(done, nullptr)});
    FeedLongPolls::Ticket ticket = polls_.Park(FeedLongPolls::Poll{
        q->after,
        std::chrono::steady_clock::now() + std::chrono::milliseconds(q->wait_ms),
        [this, wait] { std::exchange(wait->done, nullptr)(FeedPage(wait->query)); },
    });
    // A change committed between the check and the park may have been
    // missed by the waiting thread; take such a poll back for a worker.
    if (feed.LastSeq() > q->after && polls_.Unpark(ticket)) {
      done = std::move(wait->done);
      return false;
    }
    return true;
  }

  // The answers that read nothing stored; nullopt for the rest.
  std::optional<HttpResponse> AnswerWithoutStore(std::string_view method, std::string_view target,
                                                 const Headers& headers) const {
    const size_t qm = target.find('?');
    if (target.substr(0, qm) == "/healthz") {
      if (method != "GET") return NotAllowed("GET, HEAD", "/healthz answers GET");
      return HttpResponse{200, "application/json", R"({"status":"ok"})"};
    }
    if (!Authorized(headers)) return Unauthorized();
    // Reads are GETs; the one action, a backup, is a POST.
    const bool backup = target.substr(0, qm) == "/v1/backup";
    if (method != (backup ? "POST" : "GET")) {
      return backup ? NotAllowed("POST", "a backup is taken with POST")
                    : NotAllowed("GET, HEAD", "reads are GETs; the one POST is /v1/backup");
    }
    // This listener's own HTTP-layer refusals: the server appends its
    // counters to a 200 for GET /metrics (Prometheus text).
    if (target.substr(0, qm) == "/metrics") {
      return HttpResponse{200, "text/plain; version=0.0.4", ""};
    }
    return std::nullopt;
  }

  HttpResponse NotFound(std::string_view entity, std::string_view id) {
    return Error(404, NoProjectionText(*store_, std::string(entity), std::string(id)));
  }

  HttpResponse Route(const Request& req, Endpoint endpoint) {
    switch (endpoint) {
      case Endpoint::kShow:
        return Show(req.parts[1], req.parts[2]);
      case Endpoint::kList:
        return List(req);
      case Endpoint::kLog:
        return Log(req.parts[1], req.parts[2]);
      case Endpoint::kStatus:
        return StatusPage();
      case Endpoint::kRefused:
        return Refused(req);
      case Endpoint::kSubscriptions:
        return Subscriptions();
      case Endpoint::kFeed:
        return Feed(req);
      case Endpoint::kBackup:
        return Backup(req);
    }
    return Error(404, "no such endpoint: " + req.path);  // not reached: every case returns
  }

  // A missing projection's 404 says why, as `show --data` does.
  HttpResponse Show(std::string_view entity, std::string_view id) {
    Result<Projection> p = store_->Get(entity, id);
    if (p.status().IsNotFound()) return NotFound(entity, id);
    if (!p.ok()) return FromStatus(p.status());
    return HttpResponse{200, "application/json", ProjectionToJson(*p) + "\n", {}};
  }

  HttpResponse Log(std::string_view entity, std::string_view id) {
    Result<EntityLog> log = store_->Log(entity, id);
    if (log.status().IsNotFound()) return NotFound(entity, id);
    if (!log.ok()) return FromStatus(log.status());
    return HttpResponse{200, "application/json", EntityLogToJson(*log) + "\n", {}};
  }

  // Paged by (entity, id): `after` is an id when `entity` is given, else
  // "ENTITY/ID"; a page seeks to its cursor (Store::ListAfter).
  HttpResponse List(const Request& req) {
    const std::string* e = req.Param("entity");
    const std::string entity = e ? *e : "";
    if (!entity.empty() && !store_->profile()->FindEntity(entity)) {
      return Error(
          404, "profile \"" + store_->profile()->name() + "\" has no entity \"" + entity + "\"");
    }
    Result<uint64_t> limit = Limit(req);
    if (!limit.ok()) return FromStatus(limit.status());
    EntityRef after;
    const std::string* a = req.Param("after");
    if (a != nullptr && !entity.empty()) after = {entity, *a};
    if (a != nullptr && entity.empty()) {
      const size_t slash = a->find('/');
      if (slash == std::string::npos) {
        return Error(400, "after: without entity= it wants ENTITY/ID, got \"" + *a + "\"");
      }
      after = {a->substr(0, slash), a->substr(slash + 1)};
    }
    HttpResponse r{200, kNdjson, "", {}};
    uint64_t n = 0;
    std::string last;
    const auto page = [&](const Projection& p) {
      if (n == *limit || Full(r)) {
        // Percent-encoded: an id may hold any byte, a header line may not.
        r.headers.emplace_back(kNextAfterHeader, PercentEncode(last));
        return false;
      }
      r.body += ProjectionToJson(p);
      r.body += '\n';
      last = entity.empty() ? p.entity + "/" + p.id : p.id;
      ++n;
      return true;
    };
    Status st = a != nullptr ? store_->ListAfter(entity, after, page) : store_->List(entity, page);
    if (!st.ok()) return FromStatus(st);
    return r;
  }

  HttpResponse StatusPage() {
    Result<std::string> text = StatusView(*store_);
    if (!text.ok()) return FromStatus(text.status());
    return HttpResponse{200, "application/json", std::move(*text), {}};
  }

  HttpResponse Refused(const Request& req) {
    Result<uint64_t> after = req.Number("after", 0, UINT64_MAX);
    Result<uint64_t> limit = Limit(req);
    if (!after.ok()) return FromStatus(after.status());
    if (!limit.ok()) return FromStatus(limit.status());
    HttpResponse r{200, kNdjson, "", {}};
    uint64_t n = 0, last = 0;
    Status st = store_->quarantine().ListAfter(*after, [&](const RefusedDelivery& d) {
      if (n == *limit || Full(r)) {
        r.headers.emplace_back(kNextAfterHeader, std::to_string(last));
        return false;
      }
      r.body += RefusedLine(d);
      last = d.seq;
      ++n;
      return true;
    });
    if (!st.ok()) return FromStatus(st);
    return r;
  }

  // An online backup (Store::Maintenance::Backup) into `to`, a new or empty
  // directory on this machine; one at a time. Answers when it is written and
  // verified, with the summary `eventfold backup` prints. A receiver that
  // begins to stop abandons it (503, nothing left in `to`): a copy of a big
  // store outlasts the drain, and its answer would be lost with the
  // connection.
  HttpResponse Backup(const Request& req) {
    const std::string* to = req.Param("to");
    if (to == nullptr || to->empty() || (*to)[0] != '/') {
      return Error(400, "to: wants an absolute directory on the server, got \"" +
                            (to ? *to : std::string()) + "\"");
    }
    bool idle = false;
    if (!backup_running_.compare_exchange_strong(idle, true)) {
      return Error(409, "a backup is already running; try again when it has finished");
    }
    BackupOptions bo;
    bo.abandon = opt_.stopping;
    Result<BackupSummary> r = store_->maintenance().Backup(*to, bo);
    backup_running_.store(false);
    if (!r.ok()) {
      // Not empty: the caller's to fix (409); failed verification: 422;
      // anything else (a disk error, abandoned at a stop): 503.
      const Status& st = r.status();
      const int code = st.IsInvalidArgument() ? 409 : st.IsCorruption() ? 422 : 503;
      return Error(code, "to: " + st.message());
    }
    return HttpResponse{200, "application/json", BackupSummaryLine("backup", *r, *to), {}};
  }

  HttpResponse Subscriptions() {
    Result<std::string> text = SubscriptionsView(*store_, opt_.clock);
    if (!text.ok()) return FromStatus(text.status());
    return HttpResponse{200, kNdjson, std::move(*text), {}};
  }

  struct FeedQuery {
    uint64_t after = 0;
    uint64_t limit = 0;
    uint64_t wait_ms = 0;
  };

  // A parked long-poll's query and the answer it owes.
  struct ParkedRead {
    FeedQuery query;
    AnswerCallback done;
  };

  Result<FeedQuery> FeedQueryOf(const Request& req) const {
    Result<uint64_t> after = req.Number("after", 0, UINT64_MAX);
    Result<uint64_t> limit = Limit(req);
    Result<uint64_t> wait_ms = req.Number("wait_ms", 0, static_cast<uint64_t>(opt_.max_wait_ms));
    if (!after.ok()) return after.status();
    if (!limit.ok()) return limit.status();
    if (!wait_ms.ok()) return wait_ms.status();
    return FeedQuery{*after, *limit, *wait_ms};
  }

  // A long-poll: when nothing follows `after`, waits (bounded) for a change.
  // Through the server, such a wait is parked instead (ParkLongPoll); this
  // wait is for a direct Handle() and for the race ParkLongPoll hands back.
  HttpResponse Feed(const Request& req) {
    Result<FeedQuery> q = FeedQueryOf(req);
    if (!q.ok()) return FromStatus(q.status());
    // Waits in slices so a stopping server is not held by a long-poll.
    int64_t left_ms = static_cast<int64_t>(q->wait_ms);
    while (left_ms > 0 && store_->feed().LastSeq() <= q->after && !Stopping()) {
      const int64_t slice = opt_.stopping ? std::min(left_ms, opt_.wait_slice_ms) : left_ms;
      store_->feed().WaitForChanges(q->after, slice * 1000);
      left_ms -= slice;
    }
    return FeedPage(*q);
  }

  // The changes after q.after, up to q.limit (or max_page_bytes), and the
  // next cursor: a page with fewer than q.limit changes is not the last one;
  // an empty page is.
  HttpResponse FeedPage(const FeedQuery& q) {
    HttpResponse r{200, kNdjson, "", {}};
    uint64_t last = q.after;
    Status st = store_->feed().Read(q.after, q.limit, [&](const Change& c) {
      r.body += ChangeToJson(c);
      r.body += '\n';
      last = c.seq;
      return !Full(r);
    });
    if (!st.ok()) return FromStatus(st);
    r.headers.emplace_back(kNextAfterHeader, std::to_string(last));
    return r;
  }

  bool Stopping() const { return opt_.stopping != nullptr && opt_.stopping->load(); }

  // Whether a page's body has reached its byte budget.
  bool Full(const HttpResponse& r) const { return r.body.size() >= opt_.max_page_bytes; }

  Result<uint64_t> Limit(const Request& req) const {
    return req.Number("limit", opt_.default_limit, opt_.max_limit, /*min=*/1);
  }

  Store* const store_;
  AdminApiOptions opt_;
  const std::string token_mac_ = HmacSha256(opt_.token, opt_.token);
  std::atomic<bool> backup_running_{false};
  // Last: its destructor answers what is still parked, through this object.
  FeedLongPolls polls_{&store_->feed(), opt_.stopping,
                       std::chrono::milliseconds(opt_.wait_slice_ms)};
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<std::unique_ptr<Receiver>> MakeAdminApi(Store* store, AdminApiOptions options) {
  if (options.token.empty()) return Status::InvalidArgument("admin API: empty bearer token");
  auto api = std::make_unique<AdminApi>(store, std::move(options));
  if (Status st = api->StartLongPolls(); !st.ok()) return st;
  return std::unique_ptr<Receiver>(std::move(api));
}

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace eventfold::cli
