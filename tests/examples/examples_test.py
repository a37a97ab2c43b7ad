#!/usr/bin/env python3
"""Each example handler (examples/python, examples/node, examples/java), end to end through the
real streamcar binary and a real redis-server: successes are acknowledged, a failure is retried
with attempts 2, a permanent failure and a rejection are dead-lettered, nothing stays pending; and
a repeated Idempotency-Key is answered 200 without being processed again.

Fences (SPEC 9): a sharded subscription (2 shards) is delivered through the same sidecar, and the
handler applies each entry with its shard's installed fence; a direct request with a lower fence
(in the headers, or only in the JSON body) is answered 409 and not applied, while the current
fence and a plain request are still served; and when the handler holds a fence above the one
Redis installed, the sidecar's own request is refused, never acknowledged, retried and finally
dead-lettered (max_attempts, status 409), not lost.

Signatures (SPEC 11): the sidecar runs with handler.auth.hmac_secret and each handler with the same
STREAMCAR_HMAC_SECRET, so everything above also proves that the sidecar's signatures verify (every
delivery and the dead letters depend on it); the test's own direct requests are signed the same
way. Requests without a signature, with another secret's, over a body changed after signing, or
with a timestamp 10 minutes old are answered 401 and not processed.

Usage: examples_test.py STREAMCAR_BINARY REPO_ROOT
"""
import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

BINARY, ROOT = sys.argv[1], sys.argv[2]
HANDLERS = {
    "python": [sys.executable, os.path.join(ROOT, "examples", "python", "handler.py")],
    "node": ["node", os.path.join(ROOT, "examples", "node", "handler.js")],
    "java": ["java", os.path.join(ROOT, "examples", "java", "Handler.java")],
}
SHARDS = 2
SECRET = "examples-secret-0123456789abcdef"
# The sidecar's configuration reads it as ${HMAC_SECRET}: `run` and the CLI commands alike.
os.environ["HMAC_SECRET"] = SECRET


def signed(body, headers, t=None, secret=SECRET):
    """`headers` plus the Streamcar-Signature of `body` (bytes) as the sidecar computes it."""
    t = str(int(time.time()) if t is None else t)
    mac = hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {**headers, "Streamcar-Signature": f"t={t},v1={mac}"}


