#!/usr/bin/env python3
"""A streamcar handler in plain Python (standard library only).

streamcar POSTs each stream entry here as JSON. Answer 2xx and the entry is acknowledged; answer
5xx and it is retried with backoff; answer 422 and it goes to the dead-letter stream at once.

Delivery is at-least-once, so the handler deduplicates on the Idempotency-Key header
("<stream>/<entry id>"): a key it has already processed is answered 200 without doing the work
again. (A real handler keeps the keys where it keeps its results, e.g. a unique column.)

Sharded subscriptions (SPEC 9) add Streamcar-Shard and Streamcar-Fence (and "shard", "fence" in
the JSON body). A paused or partitioned sidecar that has lost its shard may still POST an entry it
took earlier, with its old, lower fence. So the handler keeps, per shard, the highest fence it has
applied, and answers 409 to a lower one: not 2xx, so the stale sender never acknowledges the entry
(whose effect did not happen here), and not a reject status, so it is not dead-lettered either.
The entry stays pending for the shard's current owner. Requests without those headers (plain
subscriptions) are not affected.

Signatures (SPEC 11): with STREAMCAR_HMAC_SECRET set (the sidecar's handler.auth.hmac_secret),
every POST must carry Streamcar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
"<t>.<body>")>, computed here over the raw body bytes before anything reads them, compared in
constant time, with t at most 5 minutes from this clock (a captured request cannot be replayed
later). Anything else is answered 401: not 2xx and not a reject status, so a sidecar with the wrong
secret retries instead of dead-lettering. Without the variable nothing is checked.

The demo drives it with a field "action":
  ok         -> 200
  fail-once  -> 500 on the first attempt, then 200
  fail       -> 500 every time (dead-lettered after retry.max_attempts)
  reject     -> 422 (dead-lettered at once, no retry)

Usage: [STREAMCAR_HMAC_SECRET=...] handler.py [PORT]   (default 8080; GET /healthz answers 200)
"""
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

processed = set()
# The highest fence applied per (shard's stream, group, shard). Fences are counted per
# subscription, so one handler serving several sharded subscriptions keeps them apart. A real
# handler keeps this next to its data and updates it in the same transaction as the side effect
# (UPDATE ... SET fence = :fence WHERE shard = :shard AND fence <= :fence); here the lock below
# makes the comparison, the effect and the store one step.
highest_fence = {}
lock = threading.Lock()
DECIMAL = re.compile(r"[0-9]{1,18}")
SECRET = os.environ.get("STREAMCAR_HMAC_SECRET", "").encode()
TOLERANCE_SECONDS = 300
SIGNATURE = re.compile(r"t=([0-9]{1,12}),v1=([0-9a-f]{64})")


def signature_problem(header, body):
    """None when the Streamcar-Signature header signs `body` (bytes) with SECRET, else why not."""
    match = SIGNATURE.fullmatch(header or "")
    if not match:
        return "missing or malformed Streamcar-Signature"
    t, received = match.groups()
    if abs(time.time() - int(t)) > TOLERANCE_SECONDS:
        return f"signature time {t} is more than {TOLERANCE_SECONDS} s from now"
    expected = hmac.new(SECRET, t.encode() + b"." + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, received):
        return "signature does not match the body"
    return None


def log(message):
    print(message, flush=True)


def shard_and_fence(headers, envelope):
    """(shard, fence) of a sharded request, None for a plain one; ValueError when malformed. The
    headers come with every format; the JSON body's "shard" and "fence" are read when they are
    missing (for example behind a proxy that drops unknown headers)."""
    shard = headers.get("Streamcar-Shard", envelope.get("shard"))
    fence = headers.get("Streamcar-Fence", envelope.get("fence"))
    if shard is None and fence is None:
        return None
    if not (DECIMAL.fullmatch(str(shard)) and DECIMAL.fullmatch(str(fence))):
        raise ValueError(f"shard {shard!r} and fence {fence!r} must both be non-negative integers")
    return int(shard), int(fence)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: streamcar reuses its connections

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if body:
            self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(200 if self.path == "/healthz" else 404)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Idempotency-Key", "")
        if SECRET:
            problem = signature_problem(self.headers.get("Streamcar-Signature"), body)
            if problem:
                log(f"unsigned   {key}: 401, {problem}")
                return self.answer(401, json.dumps({"error": problem}).encode())
        attempts = int(self.headers.get("Streamcar-Attempts", "1"))
        envelope = json.loads(body)
        payload = envelope.get("payload", {})
        action = payload.get("action", "ok")
        try:
            sharded = shard_and_fence(self.headers, envelope)
        except ValueError as error:
            log(f"bad fence  {key}: 400, {error}")
            return self.answer(400, json.dumps({"error": str(error)}).encode())
        where = ""
        if sharded:
            shard, fence = sharded
            where = f" shard {shard} fence {fence}"
            fence_key = (self.headers.get("Streamcar-Stream", envelope.get("stream", "")),
                         self.headers.get("Streamcar-Group", envelope.get("group", "")), shard)
        with lock:
            if sharded and fence < highest_fence.get(fence_key, -1):
                applied = highest_fence[fence_key]
                log(f"stale      {key}{where} < {applied}: 409, a newer owner has applied this shard")
                return self.answer(409, json.dumps({"error": "stale fence", "shard": shard,
                                                    "fence": fence, "applied": applied}).encode())
            if key in processed:
                log(f"duplicate  {key} (attempt {attempts}): already processed, answering 200")
                return self.answer(200)
            if action == "reject":
                log(f"reject     {key}: 422, this entry can never succeed")
                return self.answer(422, b'{"error":"invalid order"}')
            if action == "fail" or (action == "fail-once" and attempts == 1):
                log(f"fail       {key} (attempt {attempts}): 500, please retry")
                return self.answer(500, b'{"error":"database unavailable"}')
            # The side effect and the fence store, together.
            processed.add(key)
            if sharded:
                highest_fence[fence_key] = fence
        shown = dict(payload)
        for name in envelope.get("base64_fields", []):
            shown[name] = "<binary, base64 " + str(shown[name]) + ">"
        log(f"processed  {key} (attempt {attempts}){where}: {json.dumps(shown, ensure_ascii=False)}")
        self.answer(200)

    def log_message(self, *args):
        pass  # one line per event above is enough


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log(f"python handler listening on 127.0.0.1:{port}")
    server.serve_forever()
