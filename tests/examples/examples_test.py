#!/usr/bin/env python3
"""Each example handler (examples/python, examples/node, examples/java), end to end through the
real streamcar binary and a real redis-server: successes are acknowledged, a failure is retried
with attempts 2, a permanent failure and a rejection are dead-lettered, nothing stays pending; and
a repeated Idempotency-Key is answered 200 without being processed again.

Usage: examples_test.py STREAMCAR_BINARY REPO_ROOT
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

BINARY, ROOT = sys.argv[1], sys.argv[2]
HANDLERS = {
    "python": [sys.executable, os.path.join(ROOT, "examples", "python", "handler.py")],
    "node": ["node", os.path.join(ROOT, "examples", "node", "handler.js")],
    "java": ["java", os.path.join(ROOT, "examples", "java", "Handler.java")],
}


for language, command in HANDLERS.items():
    work = tempfile.mkdtemp(prefix=f"streamcar-example-{language}-")
    procs = []
    try:
        redis_port, handler_port, admin_port = free_port(), free_port(), free_port()
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--dir", work], stdout=subprocess.DEVNULL))
        log_path = os.path.join(work, "handler.log")
        procs.append(subprocess.Popen([*command, str(handler_port)], stdout=open(log_path, "w"), stderr=subprocess.STDOUT))
        check(wait_port(redis_port) and wait_port(handler_port), f"{language}: handler and redis-server listen")
        with open(os.path.join(work, "streamcar.yaml"), "w") as f:
            f.write(f"""version: 1
redis: {{ url: "redis://127.0.0.1:{redis_port}/0" }}
consumer: {{ name: example }}
admin: {{ listen: "127.0.0.1:{admin_port}" }}
subscriptions:
  - stream: orders
    group: billing
    start: beginning
    handler: {{ url: "http://127.0.0.1:{handler_port}/orders", concurrency: 4 }}
    retry: {{ max_attempts: 3, initial_backoff: 100ms, max_backoff: 200ms }}
""")
        sidecar = subprocess.Popen([BINARY, "run", "-c", os.path.join(work, "streamcar.yaml")],
                                   stderr=open(os.path.join(work, "streamcar.log"), "w"))
        procs.append(sidecar)
        cli = ["redis-cli", "-p", str(redis_port)]
        ids = {}
        for action in ["ok", "fail-once", "fail", "reject", "ok"]:
            ids.setdefault(action, []).append(subprocess.run([*cli, "XADD", "orders", "*", "action", action, "note", "h\u00e9"],
                                                             capture_output=True, text=True, check=True).stdout.strip())

        def settled():
            pending = subprocess.run([*cli, "XPENDING", "orders", "billing"], capture_output=True, text=True).stdout.split()
            dlq = subprocess.run([*cli, "XLEN", "orders:dlq"], capture_output=True, text=True).stdout.strip()
            return pending and pending[0] == "0" and dlq == "2"

        check(eventually(settled), f"{language}: everything settled (nothing pending, 2 dead letters)")
        # Which two: the rejected entry at once, the permanent failure after its 3 attempts.
        listed = subprocess.run([BINARY, "dlq", "list", "-c", os.path.join(work, "streamcar.yaml"),
                                 "--subscription", "orders/billing", "--json"],
                                capture_output=True, text=True, timeout=60)
        check(listed.returncode == 0, f"{language}: dlq list exits 0 ({listed.stderr.strip()})")
        letters = {(d["original_id"], d["reason"], d["attempts"]) for d in json.loads(listed.stdout)["dead_letters"]}
        check(letters == {(ids["reject"][0], "rejected", 1), (ids["fail"][0], "max_attempts", 3)},
              f"{language}: dead letters are the rejected entry (rejected, 1) and the failing one (max_attempts, 3): {letters}")
        log = open(log_path).read()
        for entry_id in ids["ok"]:
            check(f"processed  orders/{entry_id} (attempt 1)" in log, f"{language}: {entry_id} processed once")
        check(f"processed  orders/{ids['fail-once'][0]} (attempt 2)" in log, f"{language}: the failed entry succeeded on attempt 2")
        check(log.count(f"fail       orders/{ids['fail'][0]}") == 3, f"{language}: the permanent failure was tried 3 times")
        # A redelivery of an entry already processed: answered 200, not processed again.
        envelope = json.dumps({"id": ids["ok"][0], "stream": "orders", "group": "billing", "attempts": 2,
                               "payload": {"action": "ok"}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{handler_port}/orders", data=envelope, method="POST",
                                         headers={"Content-Type": "application/json", "Streamcar-Attempts": "2",
                                                  "Idempotency-Key": f"orders/{ids['ok'][0]}"})
        check(urllib.request.urlopen(request, timeout=5).status == 200, f"{language}: a duplicate is answered 200")
        check(eventually(lambda: f"duplicate  orders/{ids['ok'][0]}" in open(log_path).read(), 5)
              and open(log_path).read().count(f"processed  orders/{ids['ok'][0]}") == 1,
              f"{language}: the duplicate was not processed again")
        # A graceful stop: exit 0 and no sanitizer report.
        sidecar.terminate()
        check(sidecar.wait(timeout=60) == 0, f"{language}: streamcar exits 0 on SIGTERM")
        streamcar_log = open(os.path.join(work, "streamcar.log")).read()
        check(not any(m in streamcar_log for m in ("ERROR: AddressSanitizer", "runtime error:",
                                                   "WARNING: ThreadSanitizer", "LeakSanitizer")),
              f"{language}: no sanitizer report in streamcar's log")
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)

summary()
