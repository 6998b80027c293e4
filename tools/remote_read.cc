// The HTTP client is cpp-httplib's blocking client: it is already linked into
// the tool for the simulated sender, and a command makes one request at a
// time, so an event loop (Beast's client) would only add plumbing.

#include "tools/remote_read.h"

#include <httplib.h>
#include <simdjson.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>

#include "tools/admin_api.h"
#include "tools/cli_common.h"
#include "tools/read_views.h"

namespace eventfold::cli {
namespace {

// How long a long-poll asks the server to wait, and how much longer the
// client waits for its answer before giving up.
constexpr int64_t kFollowWaitMs = 10000;
constexpr int64_t kReadSlackMs = 60000;
constexpr size_t kPage = 1000;
// How long --follow waits before asking again a server that did not answer.
constexpr int64_t kFollowRetryMs = 1000;

struct Answer {
  std::string body;
  std::string next_after;    // the Eventfold-Next-After header; empty: last page
  bool unreachable = false;  // no answer at all (connection refused, lost, timed out)
};

// The "error" string of the admin API's error body {"error":"..."}; nullopt
// when the body is not that.
std::optional<std::string> ErrorText(const std::string& body) {
  simdjson::dom::parser parser;
  std::string_view text;
  if (parser.parse(body)["error"].get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
  return std::string(text);
}

// The admin listener's address: "http://HOST:PORT", a trailing '/' allowed.
// Checked here rather than by the HTTP client, which throws on a scheme or
// port it cannot use.
struct ServerAddress {
  std::string host;
  int port = 0;
};
std::optional<ServerAddress> ParseServerUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return std::nullopt;
  url.remove_prefix(kScheme.size());
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  const size_t colon = url.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  if (url.find('/') != std::string_view::npos) return std::nullopt;  // a path
  if (url.find('@') != std::string_view::npos) return std::nullopt;  // user info
  ServerAddress a{std::string(url.substr(0, colon)), 0};
  const std::string_view digits = url.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), a.port);
  if (ec != std::errc() || end != digits.data() + digits.size() || a.port < 1 || a.port > 65535) {
    return std::nullopt;
  }
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') {
    a.host = a.host.substr(1, a.host.size() - 2);  // [::1]
  }
  return a;
}

// GETs `target`; on 200 fills `out` and returns kExitOk, otherwise prints why
// and returns the exit code (404: kExitRefused, as a missing entity with
// --data).
// With `quiet`, a request that got no answer at all (out->unreachable) is
// not reported.
int Get(const std::string& server_url, const std::string& target, Answer* out, int64_t wait_ms = 0,
        bool post = false, bool quiet = false) {
  // Targets begin with '/': "http://host:port/" names the same server.
  std::string server = server_url;
  while (!server.empty() && server.back() == '/') server.pop_back();
  const std::optional<ServerAddress> address = ParseServerUrl(server_url);
  if (!address) {
    std::cerr << "eventfold: --server wants http://HOST:PORT, got " << server_url << "\n";
    return kExitError;
  }
  httplib::Client client(address->host, address->port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::milliseconds(wait_ms + kReadSlackMs));
  const char* token = std::getenv(kTokenEnv);
  httplib::Headers headers;
  if (token != nullptr && *token != '\0') {
    headers.emplace("Authorization", std::string("Bearer ") + token);
  }
  const auto sent = std::chrono::steady_clock::now();
  httplib::Result res =
      post ? client.Post(target, headers, "", "text/plain") : client.Get(target, headers);
  if (!res) {
    out->unreachable = true;
    if (quiet) return kExitError;
    std::cerr << "eventfold: " << server << target << ": ";
    const int64_t timeout_ms = wait_ms + kReadSlackMs;
    const int64_t waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - sent)
                                  .count();
    if (res.error() == httplib::Error::Connection) {
      std::cerr << "cannot connect (is `eventfold serve --admin-listen` running there?)";
    } else if (res.error() == httplib::Error::Read && waited_ms < timeout_ms) {
      // Closed before the client's own deadline: the server stopped (a
      // SIGTERM's drain closes what is still running after 10 s), not a
      // wait that ran out.
      std::cerr << "the connection was closed after " << waited_ms / 1000
                << " s, before a whole answer (was the server stopped?)";
      if (post) {
        std::cerr << "; the server may have finished the backup all the same: see what the "
                     "directory holds before running it again";
      }
    } else if (res.error() == httplib::Error::Read) {
      std::cerr << "no whole answer within " << timeout_ms / 1000
                << " s (the admin listener is busy)";
    } else {
      std::cerr << httplib::to_string(res.error());
    }
    std::cerr << "\n";
    return kExitError;
  }
  if (res->get_header_value("Server") != kAdminServerName) {
    std::cerr << "eventfold: " << server << " is not an eventfold admin listener (it answered "
              << res->status << " without naming itself " << kAdminServerName
              << "); --server takes the address of `serve --admin-listen`\n";
    return kExitError;
  }
  if (res->status == 404) {
    // A miss, told as the command tells it with --data: the server's
    // reason, a line each.
    if (std::optional<std::string> why = ErrorText(res->body)) {
      PrintReasonLines(*why);
      return kExitRefused;
    }
  }
  if (res->status != 200) {
    std::cerr << "eventfold: " << server << " answered " << res->status << ": " << res->body;
    if (res->status == 401 && (token == nullptr || *token == '\0'))
      std::cerr << " (set " << kTokenEnv << ")";
    std::cerr << "\n";
    // 404: a missing entity; 400 and 409: a refused backup target; 422: a
    // backup that failed its verification (as with --data). A read's 400
    // (say, a token no header can carry) is an error, as a 401 is.
    const bool refused = res->status == 404 ||
                         (post && (res->status == 400 || res->status == 409 || res->status == 422));
    return refused ? kExitRefused : kExitError;
  }
  out->body = std::move(res->body);
  out->next_after = res->get_header_value(kNextAfterHeader);
  return kExitOk;
}

