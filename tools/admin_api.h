// AdminApi: the read API of a running receiver (`eventfold serve
// --admin-listen`), served by a second HttpServer on its own listener, and
// its one action, an online backup.
//
// It implements the Receiver interface only because that is what HttpServer
// serves; it never ingests. Every request but GET /healthz must carry
// `Authorization: Bearer <token>` (compared in constant time; 401 otherwise).
// Answers are the bytes the CLI prints with --data (tools/read_views.h):
//
//   GET /v1/projections/{entity}/{id}     one projection (404 when none)
//   GET /v1/projections?entity=E&after=CURSOR&limit=N
//                                         NDJSON, entity then id; when the
//                                         page is full, header
//                                         Eventfold-Next-After holds the cursor,
//                                         percent-encoded
//   GET /v1/log/{entity}/{id}             the entity's log (404 when none)
//   GET /v1/status                        the status object
//   GET /v1/refused?after=SEQ&limit=N     NDJSON, oldest first, paged
//   GET /v1/subscriptions                 NDJSON
//   GET /v1/feed?after=SEQ&limit=N&wait_ms=T
//                                         NDJSON changes with seq > SEQ; when
//                                         none yet, waits up to T ms (capped)
//                                         for one, parked off the workers
//   POST /v1/backup?to=DIR                an online backup (Store::Backup)
//                                         into DIR, an absolute path on the
//                                         server's machine, new or empty;
//                                         answers once it is written and
//                                         verified, with the summary line
//                                         `eventfold backup` prints; one at
//                                         a time (409 while one runs)
//
// Errors are JSON {"error":"..."} with 400 (bad parameter, naming it), 401,
// 404, 405 (not GET; not POST for a backup), 409 (a backup's DIR is not
// empty, or a backup is running), 422 (the backup failed its verification)
// or 503 (storage error).
//
// Thread-safety: Handle() may be called from any number of threads.

#ifndef EVENTFOLD_TOOLS_ADMIN_API_H_
#define EVENTFOLD_TOOLS_ADMIN_API_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "eventfold/clock.h"
#include "eventfold/receiver.h"
#include "eventfold/store.h"

namespace eventfold::cli {

struct AdminApiOptions {
  // The bearer token every request must present; Make() refuses an empty one.
  std::string token;
  // Page size when `limit` is absent, and the largest accepted.
  size_t default_limit = 1000;
  size_t max_limit = 10000;
  // A page of projections, refusals or changes also ends after the item
  // that takes its body to this many bytes (at least one item a page), so
  // that one request cannot make the receiver's process hold `limit` large
  // items at once. The cursor header says where the next page starts.
  size_t max_page_bytes = size_t{1} << 20;
  // The longest long-poll a client may ask for with wait_ms. Through the
  // HttpServer a waiting poll is parked, holding no worker
  // (tools/feed_long_polls.h); only a direct Handle() call waits in place.
  int64_t max_wait_ms = 30000;
  // For subscription lag; nullptr: SystemClock().
  Clock* clock = nullptr;
  // When set and it turns true (the server is stopping), long-polls end at
  // their next slice instead of holding the server's shutdown for up to
  // max_wait_ms, and a running backup is abandoned (BackupOptions::abandon).
  // nullptr: waits and backups run to their end.
  const std::atomic<bool>* stopping = nullptr;
  // A long-poll waits in slices of this long to notice `stopping`; a parked
  // poll's deadline is kept to within one slice.
  int64_t wait_slice_ms = 200;
};

// The response header carrying the next page's `after` value.
inline constexpr const char* kNextAfterHeader = "Eventfold-Next-After";
// The Server field of the admin listener's every answer (HttpServerOptions::
// server_header): how `--server` tells it from another port, the
// receiver's say, whose 404 would otherwise read as a missing entity.
inline constexpr const char* kAdminServerName = "eventfold-admin";

// `store` must outlive the result. kInvalidArgument without a token;
// kUnavailable when the system refuses its long-poll thread.
[[nodiscard]] Result<std::unique_ptr<Receiver>> MakeAdminApi(Store* store, AdminApiOptions options);

// %XX-escapes every byte but the unreserved ones (RFC 3986 §2.3), for path
// segments and query values; PercentDecode reverses it (nullopt: malformed).
std::string PercentEncode(std::string_view s);
std::optional<std::string> PercentDecode(std::string_view s);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_ADMIN_API_H_