def post_raw(port, path, body, headers):
    """POSTs `body` (bytes) with exactly `headers`; returns (status, body)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def post(port, envelope, headers):
    """POSTs an envelope to the handler, signed; returns (status, body)."""
    body = json.dumps(envelope).encode()
    return post_raw(port, "/ledger", body, signed(body, headers))


def check_signatures(language, handler_port, log_path):
    """Requests the handler must refuse (401) and not process: unsigned, another secret, a body
    changed after signing, a stale timestamp."""
    def envelope(entry_id):
        return json.dumps({"id": entry_id, "stream": "orders", "group": "billing", "attempts": 1,
                           "payload": {"action": "ok"}}).encode()

    def headers(entry_id):
        return {"Streamcar-Attempts": "1", "Idempotency-Key": f"orders/{entry_id}"}

    cases = {
        "9-1": headers("9-1"),
        "9-2": signed(envelope("9-2"), headers("9-2"), secret="another-secret-0123456789abcdef"),
        "9-3": signed(envelope("9-3").replace(b'"ok"', b'"ok" '), headers("9-3")),
        "9-4": signed(envelope("9-4"), headers("9-4"), t=int(time.time()) - 600),
    }
    for entry_id, case_headers in cases.items():
        status, body = post_raw(handler_port, "/orders", envelope(entry_id), case_headers)
        check(status == 401, f"{language}: request {entry_id} is refused with 401: {status} {body!r}")
    check(eventually(lambda: open(log_path).read().count("unsigned   orders/9-") == 4, 5)
          and "processed  orders/9-" not in open(log_path).read(),
          f"{language}: the four refusals were logged and none was processed")


def check_fences(language, cli, handler_port, log_path):
    """The sharded subscription "ledger" (SPEC 9) through the sidecar, then stale fences sent directly."""
    shard_ids = {shard: [] for shard in range(SHARDS)}
    for n in range(8):  # both shards get entries: crc32 of k0..k7 mod 2 is 0 for four and 1 for four
        key = f"k{n}"
        shard = zlib.crc32(key.encode()) % SHARDS
        shard_ids[shard].append(subprocess.run([*cli, "XADD", f"ledger:{{{shard}}}", "*", "key", key, "action", "ok"],
                                               capture_output=True, text=True, check=True).stdout.strip())
    check(all(len(ids) >= 2 for ids in shard_ids.values()), f"{language}: every shard got entries {shard_ids}")

    def pending(shard):
        reply = subprocess.run([*cli, "XPENDING", f"ledger:{{{shard}}}", "billing"], capture_output=True, text=True).stdout
        return reply.split()[0] if reply.split() else "?"

    def applied_fences(shard):
        pattern = re.compile(rf"^processed  ledger:\{{{shard}\}}/(\S+) \(attempt 1\) shard {shard} fence (\d+): ", re.M)
        return dict(pattern.findall(open(log_path).read()))

    check(eventually(lambda: all(len(applied_fences(s)) == len(shard_ids[s]) and pending(s) == "0" for s in shard_ids)),
          f"{language}: every sharded entry was applied once, with its shard and fence, and acknowledged")
    installed = {}
    for shard, ids in shard_ids.items():
        installed[shard] = int(subprocess.run([*cli, "HGET", f"ledger:{{{shard}}}:sc:billing:fence", "token"],
                                              capture_output=True, text=True, check=True).stdout.strip())
        fences = applied_fences(shard)
        check(sorted(fences) == sorted(ids) and set(fences.values()) == {str(installed[shard])},
              f"{language}: shard {shard}'s entries were applied with its installed fence {installed[shard]}: {fences}")

    shard, current = 0, installed[0]
    stale = current - 1

    def request(entry_id, fence, in_headers=True, sharded=True):
        envelope = {"id": entry_id, "stream": f"ledger:{{{shard}}}", "group": "billing", "attempts": 1,
                    "payload": {"action": "ok", "fence": "not this one"}}
        headers = {"Streamcar-Attempts": "1", "Idempotency-Key": f"ledger:{{{shard}}}/{entry_id}"}
        if sharded:
            envelope.update(shard=shard, fence=fence)
            if in_headers:
                headers.update({"Streamcar-Stream": f"ledger:{{{shard}}}", "Streamcar-Group": "billing",
                                "Streamcar-Shard": str(shard), "Streamcar-Fence": str(fence)})
        return post(handler_port, envelope, headers)

    def logged(entry_id, prefix):
        return any(line.startswith(f"{prefix}ledger:{{{shard}}}/{entry_id} ") for line in open(log_path))

    # A stale owner's request: the fence is below the one the handler applied for this shard.
    status, body = request("1-1", stale)
    check(status == 409 and json.loads(body).get("applied") == current,
          f"{language}: a request with the stale fence {stale} is answered 409 naming {current}: {status} {body!r}")
    check(eventually(lambda: logged("1-1", "stale      "), 5) and not logged("1-1", "processed  "),
          f"{language}: the stale request was not applied")
    status, body = request("1-2", stale, in_headers=False)
    check(status == 409 and not logged("1-2", "processed  "),
          f"{language}: a stale fence only in the JSON body is refused too: {status} {body!r}")
    # The current fence, and a plain request (no shard, a payload field named "fence"), are served.
    status, _ = request("1-3", current)
    check(status == 200 and eventually(lambda: logged("1-3", f"processed  "), 5),
          f"{language}: a request with the current fence {current} is applied")
    status, _ = request("1-4", None, sharded=False)
    check(status == 200 and eventually(lambda: logged("1-4", "processed  "), 5),
          f"{language}: a plain request is applied as before")

    # The handler now holds a fence above the one installed in Redis (as after Redis lost its fence
    # keys): the sidecar's next request for that shard is refused with 409, so it is never
    # acknowledged; it is retried with growing attempts and dead-lettered after max_attempts.
    status, _ = request("1-5", current + 100)
    check(status == 200, f"{language}: a request with a higher fence {current + 100} is applied")
    refused = subprocess.run([*cli, "XADD", f"ledger:{{{shard}}}", "*", "key", "k0", "action", "ok"],
                             capture_output=True, text=True, check=True).stdout.strip()
    dlq = f"ledger:{{{shard}}}:dlq"

    def dead_letter():  # redis-cli's raw output: the id, then each field and value on its own line
        lines = subprocess.run([*cli, "XRANGE", dlq, "-", "+"], capture_output=True, text=True).stdout.splitlines()
        return dict(zip(lines[1::2], lines[2::2]))

    check(eventually(lambda: dead_letter().get("streamcar.id") == refused),
          f"{language}: the refused entry was dead-lettered: {dead_letter()}")
    letter = dead_letter()
    check((letter.get("streamcar.reason"), letter.get("streamcar.attempts"), letter.get("streamcar.status"))
          == ("max_attempts", "3", "409"),
          f"{language}: after 3 refusals (max_attempts, status 409), not at once: {letter}")
    check(not logged(refused, "processed  ") and pending(shard) == "0",
          f"{language}: the refused entry was never applied, and nothing is left pending")


for language, command in HANDLERS.items():
    work = tempfile.mkdtemp(prefix=f"streamcar-example-{language}-")
    procs = []
    try:
        redis_port, handler_port, admin_port = free_port(), free_port(), free_port()
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--dir", work], stdout=subprocess.DEVNULL))
        log_path = os.path.join(work, "handler.log")
        procs.append(subprocess.Popen([*command, str(handler_port)], stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                                      env={**os.environ, "STREAMCAR_HMAC_SECRET": SECRET}))
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
    handler: {{ url: "http://127.0.0.1:{handler_port}/orders", concurrency: 4, auth: {{ hmac_secret: "${{HMAC_SECRET}}" }} }}
    retry: {{ max_attempts: 3, initial_backoff: 100ms, max_backoff: 200ms }}
  - stream: ledger
    group: billing
    start: beginning
    handler: {{ url: "http://127.0.0.1:{handler_port}/ledger", concurrency: 4, auth: {{ hmac_secret: "${{HMAC_SECRET}}" }} }}
    retry: {{ max_attempts: 3, initial_backoff: 100ms, max_backoff: 200ms }}
    sharding: {{ shards: {SHARDS}, heartbeat_interval: 500ms, initial_delay: 0s, min_assignment_interval: 0s }}
""")
        sidecar = subprocess.Popen([BINARY, "run", "-c", os.path.join(work, "streamcar.yaml")],
                                   stderr=open(os.path.join(work, "streamcar.log"), "w"),
                                   env={**os.environ, "HMAC_SECRET": SECRET})
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
        status, _ = post_raw(handler_port, "/orders", envelope,
                             signed(envelope, {"Streamcar-Attempts": "2", "Idempotency-Key": f"orders/{ids['ok'][0]}"}))
        check(status == 200, f"{language}: a duplicate is answered 200")
        check(eventually(lambda: f"duplicate  orders/{ids['ok'][0]}" in open(log_path).read(), 5)
              and open(log_path).read().count(f"processed  orders/{ids['ok'][0]}") == 1,
              f"{language}: the duplicate was not processed again")
        check_fences(language, cli, handler_port, log_path)
        check_signatures(language, handler_port, log_path)
        check(SECRET not in open(os.path.join(work, "streamcar.log")).read(), f"{language}: the secret is not in streamcar's log")
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
