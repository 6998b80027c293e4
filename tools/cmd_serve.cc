// eventfold serve --data DIR --listen HOST:PORT --secret S... : the HTTP
// receiver until SIGTERM or SIGINT, then a clean drain and close.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>

#include "core/parse_number.h"
#include "eventfold/cluster.h"
#include "eventfold/http_server.h"
#include "eventfold/receiver.h"
#include "tools/admin_api.h"
#include "tools/cli_common.h"
#include "tools/cluster_flags.h"
#include "tools/secrets.h"
#include "tools/store_waits.h"

namespace eventfold::cli {
namespace {

struct ServeArgs {
  std::string dir;
  std::string listen = "127.0.0.1:8080";
  std::vector<std::string> secrets, secret_files;
  bool allow_unsigned = false;
  int64_t tolerance = 300;
  size_t max_in_flight = 256;
  size_t max_body = 1 << 20;
  int threads = 64;
  int io_threads = 2;
  size_t max_connections = 16384;
  // Cluster mode: publish to JetStream instead of storing (docs/CLUSTER.md).
  std::string cluster_urls, stream = "eventfold";
  int64_t publish_timeout_ms = 2000;
  // The admin read API (tools/admin_api.h): off unless --admin-listen.
  std::string admin_listen;
  std::string admin_token_file;
  bool admin_allow_remote = false;
};

// The admin API's bearer token when no --admin-token-file is given.
constexpr const char* kAdminTokenEnv = "EVENTFOLD_ADMIN_TOKEN";
// Like signing secrets, a token shorter than this is refused as guessable.
constexpr size_t kMinAdminTokenBytes = 16;

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// The admin token from --admin-token-file (first line) or the environment;
// an error naming the source and what is wrong when there is none, it is
// too short or no header could carry it.
Result<std::string> AdminToken(const ServeArgs& a) {
  std::string token, source;
  const bool from_file = !a.admin_token_file.empty();
  // The token is the file's first line, read alone (docs/RECEIVER.md): a
  // file whose first line holds none is told so, not as a short token.
  const std::string first_line_only =
      "; the token must be on the file's first line (a token file skips no blank lines or # "
      "comments, as a --secret-file does)";
  if (from_file) {
    std::ifstream in(a.admin_token_file);
    if (!in) {
      return Status::InvalidArgument("--admin-token-file: cannot read " + a.admin_token_file +
                                     ": " + std::strerror(errno));
    }
    source = "--admin-token-file " + a.admin_token_file;
    if (!std::getline(in, token)) {
      return Status::InvalidArgument(source + ": the file is empty" + first_line_only);
    }
  } else if (const char* env = std::getenv(kAdminTokenEnv)) {
    token = env;
    source = kAdminTokenEnv;
  } else {
    return Status::InvalidArgument(std::string("--admin-listen needs a bearer token: ") +
                                   "--admin-token-file FILE or " + kAdminTokenEnv);
  }
  // Surrounding white space is no part of a header's value (RFC 9110
  // §5.5): a token kept with it could never be presented.
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!token.empty() && space(token.back())) token.pop_back();
  token.erase(0, std::find_if_not(token.begin(), token.end(), space) - token.begin());
  if (token.empty()) {
    return Status::InvalidArgument(
        from_file ? source + ": its first line is empty" + first_line_only
                  : std::string("--admin-listen needs a bearer token: ") + source + " is empty");
  }
  // A comment where the token should be is refused as one when it would be
  // refused anyway (with its spaces, or as short); a token may begin with '#'.
  const auto refuse = [&](const std::string& why) {
    if (from_file && token[0] == '#') {
      return Status::InvalidArgument(source + ": its first line is a # comment, not a token" +
                                     first_line_only);
    }
    return Status::InvalidArgument(source + ": " + why);
  };
  // It travels in a header field: visible ASCII without spaces (RFC 6750
  // §2.1's b64token is a subset of that).
  for (const char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return refuse("the admin token must be visible ASCII characters without spaces");
    }
  }
  if (token.size() < kMinAdminTokenBytes) {
    return refuse("the admin token must be at least " + std::to_string(kMinAdminTokenBytes) +
                  " bytes");
  }
  return token;
}

// Idle keep-alive connections cost a descriptor each, not a thread: lift the
// soft limit on descriptors to the hard one so thousands of them fit.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

bool SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  // The one name taken without a resolver: it is loopback everywhere.
  if (*host == "localhost") *host = "127.0.0.1";
  std::optional<uint16_t> parsed =
      ParseDecimal<uint16_t>(std::string_view(listen).substr(colon + 1));
  if (!parsed) return false;
  *port = *parsed;
  return !host->empty();
}

