#!/usr/bin/env python3
"""Tracing (SPEC 11): the real streamcar binary exports a span per delivery attempt to a real
OTLP/HTTP receiver (receiver.js) that decodes every request with the OpenTelemetry project's own
OTLP definitions. Checks parentage (the entry's traceparent is the parent, or with format dapr the
traceparent of the event a Dapr publisher wrote into the entry; the handler receives the span's
own traceparent), the attributes, a batch request's links, several spans per export,
and that a hanging or unreachable collector never slows delivery (measured against a collector
that keeps up, in the same run), its spans dropped and counted in streamcar_spans_dropped_total.

    tracing_test.py STREAMCAR_BINARY PROJECT_ROOT BENCH_HANDLER_BINARY
"""
import http.server
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

binary, root, bench_handler = sys.argv[1], sys.argv[2], sys.argv[3]

# The OTLP definitions, pinned by package-lock.json; node_modules is never committed.
if not os.path.isdir(os.path.join(here, "node_modules", "@opentelemetry", "otlp-transformer")):
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=here, check=True)

work = tempfile.mkdtemp(prefix="streamcar-trace-")
processes = []

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
PUBLISHED_SPAN = "b7ad6b7169203331"  # a Dapr publisher's span, inside the event it published


class Handler(http.server.BaseHTTPRequestHandler):
    """Records each request's traceparent by Streamcar-Id; answers 500 to the first attempt of
    an entry whose body asks for it, 200 otherwise."""
    protocol_version = "HTTP/1.1"
    seen = {}  # id -> [traceparent or None per attempt]
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        entry_id = self.headers.get("Streamcar-Id", "batch")
        with Handler.lock:
            Handler.seen.setdefault(entry_id, []).append(self.headers.get("traceparent"))
            attempt = len(Handler.seen[entry_id])
        status = 500 if b"fail-once" in body and attempt == 1 else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def start_handler():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def start_receiver():
    port = free_port()
    receiver = subprocess.Popen(["node", os.path.join(here, "receiver.js"), str(port)],
                                stdout=subprocess.PIPE, text=True)
    processes.append(receiver)
    exports = queue.Queue()
    threading.Thread(target=lambda: [exports.put(json.loads(line)) for line in receiver.stdout],
                     daemon=True).start()
    check(wait_port(port), "the OTLP receiver listens")
    return port, exports


