#!/usr/bin/env python3
"""A streamcar handler in plain Python (standard library only).

streamcar POSTs each stream entry here as JSON. Answer 2xx and the entry is acknowledged; answer
5xx and it is retried with backoff; answer 422 and it goes to the dead-letter stream at once.

Delivery is at-least-once, so the handler deduplicates on the Idempotency-Key header
("<stream>/<entry id>"): a key it has already processed is answered 200 without doing the work
again. (A real handler keeps the keys where it keeps its results, e.g. a unique column.)

The demo drives it with a field "action":
  ok         -> 200
  fail-once  -> 500 on the first attempt, then 200
  fail       -> 500 every time (dead-lettered after retry.max_attempts)
  reject     -> 422 (dead-lettered at once, no retry)

Usage: handler.py [PORT]   (default 8080; GET /healthz answers 200)
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

processed = set()
lock = threading.Lock()


def log(message):
    print(message, flush=True)


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
        attempts = int(self.headers.get("Streamcar-Attempts", "1"))
        envelope = json.loads(body)
        payload = envelope.get("payload", {})
        action = payload.get("action", "ok")
        with lock:
            if key in processed:
                log(f"duplicate  {key} (attempt {attempts}): already processed, answering 200")
                return self.answer(200)
        if action == "reject":
            log(f"reject     {key}: 422, this entry can never succeed")
            return self.answer(422, b'{"error":"invalid order"}')
        if action == "fail" or (action == "fail-once" and attempts == 1):
            log(f"fail       {key} (attempt {attempts}): 500, please retry")
            return self.answer(500, b'{"error":"database unavailable"}')
        with lock:
            processed.add(key)
        shown = dict(payload)
        for name in envelope.get("base64_fields", []):
            shown[name] = "<binary, base64 " + str(shown[name]) + ">"
        log(f"processed  {key} (attempt {attempts}): {json.dumps(shown, ensure_ascii=False)}")
        self.answer(200)

    def log_message(self, *args):
        pass  # one line per event above is enough


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log(f"python handler listening on 127.0.0.1:{port}")
    server.serve_forever()
