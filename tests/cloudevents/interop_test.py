#!/usr/bin/env python3
"""CloudEvents interop: the real streamcar binary delivers to a handler built on the official
CloudEvents JavaScript SDK (handler.js), for stream names and types with spaces, '%', '/', quotes
and non-ASCII. Every request must become an event through HTTP.toEvent, pass validate(), and its
type and source must decode back to the entry's type and the stream's name.

    interop_test.py STREAMCAR_BINARY PROJECT_ROOT
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

binary, root = sys.argv[1], sys.argv[2]

# The SDK, pinned by package-lock.json; node_modules is never committed.
if not os.path.isdir(os.path.join(here, "node_modules", "cloudevents")):
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=here, check=True)

STREAMS = ["orders \u00e9/q1 2024", "100% sure", "a/b?c#d", 'say "hi"', "plain.stream"]
TYPES = [
    "order created",
    "100%",
    "a/b/c",
    "caf\u00e9 \u00fcn\u00efcode \u20ac \U0001f389",
    'quote "x"',
    "tab\there",
    "com.example.ok",
]

work = tempfile.mkdtemp(prefix="streamcar-ce-")
processes = []


def stop_all():
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
    shutil.rmtree(work, ignore_errors=True)


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


try:
    redis_port = free_port()
    processes.append(subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no",
         "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    check(wait_port(redis_port), "redis-server answers")

    handler_port = free_port()
    handler = subprocess.Popen(["node", os.path.join(here, "handler.js"), str(handler_port)],
                               stdout=subprocess.PIPE, text=True, encoding="utf-8")
    processes.append(handler)
    reports = queue.Queue()
    threading.Thread(target=lambda: [reports.put(json.loads(line)) for line in handler.stdout],
                     daemon=True).start()
    check(wait_port(handler_port), "the CloudEvents SDK handler listens")

    admin_port = free_port()
    subscriptions = ""
    for stream in STREAMS:
        subscriptions += (
            f"  - stream: {json.dumps(stream)}\n    group: interop\n    start: beginning\n"
            f"    handler: {{ url: \"http://127.0.0.1:{handler_port}/\", format: cloudevents }}\n")
    config = os.path.join(work, "streamcar.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(f"version: 1\nredis:\n  url: redis://127.0.0.1:{redis_port}/0\n"
                f"admin:\n  listen: 127.0.0.1:{admin_port}\nsubscriptions:\n{subscriptions}")
    log = open(os.path.join(work, "streamcar.log"), "w")
    sidecar = subprocess.Popen([binary, "run", "-c", config], stderr=log)
    processes.append(sidecar)
    check(wait_port(admin_port), "streamcar's admin port answers")

    expected = {}
    for stream in STREAMS:
        for i, event_type in enumerate(TYPES):
            # With raw_field (data) present the body is its bytes; content_type is a media type.
            entry_id = redis_cli(redis_port, "XADD", stream, "*", "type", event_type,
                                 "data", json.dumps({"n": i}), "content_type", "application/json")
            expected[entry_id + "@" + stream] = (stream, event_type)
        # An entry without a type gets the default type and still validates.
        entry_id = redis_cli(redis_port, "XADD", stream, "*", "k", "v")
        expected[entry_id + "@" + stream] = (stream, "streamcar.entry")

    received = []
    def all_received():
        while True:
            try:
                item = reports.get_nowait()
            except queue.Empty:
                break
            if "listening" not in item:
                received.append(item)
        return len(received) >= len(expected)

    ok = eventually(all_received, 60)
    if not ok:
        with open(os.path.join(work, "streamcar.log")) as f:
            print(f.read()[-4000:])
    check(ok, f"the handler received all {len(expected)} events (got {len(received)})")

    invalid = [r for r in received if not r.get("ok")]
    check(not invalid, f"every request is a valid CloudEvent for the SDK: {invalid[:3]}")
    matched = 0
    for report in received:
        stream = report["decoded_stream"]
        key = report["id"] + "@" + (stream or "")
        check(key in expected, f"event {report['id']} from {stream!r} was one of ours")
        want_stream, want_type = expected[key]
        check(report["decoded_type"] == want_type,
              f"type {report['type']!r} decodes to {want_type!r} (got {report['decoded_type']!r})")
        check(report["decoded_stream"] == want_stream,
              f"source {report['source']!r} decodes to {want_stream!r}")
        matched += 1
    check(matched == len(expected), "every entry arrived once and matched")
    summary()
finally:
    stop_all()
