// NatsCluster: a real 3-node NATS JetStream cluster for the cluster tests.
//
// Each node is a `nats-server` process with JetStream on, listening on free
// loopback ports (127.0.0.1 only) for clients and cluster routes, its store
// directory and log under a scratch directory removed on destruction.
// Start() launches all nodes and waits, with a bounded deadline, until the
// JetStream meta group has a leader (an account-info request answers);
// nothing waits on a fixed sleep, every wait is a poll against a deadline.
// Kill/Pause/Resume/Restart act on one node for the fault tests, and
// StreamLeader names the node leading a stream's raft group; Stop()
// (and the destructor) send SIGTERM, then SIGKILL past a deadline.
//
// The binary is $EVENTFOLD_NATS_SERVER, else `nats-server` on PATH, else
// /usr/sbin/nats-server (Debian's place; scripts/bootstrap.sh installs it).
//
// Thread-safety: one thread drives a NatsCluster.

#ifndef EVENTFOLD_TESTS_CLUSTER_NATS_CLUSTER_H_
#define EVENTFOLD_TESTS_CLUSTER_NATS_CLUSTER_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"

extern char** environ;

namespace eventfold::test_util {

class NatsCluster {
 public:
  static constexpr int kNodes = 3;

  NatsCluster() : dir_("nats") { std::filesystem::create_directories(dir_.path()); }
  ~NatsCluster() { Stop(); }
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;