int Serve(const ServeArgs& a) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(a.listen, &host, &port)) {
    std::cerr << "eventfold: --listen wants HOST:PORT, got " << a.listen << "\n";
    return kExitError;
  }
  Result<std::vector<std::string>> secrets = CollectSecrets(a.secrets, a.secret_files);
  if (!secrets.ok()) {
    std::cerr << "eventfold: " << secrets.status().message() << "\n";
    return kExitError;
  }
  if (secrets->empty() && !a.allow_unsigned) {
    std::cerr << "eventfold: serve needs --secret, --secret-file or " << kSecretsEnv
              << " (or --allow-unsigned behind a verifying proxy)\n";
    return kExitError;
  }
  ReceiverOptions ro;
  ro.secrets = *secrets;
  ro.allow_unsigned = a.allow_unsigned;
  ro.tolerance_seconds = a.tolerance;
  ro.max_in_flight = a.max_in_flight;
  ro.max_body_bytes = a.max_body;
  // Every flag is checked before Store::Open creates --data: a refused
  // secret must leave no empty store behind.
  if (Status valid = Receiver::ValidateOptions(ro); !valid.ok()) {
    // The body limit by its flag's name.
    std::string why = valid.message();
    constexpr std::string_view kOption = "max_body_bytes:";
    if (why.starts_with(kOption)) why = "--max-body:" + why.substr(kOption.size());
    std::cerr << "eventfold: " << why << "\n";
    return kExitError;
  }
  if (a.threads <= 0) {
    std::cerr << "eventfold: --threads must be > 0, got " << a.threads << "\n";
    return kExitError;
  }
  HttpServerOptions so;
  so.host = host;
  so.port = port;
  so.workers = a.threads;
  so.max_body_bytes = a.max_body;
  // Room for at least one body of the largest size.
  so.max_body_memory = std::max(so.max_body_memory, a.max_body);
  so.io_threads = a.io_threads;
  so.max_connections = a.max_connections;
  so.access_log = &std::cerr;
  if (Status valid = HttpServer::ValidateOptions(so); !valid.ok()) {
    // Named by the flag: --listen for the host, else --io-threads or
    // --max-connections (the option's name with dashes).
    std::string why = valid.message();
    if (why.starts_with("host:")) {
      why = "--listen: host" + why.substr(5);
    } else {
      for (char& c : why) c = c == '_' ? '-' : c;
      why = "--" + why;
    }
    std::cerr << "eventfold: " << why << "\n";
    return kExitError;
  }

  std::string admin_host, admin_token;
  int admin_port = 0;
  if (!a.admin_listen.empty()) {
    if (!a.cluster_urls.empty()) {
      std::cerr << "eventfold: --admin-listen reads a local store; a --cluster receiver has "
                   "none (read a fold worker's stores with --data)\n";
      return kExitError;
    }
    if (!SplitHostPort(a.admin_listen, &admin_host, &admin_port)) {
      std::cerr << "eventfold: --admin-listen wants HOST:PORT, got " << a.admin_listen << "\n";
      return kExitError;
    }
    if (!IsLoopback(admin_host) && !a.admin_allow_remote) {
      std::cerr << "eventfold: --admin-listen " << a.admin_listen
                << " is not a loopback address; the read API exposes every stored event, so "
                   "pass --admin-allow-remote to mean it\n";
      return kExitError;
    }
    Result<std::string> token = AdminToken(a);
    if (!token.ok()) {
      std::cerr << "eventfold: " << token.status().message() << "\n";
      return kExitError;
    }
    admin_token = std::move(*token);
  }

  // Block the stop signals before any thread starts; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // The store applies its own body limit too (Options::max_body_bytes,
  // default 1 MiB): --max-body must raise both, or larger bodies still 413.
  // In cluster mode the receiver's sink publishes to JetStream instead.
  std::unique_ptr<Store> store;
  std::unique_ptr<IngestSink> sink;
  if (!a.cluster_urls.empty()) {
    std::optional<ClusterOptions> cluster = ClusterFromFlags(a.cluster_urls, a.stream);
    if (!cluster) return kExitError;
    ClusterSinkOptions sink_options;
    sink_options.publish_timeout_ms = a.publish_timeout_ms;
    Result<std::unique_ptr<IngestSink>> opened = OpenClusterSink(*cluster, sink_options);
    if (!opened.ok()) {
      std::cerr << "eventfold: " << opened.status().ToString() << "\n";
      return kExitError;
    }
    sink = std::move(*opened);
  } else {
    Options options;
    options.max_body_bytes = a.max_body;
    // A `feed --follow` may hold the store for a moment: wait that out.
    Result<std::unique_ptr<Store>> opened = OpenWhenFree(a.dir, options);
    if (!opened.ok()) {
      std::cerr << "eventfold: " << opened.status().ToString() << "\n";
      return kExitError;
    }
    store = std::move(*opened);
  }
  Result<std::unique_ptr<Receiver>> receiver =
      sink ? Receiver::Make(sink.get(), ro) : Receiver::Make(store.get(), ro);
  if (!receiver.ok()) {
    std::cerr << "eventfold: " << receiver.status().message() << "\n";
    return kExitError;
  }
  Receiver* rx = receiver->get();

  RaiseOpenFileLimit();
  HttpServer server(rx, so);
  Status st = server.Start();
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.message() << "\n";
    return kExitError;
  }

  // The read API: a second HttpServer, same strict limits, its own small
  // worker pool (a long-poll holds a worker while it waits).
  std::atomic<bool> admin_stopping{false};
  std::unique_ptr<Receiver> admin_api;
  std::unique_ptr<HttpServer> admin;
  if (!a.admin_listen.empty() && store) {
    AdminApiOptions ao;
    ao.token = admin_token;
    ao.stopping = &admin_stopping;
    Result<std::unique_ptr<Receiver>> api = MakeAdminApi(store.get(), ao);
    if (!api.ok()) {
      std::cerr << "eventfold: " << api.status().message() << "\n";
      server.Stop();
      return kExitError;
    }
    admin_api = std::move(*api);
    HttpServerOptions as;
    as.host = admin_host;
    as.port = admin_port;
    // An operator's reads, not a sender's traffic: a few workers, a short
    // queue, no bodies. A waiting long-poll holds no worker (it is parked),
    // only its connection, so the cap leaves room for many followers.
    as.workers = 8;
    as.worker_queue = 64;
    as.max_connections = 1024;
    as.max_body_bytes = 1024;
    as.pass_query = true;
    // A follower that hangs up mid long-poll frees its socket at once.
    as.close_on_hang_up = true;
    as.server_header = kAdminServerName;
    as.access_log = &std::cerr;
    admin = std::make_unique<HttpServer>(admin_api.get(), as);
    st = admin->Start();
    if (!st.ok()) {
      std::cerr << "eventfold: --admin-listen: " << st.message() << "\n";
      server.Stop();
      return kExitError;
    }
    std::cerr << "eventfold: admin API on " << admin_host << ":" << admin->port() << std::endl;
  }
  // Last, after the admin line: tests and scripts take this line as "ready".
  std::cerr << "eventfold: listening on " << host << ":" << server.port() << " ("
            << (sink ? "cluster " + a.cluster_urls : "store " + a.dir) << ", " << secrets->size()
            << " secret(s))" << std::endl;

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cerr << "eventfold: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": draining in-flight requests" << std::endl;
  admin_stopping.store(true);
  if (admin) admin->Stop();
  server.Stop();
  receiver->reset();
  store.reset();
  sink.reset();
  std::cerr << "eventfold: stopped; store closed" << std::endl;
  return kExitOk;
}

}  // namespace

void AddServeCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("serve", "run the HTTP webhook receiver");
  auto a = std::make_shared<ServeArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: any)")
      ->capture_default_str();
  cmd->add_option("--secret", a->secrets, "signing secret (repeat for rotation)")
      ->allow_extra_args(false);
  cmd->add_option("--secret-file", a->secret_files, "file of secrets, one per line")
      ->allow_extra_args(false);
  cmd->add_flag("--allow-unsigned", a->allow_unsigned,
                "accept unsigned deliveries (only behind a verifying proxy)");
  cmd->add_option("--tolerance", a->tolerance, "signature timestamp window, seconds")
      ->capture_default_str()
      ->check(WithinRange(0, std::numeric_limits<int64_t>::max()));
  // CLI11 reads "-1" into these unsigned options as 2^64 - 1: no limit at
  // all. And no delivery in flight would answer every one 429.
  constexpr int64_t kNoMore = std::numeric_limits<int64_t>::max();
  cmd->add_option("--max-in-flight", a->max_in_flight, "deliveries stored at once before 429")
      ->capture_default_str()
      ->check(WithinRange(1, kNoMore));
  cmd->add_option("--max-body", a->max_body, "largest body in bytes before 413")
      ->capture_default_str()
      ->check(WithinRange(1, kNoMore));
  cmd->add_option("--threads", a->threads,
                  "worker threads for what the event loops do not do themselves: GETs, bodies "
                  "over 64 KiB, and in cluster mode every delivery and refusal (verified, "
                  "published or quarantined)")
      ->capture_default_str();
  cmd->add_option("--io-threads", a->io_threads,
                  "event-loop threads reading and writing HTTP, and verifying and refusing "
                  "deliveries for the store")
      ->capture_default_str();
  cmd->add_option("--max-connections", a->max_connections,
                  "open connections beyond which new ones get 503 and a close")
      ->capture_default_str()
      ->check(WithinRange(1, kNoMore));
  cmd->add_option("--cluster", a->cluster_urls,
                  "cluster mode: comma-separated nats:// URLs; publish instead of storing");
  cmd->add_option("--stream", a->stream, "cluster mode: intake stream name")
      ->check(StreamNameCheck())
      ->capture_default_str();
  cmd->add_option("--publish-timeout-ms", a->publish_timeout_ms,
                  "cluster mode: wait this long for JetStream's ack before answering 503")
      ->capture_default_str();
  cmd->add_option("--admin-listen", a->admin_listen,
                  "HOST:PORT of the admin read API (off when absent; loopback only unless "
                  "--admin-allow-remote)");
  cmd->add_option("--admin-token-file", a->admin_token_file,
                  std::string("file whose first line is the admin API's bearer token (default: ") +
                      kAdminTokenEnv + ")");
  cmd->add_flag("--admin-allow-remote", a->admin_allow_remote,
                "let --admin-listen bind a non-loopback address");
  cmd->callback([=] { *action = [=] { return Serve(*a); }; });
}

}  // namespace eventfold::cli
