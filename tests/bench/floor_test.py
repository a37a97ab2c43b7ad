#!/usr/bin/env python3
"""The floor (bench/tools/floor_consumer, issue 34) is a correct consumer, or its figures in
docs/benchmarks.md mean nothing: against a real redis-server and a handler that answers in every
framing it must read (Content-Length bodies, chunked bodies with trailers, 204, Connection: close)
and closes connections idle for a second, it delivers every entry of the stream exactly once with
streamcar's SPEC 3.1 headers and envelope, and acknowledges exactly the entries answered 2xx (the
others stay pending: it never retries).

    floor_test.py FLOOR_CONSUMER_BINARY
"""
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

floor = sys.argv[1]
ENTRIES = 250  # three reads of 100 and less; waves of 16 and a partial one
LATER = 40  # written once the handler closed the idle connections
STREAM, GROUP = 'orders "eu"', "billing"
# A value that JSON must escape: quotes, a backslash, control characters and non-ASCII text.
TRICKY = 'he said "hi" \\ back\nslash\ttab \x01 caf\u00e9 \u6f22'


def answer_for(n):
    """(status, framing) the handler gives entry n; framing: length | chunked | close | none."""
    if n % 5 == 0:
        return (500 if n % 10 == 0 else 404), "length"
    if n % 7 == 1:
        return 200, "chunked"
    if n % 11 == 2:
        return 204, "close"
    if n % 13 == 3:
        return 201, "length"
    return 204, "none"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 1.0  # a connection idle this long is closed, as a handler's keep-alive timeout does
    lock = threading.Lock()
    seen = {}  # Streamcar-Id -> number of requests
    problems = []
    peers = set()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        entry_id = self.headers.get("Streamcar-Id", "")
        try:
            envelope = json.loads(body)
        except ValueError:
            envelope = {}
        n = int(envelope.get("payload", {}).get("n", "-1"))
        expected = {"id": entry_id, "stream": STREAM, "group": GROUP, "attempts": 1,
                    "payload": {"n": str(n), "text": TRICKY}}
        with Handler.lock:
            Handler.seen[entry_id] = Handler.seen.get(entry_id, 0) + 1
            Handler.peers.add(self.client_address[1])
            if envelope != expected:
                Handler.problems.append(f"envelope {body!r}")
            headers = (self.headers.get("Streamcar-Stream"), self.headers.get("Streamcar-Group"),
                       self.headers.get("Streamcar-Attempts"), self.headers.get("Idempotency-Key"),
                       self.headers.get("Content-Type"))
            if headers != (STREAM, GROUP, "1", f"{STREAM}/{entry_id}", "application/json"):
                Handler.problems.append(f"headers {headers}")
        status, framing = answer_for(n)
        self.send_response(status)
        if framing == "length":
            text = b'{"error":"no"}' if status >= 300 else b'{"ok":true}'
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
        elif framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n")
        elif framing == "close":
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
        else:
            self.end_headers()
        self.wfile.flush()

    def log_message(self, *args):
        pass


def resp(sock, reader, *args):
    """One command over RESP; the reply's first line (enough for XADD and the counts here)."""
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    sock.sendall(b"".join(out))
    line = reader.readline()
    if line.startswith(b"$"):
        return reader.read(int(line[1:]) + 2)[:-2].decode()
    return line.decode().strip()


work = tempfile.mkdtemp(prefix="floor-test-")
redis_port = free_port()
redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", work], stdout=subprocess.DEVNULL)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
try:
    check(wait_port(redis_port), "redis-server listens")
    sock = socket.create_connection(("127.0.0.1", redis_port))
    reader = sock.makefile("rb")
    ids = {}
    for n in range(ENTRIES):
        ids[resp(sock, reader, "XADD", STREAM, "*", "n", n, "text", TRICKY)] = n
    check(len(ids) == ENTRIES, f"{ENTRIES} entries written")

    url = f"http://127.0.0.1:{server.server_address[1]}/entries"
    total = ENTRIES + LATER
    consumer = subprocess.Popen([floor, str(redis_port), STREAM, GROUP, "floor", url, "16", "0", str(total)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(eventually(lambda: len(Handler.seen) >= ENTRIES), f"the first {ENTRIES} entries reach the handler ({len(Handler.seen)})")
    time.sleep(2.5)  # every connection idle past the handler's timeout: closed by the handler
    for n in range(ENTRIES, total):
        ids[resp(sock, reader, "XADD", STREAM, "*", "n", n, "text", TRICKY)] = n
    out, err = consumer.communicate(timeout=60)
    check(consumer.returncode == 0, f"floor_consumer exits 0 after {total} entries ({err.strip()})")
    lines = out.split()
    acked_2xx = {i for i, n in ids.items() if 200 <= answer_for(n)[0] < 300}
    check(lines[:1] == ["ready"] and lines[1:] == [str(total), str(len(acked_2xx))],
          f"it reports {total} entries taken and {len(acked_2xx)} acknowledged: {lines}")

    check(not Handler.problems, f"every request carries streamcar's headers and envelope ({Handler.problems[:3]})")
    check(set(Handler.seen) == set(ids), "every entry reached the handler")
    check(all(count == 1 for count in Handler.seen.values()), "each exactly once (no retries)")
    check(len(Handler.peers) >= 16 + 16 + 1,
          f"the connections closed by the handler, idle or by Connection: close, were opened again "
          f"({len(Handler.peers)} client ports)")

    summary_reply = subprocess.run(["redis-cli", "-p", str(redis_port), "XPENDING", STREAM, GROUP],
                                   capture_output=True, text=True, check=True).stdout.split("\n")
    pending = subprocess.run(["redis-cli", "-p", str(redis_port), "XPENDING", STREAM, GROUP, "-", "+", "1000"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    pending_ids = {pending[i] for i in range(0, len(pending) - 1, 4)}
    expected_pending = set(ids) - acked_2xx
    check(summary_reply[0] == str(len(expected_pending)),
          f"{len(expected_pending)} entries stay pending (XPENDING: {summary_reply[0]})")
    check(pending_ids == expected_pending, "exactly the entries answered 404 or 500 stay pending")
    sock.close()
finally:
    server.shutdown()
    redis.kill()
    redis.wait()
    shutil.rmtree(work, ignore_errors=True)
summary()