  // Picks ports, writes each node's config, starts the first `launch` nodes
  // (all by default; the others can join later with Restart) and waits for
  // a JetStream leader. On failure the returned text says why (and includes
  // the nodes' log tails); empty on success.
  std::string Start(std::chrono::seconds deadline = std::chrono::seconds(60), int launch = kNodes) {
    // A node that cannot bind its ports (another process took one between
    // PickPorts and the node's bind) exits at once; the cluster then starts
    // again on fresh ports, a bounded number of times.
    std::string err;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) {
        Stop();
        std::error_code ec;
        for (int i = 0; i < kNodes; ++i) std::filesystem::remove_all(NodeDir(i), ec);
      }
      if (!PickPorts()) return "no free loopback port";
      for (int i = 0; i < kNodes; ++i) WriteConfig(i);
      for (int i = 0; i < launch; ++i) {
        if (err = Launch(i); !err.empty()) return err;
      }
      err = WaitReady(deadline);
      const std::string exited = Exited(launch);
      if (exited.empty()) return err;
      err = exited + "\n" + LogTails();
    }
    return err;
  }

  // Waits until a JetStream request is answered by the cluster, polling
  // every 100 ms until `deadline`.
  std::string WaitReady(std::chrono::seconds deadline = std::chrono::seconds(60)) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    std::string last = "not polled";
    while (std::chrono::steady_clock::now() < until) {
      last = ProbeJetStream();
      if (last.empty()) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "JetStream not ready within " + std::to_string(deadline.count()) + " s: " + last + "\n" +
           LogTails();
  }

  // "nats://127.0.0.1:p1,nats://127.0.0.1:p2,..." for --cluster options.
  std::string Urls() const {
    std::string out;
    for (int i = 0; i < kNodes; ++i) {
      if (i) out += ",";
      out += Url(i);
    }
    return out;
  }
  std::string Url(int i) const {
    return "nats://127.0.0.1:" + std::to_string(nodes_[i].client_port);
  }
  pid_t Pid(int i) const { return nodes_[i].pid; }

  // Fault injection on one node.
  void Kill(int i) {
    Signal(i, SIGKILL);
    Reap(i, std::chrono::seconds(10));
  }
  void Pause(int i) { Signal(i, SIGSTOP); }
  void Resume(int i) { Signal(i, SIGCONT); }
  std::string Restart(int i) { return nodes_[i].pid > 0 ? "node still running" : Launch(i); }

  // The node (0..kNodes-1, from its server name "n<i>") that the running
  // nodes report as leader of `stream`, polling every 100 ms until
  // `deadline`; -1 if none is reported by then.
  int StreamLeader(const std::string& stream,
                   std::chrono::seconds deadline = std::chrono::seconds(20)) const {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (true) {
      for (int i = 0; i < kNodes; ++i) {
        if (nodes_[i].pid <= 0) continue;
        const int leader = AskStreamLeader(i, stream);
        if (leader >= 0) return leader;
      }
      if (std::chrono::steady_clock::now() >= until) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Stops every node: SIGTERM, and SIGKILL for any still alive after 10 s.
  void Stop() {
    for (int i = 0; i < kNodes; ++i) {
      Signal(i, SIGCONT);  // a paused node cannot act on SIGTERM
      Signal(i, SIGTERM);
    }
    for (int i = 0; i < kNodes; ++i) {
      if (!Reap(i, std::chrono::seconds(10))) {
        Signal(i, SIGKILL);
        Reap(i, std::chrono::seconds(10));
      }
    }
  }

  // The last lines of every node's log, for failure messages.
  std::string LogTails() const {
    std::string out;
    for (int i = 0; i < kNodes; ++i) {
      std::string log = ReadFile(LogPath(i));
      if (log.size() > 2000) log = log.substr(log.size() - 2000);
      out += "--- node " + std::to_string(i) + " log tail ---\n" + log;
    }
    return out;
  }

 private:
  struct Node {
    int client_port = 0;
    int route_port = 0;
    pid_t pid = -1;
  };

  // Ports the kernel just handed out on 127.0.0.1, all distinct: every
  // socket stays bound until the last port is picked, so the kernel cannot
  // hand one out twice. Another process could still take one before
  // nats-server binds it; Start() sees that node exit and starts again.
  bool PickPorts() {
    std::array<int, 2 * kNodes> fds;
    fds.fill(-1);
    std::array<int, 2 * kNodes> ports{};
    bool ok = true;
    for (size_t k = 0; k < fds.size() && ok; ++k) {
      fds[k] = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = 0;
      socklen_t len = sizeof(addr);
      ok = fds[k] >= 0 && ::bind(fds[k], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
           ::getsockname(fds[k], reinterpret_cast<sockaddr*>(&addr), &len) == 0;
      if (ok) ports[k] = ntohs(addr.sin_port);
    }
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
    if (!ok) return false;
    for (int i = 0; i < kNodes; ++i) {
      nodes_[i].client_port = ports[2 * i];
      nodes_[i].route_port = ports[2 * i + 1];
    }
    return true;
  }

  // Empty when each of the first `launched` nodes is still running;
  // otherwise names the first that exited (and reaps it).
  std::string Exited(int launched) {
    for (int i = 0; i < launched; ++i) {
      if (nodes_[i].pid <= 0) return "node " + std::to_string(i) + " is not running";
      int status = 0;
      if (::waitpid(nodes_[i].pid, &status, WNOHANG) == nodes_[i].pid) {
        nodes_[i].pid = -1;
        return "node " + std::to_string(i) + " exited during start-up";
      }
    }
    return "";
  }

  static std::string Binary() {
    if (const char* env = std::getenv("EVENTFOLD_NATS_SERVER"); env && *env) return env;
    if (const char* path = std::getenv("PATH")) {
      std::string p = path;
      size_t start = 0;
      while (start <= p.size()) {
        const size_t end = std::min(p.find(':', start), p.size());
        const std::string candidate = p.substr(start, end - start) + "/nats-server";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        start = end + 1;
      }
    }
    return "/usr/sbin/nats-server";
  }

  std::string NodeDir(int i) const { return dir_.path() + "/n" + std::to_string(i); }
  std::string LogPath(int i) const { return NodeDir(i) + ".log"; }
  std::string ConfigPath(int i) const { return NodeDir(i) + ".conf"; }

  void WriteConfig(int i) const {
    std::string routes;
    for (int j = 0; j < kNodes; ++j) {
      if (j == i) continue;
      if (!routes.empty()) routes += ", ";
      routes += "\"nats-route://127.0.0.1:" + std::to_string(nodes_[j].route_port) + "\"";
    }
    std::ofstream conf(ConfigPath(i), std::ios::trunc);
    conf << "server_name: n" << i << "\n"
         << "listen: \"127.0.0.1:" << nodes_[i].client_port << "\"\n"
         << "jetstream { store_dir: \"" << NodeDir(i) << "\" }\n"
         << "cluster {\n  name: eventfold_test\n"
         << "  listen: \"127.0.0.1:" << nodes_[i].route_port << "\"\n"
         << "  routes: [" << routes << "]\n}\n";
  }

  std::string Launch(int i) {
    const std::string binary = Binary();
    std::vector<std::string> args = {binary, "-c", ConfigPath(i)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, LogPath(i).c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      return "cannot start " + binary + " (error " + std::to_string(rc) +
             "); scripts/bootstrap.sh installs nats-server";
    }
    nodes_[i].pid = pid;
    return "";
  }

  void Signal(int i, int sig) {
    if (nodes_[i].pid > 0) ::kill(nodes_[i].pid, sig);
  }

  // Waits (polling) for node i to exit; true once it has been reaped.
  bool Reap(int i, std::chrono::seconds deadline) {
    if (nodes_[i].pid <= 0) return true;
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (true) {
      int status = 0;
      const pid_t r = ::waitpid(nodes_[i].pid, &status, WNOHANG);
      if (r == nodes_[i].pid || (r < 0 && errno == ECHILD)) {
        nodes_[i].pid = -1;
        return true;
      }
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Connects to node i alone (1 s timeouts, no reconnect), runs
  // `ask(js)` with a JetStream context there and returns its status, or
  // the connection's when it fails first.
  template <typename Ask>
  natsStatus AskNode(int i, Ask ask) const {
    natsOptions* opts = nullptr;
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    natsStatus s = natsOptions_Create(&opts);
    const std::string url = Url(i);
    if (s == NATS_OK) s = natsOptions_SetURL(opts, url.c_str());
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 1000);
    if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, false);
    if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
    if (s == NATS_OK) {
      jsOptions jo;
      jsOptions_Init(&jo);
      jo.Wait = 1000;
      s = natsConnection_JetStream(&js, nc, &jo);
    }
    if (s == NATS_OK) s = ask(js);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(opts);
    return s;
  }

  // Empty once some running node answers a JetStream account-info request,
  // which needs an elected meta leader; otherwise the reason.
  std::string ProbeJetStream() const {
    std::string why = "no node running";
    for (int i = 0; i < kNodes; ++i) {
      if (nodes_[i].pid <= 0) continue;
      const natsStatus s = AskNode(i, [](jsCtx* js) {
        jsAccountInfo* ai = nullptr;
        jsErrCode jerr = static_cast<jsErrCode>(0);
        const natsStatus got = js_GetAccountInfo(&ai, js, nullptr, &jerr);
        jsAccountInfo_Destroy(ai);
        return got;
      });
      why = "node " + std::to_string(i) + ": " + natsStatus_GetText(s);
      if (s == NATS_OK) return "";
    }
    return why;
  }

  // The leader of `stream` as node i reports it ("n<k>" -> k); -1 when node i
  // does not answer or names no leader.
  int AskStreamLeader(int i, const std::string& stream) const {
    int leader = -1;
    (void)AskNode(i, [&](jsCtx* js) {
      jsStreamInfo* si = nullptr;
      jsErrCode jerr = static_cast<jsErrCode>(0);
      const natsStatus s = js_GetStreamInfo(&si, js, stream.c_str(), nullptr, &jerr);
      if (s == NATS_OK && si->Cluster != nullptr && si->Cluster->Leader != nullptr) {
        const std::string name = si->Cluster->Leader;
        for (int k = 0; k < kNodes; ++k) {
          if (name == "n" + std::to_string(k)) leader = k;
        }
      }
      jsStreamInfo_Destroy(si);
      return s;
    });
    return leader;
  }

  TempDir dir_;
  std::array<Node, kNodes> nodes_{};
};

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_CLUSTER_NATS_CLUSTER_H_
