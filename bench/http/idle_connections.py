#!/usr/bin/env python3
"""Idle keep-alive connections against a running `eventfold serve`.

Opens N connections to HOST:PORT, sends one GET /healthz on each and reads
its answer, so every connection has been served once and is then held idle.
Prints the server's RSS (from /proc/PID/status) before and after, then checks
that requests on a fresh connection are still answered. Loopback only.

  idle_connections.py --port P --pid PID [--connections 10000]
"""
import argparse
import resource
import socket
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--connections", type=int, default=10000)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    request = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"
    before = rss_kib(a.pid)
    held = []
    start = time.monotonic()
    for _ in range(a.connections):
        s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
        s.sendall(request)
        held.append(s)
    answered = 0
    for s in held:
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(b"}"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        answered += data.startswith(b"HTTP/1.1 200")
    after = rss_kib(a.pid)
    # Still serving while they are held.
    probe = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    probe_ok = 0
    latencies = []
    for _ in range(100):
        t = time.monotonic()
        probe.sendall(request)
        data = b""
        while not data.endswith(b"}"):
            data += probe.recv(4096)
        latencies.append((time.monotonic() - t) * 1000)
        probe_ok += data.startswith(b"HTTP/1.1 200")
    latencies.sort()
    print(f"connections held: {len(held)}, answered 200: {answered}, "
          f"opened in {time.monotonic() - start:.1f} s")
    print(f"server RSS: before {before / 1024:.1f} MiB, after {after / 1024:.1f} MiB, "
          f"growth {(after - before) / 1024:.1f} MiB")
    print(f"probe while held: {probe_ok}/100 answered 200, "
          f"p50 {latencies[49]:.2f} ms, p99 {latencies[98]:.2f} ms")
    for s in held:
        s.close()


if __name__ == "__main__":
    main()
