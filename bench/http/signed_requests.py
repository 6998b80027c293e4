#!/usr/bin/env python3
"""Pre-signed webhook requests for wrk, in the format of eventfold-bench's
signed HTTP figure: files requests-<i>.bin of entries "<length>\\n<request>",
one file per wrk thread, and send.lua streaming them.

  signed_requests.py --dir OUT --secret S --port P [--count 300000] [--threads 2]
"""
import argparse
import hashlib
import hmac
import os
import time

LUA = r'''
local counter = 0
function setup(thread)
  thread:set("file_id", counter)
  counter = counter + 1
end
local f = nil
function init(args)
  f = assert(io.open(REQUEST_DIR .. "/requests-" .. file_id .. ".bin", "rb"))
end
function request()
  local line = f:read("*l")
  if not line then
    f:seek("set", 0)
    line = f:read("*l")
  end
  return f:read(tonumber(line))
end
function done(summary, latency, requests)
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%.1f p99_us=%.1f errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.status + summary.errors.timeout))
end
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=300000)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    t = int(time.time())
    files = [open(os.path.join(a.dir, f"requests-{i}.bin"), "wb") for i in range(a.threads)]
    key = a.secret.encode()
    for n in range(a.count):
        body = ('{"event_id":"evt_%d","type":"receipt.issued","occurred_at":"2026-11-29T10:15:30Z",'
                '"data":{"receipt_id":"rcp_%d","amount":%d,"currency":"THB"}}' % (n, n, 100 + n % 900))
        sig = hmac.new(key, f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
        req = (f"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\n"
               f"Content-Type: application/json\r\nX-RR-Event-Id: evt_{n}\r\n"
               f"X-RR-Signature: t={t},v1={sig}\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()
        files[n % a.threads].write(b"%d\n" % len(req) + req)
    for f in files:
        f.close()
    with open(os.path.join(a.dir, "send.lua"), "w") as f:
        f.write(f'REQUEST_DIR = "{a.dir}"\n' + LUA)


if __name__ == "__main__":
    main()