// How long `backup --server` waits for the server's answer: the backup is
// copied and verified before the server answers.
constexpr int64_t kBackupWaitMs = 6LL * 3600 * 1000;

// One request, its body printed as is.
int PrintOne(const std::string& server, const std::string& target) {
  Answer a;
  const int rc = Get(server, target, &a);
  if (rc == kExitOk) std::cout << a.body << std::flush;
  return rc;
}

// Every page of a paged listing, `target` ending in "?...&" or "?".
int PrintPages(const std::string& server, const std::string& target) {
  std::string after;
  bool first = true;
  while (first || !after.empty()) {
    std::string page = target + "limit=" + std::to_string(kPage);
    if (!first) page += "&after=" + PercentEncode(after);
    first = false;
    Answer a;
    const int rc = Get(server, page, &a);
    if (rc != kExitOk) return rc;
    std::cout << a.body << std::flush;
    // The server percent-encodes the cursor (an id may hold any byte), and
    // cpp-httplib (0.11, Debian 12) decodes a header's value as it reads
    // it: this is the cursor's bytes (tests/tools/admin_api_test.cc).
    after = a.next_after;
  }
  return kExitOk;
}

// The seq of a feed page's first change (each line is a change, {"seq":N,
// ...}); nullopt for an empty page or a first line that is no change.
std::optional<uint64_t> FirstSeq(std::string_view page) {
  const std::string line(page.substr(0, page.find('\n')));
  simdjson::dom::parser parser;
  uint64_t seq = 0;
  if (line.empty() || parser.parse(line)["seq"].get_uint64().get(seq) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return seq;
}

std::string EntityPath(const std::string& entity, const std::string& id) {
  return PercentEncode(entity) + "/" + PercentEncode(id);
}

}  // namespace

void AddServerOption(CLI::App* cmd, std::string* server) {
  cmd->add_option("--server", *server,
                  "read from a running `eventfold serve` admin listener (http://HOST:PORT; "
                  "token from " +
                      std::string(kTokenEnv) + ") instead of --data")
      ->excludes("--data")
      ->check([](const std::string& url) {
        return ParseServerUrl(url)
                   ? std::string()
                   : "--server wants http://HOST:PORT (no user, no path), got \"" + url + "\"";
      });
}

namespace {

// One JSON document: the body is the document and a newline.
int GetDocument(const std::string& server, const std::string& target, std::string* json) {
  Answer a;
  const int rc = Get(server, target, &a);
  if (rc != kExitOk) return rc;
  if (!a.body.empty() && a.body.back() == '\n') a.body.pop_back();
  *json = std::move(a.body);
  return kExitOk;
}

}  // namespace

