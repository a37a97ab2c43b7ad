#!/usr/bin/env python3
"""Format dapr against its contract (SPEC 11, docs/coming-from-dapr.md), with the real streamcar
binary and an app that listens on a Unix socket only:

- GET /dapr/subscribe goes over handler.unix_socket, like every request to the handler, and
  carries handler.headers and handler.auth (the bearer token, a Streamcar-Signature over the
  empty body);
- an event a Dapr publisher wrote into an entry is delivered as the same event as any other
  entry: id, source, specversion, time, topic and pubsubname are streamcar's whatever the entry
  says; its data, type, subject and extensions are kept; an object with a key twice or a
  non-string type is plain data; its traceparent is the delivery's (header and attribute);
- a sharded subscription's topic is the stream the app declared, not the shard's key;
- plain text without a content_type arrives as a string (text/plain);
- a query in the app's url stays on the declared route.

    dapr_contract_test.py STREAMCAR_BINARY
"""
import base64
import datetime
import hashlib
import hmac
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

binary = sys.argv[1]
work = tempfile.mkdtemp(prefix="sc-dapr-")
processes = []

TOKEN = "tok-123"
SECRET = "s3cret-for-the-test"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"


class App(http.server.BaseHTTPRequestHandler):
    """A Dapr subscriber on a Unix socket: declares its topics, records every request, answers
    SUCCESS."""
    protocol_version = "HTTP/1.1"
    requests = []
    lock = threading.Lock()

    def record(self, body):
        with App.lock:
            App.requests.append({"method": self.command, "path": self.path,
                                 "headers": dict(self.headers.items()), "body": body})

    def do_GET(self):
        self.record(b"")
        if self.path != "/dapr/subscribe":
            self.send_error(404)
            return
        answer = json.dumps([
            {"pubsubname": "pubsub", "topic": "orders", "route": "/orders"},
            {"pubsubname": "pubsub", "topic": "s10", "routes": {"default": "/sharded"}},
        ]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_POST(self):
        self.record(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        answer = b'{"status":"SUCCESS"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        connection, _ = super().get_request()
        return connection, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port)


def redis_cli(*args):
    return subprocess.run(["redis-cli", "-p", str(redis_port), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def readyz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def event_time(entry_id):
    ms = int(entry_id.split("-")[0])
    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def print_log():
    with open(os.path.join(work, "streamcar.log")) as f:
        print(f.read()[-4000:])


try:
    redis_port = free_port()
    processes.append(subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no",
         "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    check(wait_port(redis_port), "redis-server answers")

    socket_path = os.path.join(work, "app.sock")
    app = UnixServer(socket_path, App)
    threading.Thread(target=app.serve_forever, daemon=True).start()

    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN)
    handler = (f"      unix_socket: {socket_path}\n      format: dapr\n"
               f"      headers: {{ X-Api-Key: k1 }}\n"
               f"      auth: {{ bearer_token_file: {token_file}, hmac_secret: {SECRET} }}\n")
    admin_port = free_port()
    config = os.path.join(work, "streamcar.yaml")
    with open(config, "w") as f:
        f.write(f"version: 1\nredis:\n  url: redis://127.0.0.1:{redis_port}/0\n"
                f"admin:\n  listen: 127.0.0.1:{admin_port}\nsubscriptions:\n"
                f"  - stream: orders\n    group: billing\n    start: beginning\n"
                f"    handler:\n      url: \"http://app?v=2\"\n{handler}"
                f"  - stream: s10\n    group: billing\n    start: beginning\n"
                f"    sharding: {{ shards: 2, initial_delay: 0s, min_assignment_interval: 0s }}\n"
                f"    handler:\n      url: \"http://app\"\n{handler}")

    published = {
        "specversion": "0.3", "id": "forged-id", "source": "forged-source",
        "time": "1999-01-01T00:00:00Z", "type": "order.created", "subject": "o-1",
        "topic": "forged-topic", "pubsubname": "forged-pubsub", "datacontenttype":
        "application/json", "data": {"orderId": 1, "id": "inner"}, "traceparent": TRACEPARENT,
        "tracestate": "k=v", "expiration": "2099-01-01T00:00:00Z", "Bad_Key": "x",
        "nested": {"a": 1}}
    ids = {
        "published": redis_cli("XADD", "orders", "*", "data", json.dumps(published)),
        "duplicate": redis_cli("XADD", "orders", "*", "data",
                               '{"specversion":"1.0","id":"a","id":"b","data":1}'),
        "non_string": redis_cli("XADD", "orders", "*", "data",
                                '{"specversion":"1.0","type":7,"data":1}'),
        "text": redis_cli("XADD", "orders", "*", "data", "hello, world"),
        "shard0": redis_cli("XADD", "s10:{0}", "*", "data", '{"n":0}', "content_type",
                            "application/json"),
        "shard1": redis_cli("XADD", "s10:{1}", "*", "data", '{"n":1}', "content_type",
                            "application/json"),
    }

    log = open(os.path.join(work, "streamcar.log"), "w")
    sidecar = subprocess.Popen([binary, "run", "-c", config], stderr=log)
    processes.append(sidecar)
    check(wait_port(admin_port), "streamcar's admin port answers")
    ready = eventually(lambda: readyz(admin_port) == 200, 30)
    if not ready:
        print_log()
    check(ready, "/readyz turns 200: the app was asked GET /dapr/subscribe over its Unix socket")

    def delivered():
        with App.lock:
            posts = [r for r in App.requests if r["method"] == "POST"]
        return {r["headers"].get("Streamcar-Id"): r for r in posts}

    arrived = eventually(lambda: set(ids.values()) <= set(delivered()), 30)
    if not arrived:
        print_log()
    check(arrived, "every entry arrives at the app")
    posts = delivered()

    # --- 1 and 2: the question at start ---
    with App.lock:
        questions = [r for r in App.requests if r["method"] == "GET"]
    check(len(questions) >= 1 and questions[0]["path"] == "/dapr/subscribe",
          "GET /dapr/subscribe arrived over the socket")
    question = questions[0]["headers"]
    check(question.get("Host") == "app", f"with the url's Host (got {question.get('Host')})")
    check(question.get("Authorization") == f"Bearer {TOKEN}",
          f"it carries the bearer token (got {question.get('Authorization')})")
    check(question.get("X-Api-Key") == "k1", "it carries handler.headers")
    signature = question.get("Streamcar-Signature", "")
    parts = dict(p.split("=", 1) for p in signature.split(",") if "=" in p)
    expected = hmac.new(SECRET.encode(), (parts.get("t", "") + ".").encode(),
                        hashlib.sha256).hexdigest()
    check("t" in parts and hmac.compare_digest(parts.get("v1", ""), expected),
          f"it carries a valid Streamcar-Signature over the empty body (got {signature!r})")

    def event(name):
        return json.loads(posts[ids[name]]["body"])

    # --- 3: a Dapr publisher's event ---
    got = event("published")
    entry_id = ids["published"]
    check(got["id"] == entry_id, f"id is the entry id, not the publisher's (got {got['id']})")
    check(got["source"] == "/streams/orders", f"source is streamcar's (got {got['source']})")
    check(got["specversion"] == "1.0", f"specversion 1.0 (got {got['specversion']})")
    check(got["time"] == event_time(entry_id), f"time is the entry id's (got {got['time']})")
    check(got["topic"] == "orders" and got["pubsubname"] == "billing",
          f"topic and pubsubname are streamcar's (got {got['topic']}, {got['pubsubname']})")
    check(got["type"] == "order.created" and got["subject"] == "o-1",
          "the publisher's type and subject are kept")
    check(got["datacontenttype"] == "application/json" and
          got["data"] == {"orderId": 1, "id": "inner"}, "the publisher's data is kept")
    check(got.get("expiration") == "2099-01-01T00:00:00Z", "an extension attribute is kept")
    check("Bad_Key" not in got and "nested" not in got,
          f"no member that is not a CloudEvents attribute (got {sorted(got)})")
    check(got.get("traceparent") == TRACEPARENT and got.get("traceid") == TRACEPARENT and
          got.get("tracestate") == "k=v", "the published event's trace is the event's")
    headers = posts[entry_id]["headers"]
    check(headers.get("traceparent") == TRACEPARENT and headers.get("tracestate") == "k=v",
          f"and the delivery's traceparent header (got {headers.get('traceparent')})")

    for name, raw in (("duplicate", '{"specversion":"1.0","id":"a","id":"b","data":1}'),
                      ("non_string", '{"specversion":"1.0","type":7,"data":1}')):
        got = event(name)
        check(got["id"] == ids[name] and got["type"] == "streamcar.entry" and
              base64.b64decode(got.get("data_base64", "")).decode() == raw,
              f"{name}: not a published event, the object is plain data (got {got})")

    # --- plain text without a content_type ---
    got = event("text")
    check(got.get("data") == "hello, world" and got["datacontenttype"] == "text/plain",
          f"plain text arrives as a string, text/plain (got {got})")

    # --- a query in the app's url ---
    check(posts[entry_id]["path"] == "/orders?v=2",
          f"the url's query stays on the declared route (got {posts[entry_id]['path']})")

    # --- 4: sharded ---
    for shard in (0, 1):
        got = event(f"shard{shard}")
        check(posts[ids[f"shard{shard}"]]["path"] == "/sharded",
              "a shard's entry goes to the route declared for the subscription's stream")
        check(got["topic"] == "s10", f"shard {shard}: topic is the subscription's stream "
              f"(got {got['topic']})")
        # The shard's key as a path segment (SPEC 3.1): s10:{0} is s10:%7B0%7D.
        check(got["source"] == f"/streams/s10:%7B{shard}%7D",
              f"shard {shard}: source names the shard's stream, where the id is unique "
              f"(got {got['source']})")
    summary()
finally:
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
    shutil.rmtree(work, ignore_errors=True)