class AcceptingCollector(http.server.BaseHTTPRequestHandler):
    """Reads each export and answers 200 with an empty ExportTraceServiceResponse at once: a
    collector that keeps up, the baseline a hanging or unreachable one is measured against (the
    same spans made and encoded, so what differs is only the collector)."""
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def start_accepting_collector():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), AcceptingCollector)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def start_hanging_collector():
    """Accepts connections, reads what arrives, and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []

    def serve():
        while True:
            conn, _ = listener.accept()
            held.append(conn)
            threading.Thread(target=lambda c=conn: [c.recv(65536) for _ in iter(int, 1)],
                             daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], listener


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def start_sidecar(name, redis_port, handler_port, subscriptions, tracing):
    admin_port = free_port()
    config = os.path.join(work, name + ".yaml")
    with open(config, "w") as f:
        f.write(f"version: 1\nredis:\n  url: redis://127.0.0.1:{redis_port}/0\n"
                f"consumer:\n  name: {name}\n"
                f"admin:\n  listen: 127.0.0.1:{admin_port}\n"
                f"shutdown:\n  drain_timeout: 2s\n{tracing}subscriptions:\n")
        for stream, extra, *path in subscriptions:
            # format dapr needs a url with a path, or it asks the app GET /dapr/subscribe.
            f.write(f"  - stream: {stream}\n    group: g\n    start: beginning\n"
                    f"    handler: {{ url: \"http://127.0.0.1:{handler_port}/{''.join(path)}\", "
                    f"concurrency: 16"
                    f"{extra} }}\n    retry: {{ initial_backoff: 50ms, max_backoff: 50ms }}\n")
    log = open(os.path.join(work, name + ".log"), "w")
    sidecar = subprocess.Popen([binary, "run", "-c", config], stderr=log)
    processes.append(sidecar)
    check(wait_port(admin_port), f"{name}: streamcar's admin port answers")
    return sidecar, admin_port


def metric(admin_port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read()
    for line in text.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{}"):
            return float(line.split()[-1])
    return None


def pending(redis_port, stream):
    info = redis_cli(redis_port, "XINFO", "GROUPS", stream).split("\n")
    return int(info[info.index("pending") + 1]), int(info[info.index("entries-read") + 1])


def stop(sidecar):
    sidecar.terminate()
    sidecar.wait(30)


def parentage_and_attributes(redis_port, handler_port):
    receiver_port, exports = start_receiver()
    tracing = (f"tracing:\n  otlp_endpoint: http://127.0.0.1:{receiver_port}/v1/traces\n"
               f"  service_name: billing-sidecar\n  sample_ratio: 1.0\n")
    sampled = redis_cli(redis_port, "XADD", "orders", "*", "traceparent",
                        f"00-{PARENT_TRACE}-{PARENT_SPAN}-01", "k", "v")
    unsampled = redis_cli(redis_port, "XADD", "orders", "*", "traceparent",
                          f"00-{PARENT_TRACE}-{PARENT_SPAN}-00", "k", "v")
    invalid = redis_cli(redis_port, "XADD", "orders", "*", "traceparent", "00-zz-not-valid", "k", "v")
    retried = redis_cli(redis_port, "XADD", "orders", "*", "traceparent",
                        f"00-{PARENT_TRACE}-{PARENT_SPAN}-01", "k", "fail-once")
    plain = [redis_cli(redis_port, "XADD", "orders", "*", "n", str(i)) for i in range(40)]
    # What Dapr's redis component writes: the whole published CloudEvent in `data`, the
    # producer's trace inside it and no traceparent field of the entry's own.
    published = redis_cli(redis_port, "XADD", "published", "*", "data", json.dumps({
        "specversion": "1.0", "id": "p-1", "source": "checkout", "type": "order.created",
        "traceparent": f"00-{PARENT_TRACE}-{PUBLISHED_SPAN}-01", "tracestate": "k=v",
        "datacontenttype": "application/json", "data": {"orderId": 1}}))
    batch_ids = [redis_cli(redis_port, "XADD", "batched", "*", "traceparent",
                           f"00-{PARENT_TRACE}-{PARENT_SPAN}-01", "n", str(i)) for i in range(3)]
    before = time.time_ns()
    sidecar, admin_port = start_sidecar(
        "traced", redis_port, handler_port,
        [("orders", ""), ("batched", ", batch_size: 3"), ("published", ", format: dapr", "events")],
        tracing)

    spans, exports_seen = [], []

    def collected():
        while True:
            try:
                export = exports.get_nowait()
            except queue.Empty:
                break
            exports_seen.append(export)
            spans.extend(export["spans"])
        # 45 single-entry attempts (the retried entry twice, the unsampled one none) + 1 batch.
        return len(spans) >= 46

    check(eventually(collected, 30), f"46 spans arrive at the receiver (got {len(spans)})")
    check(metric(admin_port, "streamcar_spans_dropped_total") == 0,
          "a collector that keeps up drops nothing")
    stop(sidecar)
    collected()
    after = time.time_ns()
    check(len(spans) == 46, f"exactly 46 spans: one per attempt, none for the unsampled parent "
          f"(got {len(spans)})")
    check(all(e["path"] == "/v1/traces" for e in exports_seen), "POSTed to the endpoint's path")
    check(all(e["content_type"] == "application/x-protobuf" for e in exports_seen),
          "OTLP/HTTP protobuf encoding")
    check(max(len(e["spans"]) for e in exports_seen) >= 5,
          f"spans are exported in batches (largest export: "
          f"{max(len(e['spans']) for e in exports_seen)} spans in {len(exports_seen)} requests)")

    by_id = {}
    for span in spans:
        by_id.setdefault(span["attributes"].get("messaging.message.id"), []).append(span)
    for span in spans:
        check(span["resource"].get("service.name") == "billing-sidecar", "resource service.name")
        check(span["kind"] == 3, "kind CLIENT (SPAN_KIND_CLIENT = 3)")
        check(int(before) <= int(span["start"]) <= int(span["end"]) <= after,
              "start and end are wall-clock times within the run")
        attrs = span["attributes"]
        check(attrs.get("messaging.system") == "redis", "messaging.system=redis")
        check(attrs.get("messaging.consumer.group.name") == "g", "messaging.consumer.group.name")
        check(len(span["span_id"]) == 16 and span["span_id"] != "0" * 16, "a span id")

    (one,) = by_id[sampled]
    check(one["trace_id"] == PARENT_TRACE, "the span is in the entry's trace")
    check(one["parent_span_id"] == PARENT_SPAN, "the entry's span is its parent")
    check(one["name"] == "deliver orders", "named deliver <stream>")
    check(one["attributes"]["messaging.destination.name"] == "orders", "messaging.destination.name")
    check(one["attributes"]["http.response.status_code"] == 200, "http.response.status_code")
    check("http.request.resend_count" not in one["attributes"], "a first attempt has no resend count")
    check(one["status_code"] == 0, "a success leaves the status unset")
    check(Handler.seen[sampled] == [f"00-{PARENT_TRACE}-{one['span_id']}-01"],
          f"the handler received the span's own traceparent (got {Handler.seen[sampled]})")

    check(unsampled not in by_id, "an unsampled parent gets no span")
    check(Handler.seen[unsampled] == [f"00-{PARENT_TRACE}-{PARENT_SPAN}-00"],
          "an unsampled parent's traceparent reaches the handler unchanged")

    (root_span,) = by_id[invalid]
    check(root_span["parent_span_id"] == "" and root_span["trace_id"] != PARENT_TRACE,
          "an invalid traceparent is no parent: the span starts a trace")
    check(Handler.seen[invalid] == [f"00-{root_span['trace_id']}-{root_span['span_id']}-01"],
          "and the handler receives that trace's traceparent, not the invalid one")

    attempts = sorted(by_id[retried], key=lambda s: int(s["start"]))
    check(len(attempts) == 2, "a retried entry has a span per attempt")
    first, second = attempts
    check(first["status_code"] == 2 and first["attributes"]["http.response.status_code"] == 500,
          "the failed attempt is an error with its status code")
    check(first["attributes"].get("error.type") == "retry", "error.type names the outcome")
    check(second["attributes"].get("http.request.resend_count") == 1, "the retry's resend count")
    check(first["parent_span_id"] == second["parent_span_id"] == PARENT_SPAN,
          "both attempts are children of the entry's span")
    check(Handler.seen[retried] == [f"00-{PARENT_TRACE}-{s['span_id']}-01" for s in attempts],
          "each attempt carried its own span's traceparent")
    for entry_id in plain:
        (span,) = by_id[entry_id]
        check(span["parent_span_id"] == "" and
              Handler.seen[entry_id] == [f"00-{span['trace_id']}-{span['span_id']}-01"],
              "an entry without traceparent starts a trace the handler joins")

    (from_dapr,) = by_id[published]
    check(from_dapr["trace_id"] == PARENT_TRACE and from_dapr["parent_span_id"] == PUBLISHED_SPAN,
          "an entry a Dapr publisher wrote: its event's traceparent is the span's parent")
    check(Handler.seen[published] == [f"00-{PARENT_TRACE}-{from_dapr['span_id']}-01"],
          f"and the handler received the span's own traceparent (got {Handler.seen[published]})")

    (batch,) = by_id[None]
    check(batch["name"] == "deliver batched", "the batch request's span")
    check(batch["attributes"].get("messaging.batch.message_count") == 3, "with its entry count")
    check(len(batch["links"]) == 3 and all(l["trace_id"] == PARENT_TRACE and
                                           l["span_id"] == PARENT_SPAN for l in batch["links"]),
          "linked to each entry's traceparent")
    check(Handler.seen["batch"] == [f"00-{batch['trace_id']}-{batch['span_id']}-01"],
          "the batch handler received the span's traceparent")


def ready(admin_port):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/readyz", timeout=5).status == 200
    except OSError:
        return False


def start_fast_handler():
    """The benchmark's handler (C++, answers 204 at once) in a process of its own."""
    port = free_port()
    processes.append(subprocess.Popen([bench_handler, str(port), "24"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    check(wait_port(port), "a handler answers")
    return port


def delivery_rates(redis_port, configurations, count):
    """Each configuration's sidecar delivers `count` entries of its own stream, all at the same
    time, each to a handler process of its own: a load spike on the shared machine falls on all
    of them alike, and no sidecar waits on a handler another one keeps busy (one shared Python
    handler once served two sidecars at a third of the others' rate, whatever their collector).
    Entries per second from the moment the entries are written (all sidecars ready and waiting)
    to each one's last acknowledgement, with each one's process and admin port (still running)."""
    runs = []
    for name, tracing in configurations:
        stream = f"rate-{name}"
        runs.append((name, stream) + start_sidecar(name, redis_port, start_fast_handler(),
                                                    [(stream, "")], tracing))
    check(eventually(lambda: all(ready(admin) for _, _, _, admin in runs), 30), "all are ready")
    # The backlogs grow together, one entry to each stream in turn, once every sidecar waits.
    started = time.monotonic()
    pipe = "".join(f"XADD {stream} * n {i}\n" for i in range(count) for _, stream, _, _ in runs)
    subprocess.run(["redis-cli", "-p", str(redis_port)], input=pipe, text=True, check=True,
                   capture_output=True)
    finished = {}

    def all_done():
        for name, stream, _, _ in runs:
            if name in finished:
                continue
            try:
                left, read = pending(redis_port, stream)
            except (subprocess.CalledProcessError, ValueError):
                continue
            if read == count and left == 0:
                finished[name] = time.monotonic()
        return len(finished) == len(runs)

    check(eventually(all_done, 180), f"every sidecar delivered its {count} entries")
    return {name: (count / (finished[name] - started), sidecar, admin)
            for name, _, sidecar, admin in runs}


try:
    redis_port = free_port()
    processes.append(subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no",
         "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    check(wait_port(redis_port), "redis-server answers")
    handler_port = start_handler()

    parentage_and_attributes(redis_port, handler_port)

    hanging_port, _listener = start_hanging_collector()
    accepting_port = start_accepting_collector()
    closed_port = free_port()  # nothing listens there
    # The same backlog to a collector that keeps up, to one that accepts and never answers, to a
    # port where nothing listens, and with tracing off, delivered side by side. A bad collector
    # is measured against the good one: both make and encode the same spans, so the ratio is the
    # collector's effect alone (tracing's own cost, against off, is bench/run --tracing's figure).
    count = 5000
    rates = delivery_rates(redis_port, [
        ("off", ""),
        ("accepting", f"tracing:\n  otlp_endpoint: http://127.0.0.1:{accepting_port}/v1/traces\n"),
        ("hanging", f"tracing:\n  otlp_endpoint: http://127.0.0.1:{hanging_port}/v1/traces\n"),
        ("unreachable", f"tracing:\n  otlp_endpoint: http://127.0.0.1:{closed_port}/v1/traces\n"),
    ], count)
    (off, _, _), (accepting, _, _), (hanging, _, hanging_admin), (
        unreachable, _, unreachable_admin) = (
        rates["off"], rates["accepting"], rates["hanging"], rates["unreachable"])
    print(f"delivery rate, side by side: tracing off {off:.0f}/s, a collector that keeps up "
          f"{accepting:.0f}/s, hanging collector {hanging:.0f}/s, unreachable collector "
          f"{unreachable:.0f}/s")
    check(hanging >= 0.7 * accepting, f"a hanging collector does not slow delivery "
          f"({hanging:.0f}/s vs {accepting:.0f}/s with a collector that keeps up)")
    check(unreachable >= 0.7 * accepting, f"an unreachable collector does not slow delivery "
          f"({unreachable:.0f}/s vs {accepting:.0f}/s with a collector that keeps up)")
    # The queue holds 2048 spans and the hung export one batch of at most 512: the rest of the
    # backlog's spans overflow at once.
    dropped = metric(hanging_admin, "streamcar_spans_dropped_total")
    check(dropped >= count - 2048 - 512,
          f"overflow is dropped and counted in streamcar_spans_dropped_total (got {dropped})")
    # Nothing ever reaches an unreachable collector: once its batches have failed their tries,
    # every span is counted.
    check(eventually(lambda: metric(unreachable_admin, "streamcar_spans_dropped_total") == count, 20),
          f"every span for an unreachable collector is dropped and counted ({count})")
    for _, sidecar, _ in rates.values():
        stop(sidecar)
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