int RemoteProjection(const std::string& server, const std::string& entity, const std::string& id,
                     std::string* json) {
  return GetDocument(server, "/v1/projections/" + EntityPath(entity, id), json);
}

int RemoteList(const std::string& server, const std::string& entity) {
  std::string target = "/v1/projections?";
  if (!entity.empty()) target += "entity=" + PercentEncode(entity) + "&";
  return PrintPages(server, target);
}

int RemoteLog(const std::string& server, const std::string& entity, const std::string& id,
              std::string* json) {
  return GetDocument(server, "/v1/log/" + EntityPath(entity, id), json);
}

int RemoteStatus(const std::string& server) { return PrintOne(server, "/v1/status"); }

int RemoteRefused(const std::string& server) { return PrintPages(server, "/v1/refused?"); }

int RemoteSubscriptions(const std::string& server) {
  Answer a;
  const int rc = Get(server, "/v1/subscriptions", &a);
  if (rc != kExitOk) return rc;
  std::cout << a.body << std::flush;
  if (a.body.empty()) std::cerr << "eventfold: " << kNoSubscriptionsNote << "\n";
  return kExitOk;
}

int RemoteBackup(const std::string& server, const std::string& out) {
  Answer a;
  const int rc =
      Get(server, "/v1/backup?to=" + PercentEncode(out), &a, kBackupWaitMs, /*post=*/true);
  if (rc == kExitOk) std::cout << a.body << std::flush;
  return rc;
}

// --follow's stop: SIGINT or SIGTERM ends it with exit 0, as with --data.
// The client library retries a wait a signal interrupts, so a long-poll would
// hold the stop for up to kFollowWaitMs: the handler exits itself, unless a
// page is being printed; then the loop exits once it is (no line is cut).
// Both run on the one thread, so `printing` is never read mid-change.
namespace {
std::atomic<bool> printing{false};
std::atomic<bool> stop_requested{false};
void StopRemoteFollow(int) {
  stop_requested.store(true);
  if (!printing.load()) _exit(kExitOk);
}
}  // namespace

int RemoteFeed(const std::string& server, uint64_t from, bool follow) {
  uint64_t after = from > 0 ? from - 1 : 0;
  // Told by the first change, as with --data (FeedTrimmedNote).
  bool noted = false;
  if (follow) {
    signal(SIGINT, StopRemoteFollow);
    signal(SIGTERM, StopRemoteFollow);
  }
  while (true) {
    std::string after_text = std::to_string(after);
    const int64_t wait_ms = follow ? kFollowWaitMs : 0;
    Answer a;
    const int rc = Get(server,
                       "/v1/feed?after=" + after_text + "&limit=" + std::to_string(kPage) +
                           "&wait_ms=" + std::to_string(wait_ms),
                       &a, wait_ms);
    if (rc != kExitOk && follow && a.unreachable) {
      // A receiver restarting (a deploy) is waited for, as --data waits
      // for a busy store; a stop signal ends the wait.
      std::cerr << "eventfold: retrying every " << kFollowRetryMs / 1000 << " s\n";
      do {
        usleep(static_cast<useconds_t>(kFollowRetryMs * 1000));
        a = Answer{};
        (void)Get(server, "/v1/status", &a, 0, /*post=*/false, /*quiet=*/true);
      } while (a.unreachable);
      continue;  // the same page again; any other answer is told there
    }
    if (rc != kExitOk) return rc;
    if (!noted && !a.body.empty()) {
      noted = true;
      const std::string note = FeedTrimmedNote(after + 1, FirstSeq(a.body).value_or(after + 1));
      if (!note.empty()) PrintReasonLines(note);
    }
    printing.store(true);
    std::cout << a.body << std::flush;
    printing.store(false);
    if (stop_requested.load()) return kExitOk;
    uint64_t next = after;
    auto [end, ec] =
        std::from_chars(a.next_after.data(), a.next_after.data() + a.next_after.size(), next);
    if (ec != std::errc() || end != a.next_after.data() + a.next_after.size()) {
      std::cerr << "eventfold: " << server << " sent no usable " << kNextAfterHeader << "\n";
      return kExitError;
    }
    // A page ends at kPage changes or at the server's byte budget
    // (AdminApiOptions::max_page_bytes): only an empty one is the end.
    const bool empty = next == after;
    after = next;
    if (empty && !follow) return kExitOk;
  }
}

}  // namespace eventfold::cli
