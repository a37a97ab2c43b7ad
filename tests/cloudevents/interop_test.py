#!/usr/bin/env python3
"""CloudEvents interop: the real streamcar binary delivers to a handler built on the official
CloudEvents JavaScript SDK (handler.js), for stream names and types with spaces, '%', '/', quotes
and non-ASCII, in each CloudEvents format: `cloudevents` (binary mode), `cloudevents-structured`
and `dapr` (structured mode, SPEC 11), one group per format. Every request must become an event
through HTTP.toEvent and pass validate(); its type and source must give back the entry's type
and the stream's name (percent-decoded in binary mode, as they are in structured mode), and in
structured mode its data (JSON, text or bytes) and Dapr's topic and pubsubname must be the
entry's.

    interop_test.py STREAMCAR_BINARY PROJECT_ROOT
"""
import base64
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

FORMATS = ["cloudevents", "cloudevents-structured", "dapr"]
BINARY = bytes(range(1, 256))  # not UTF-8 (and no NUL, which argv cannot carry)

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
        for fmt in FORMATS:
            subscriptions += (
                f"  - stream: {json.dumps(stream)}\n    group: {fmt}\n    start: beginning\n"
                f"    handler: {{ url: \"http://127.0.0.1:{handler_port}/{fmt}\", "
                f"format: {fmt} }}\n")
    config = os.path.join(work, "streamcar.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(f"version: 1\nredis:\n  url: redis://127.0.0.1:{redis_port}/0\n"
                f"admin:\n  listen: 127.0.0.1:{admin_port}\nsubscriptions:\n{subscriptions}")
    log = open(os.path.join(work, "streamcar.log"), "w")
    sidecar = subprocess.Popen([binary, "run", "-c", config], stderr=log)
    processes.append(sidecar)
    check(wait_port(admin_port), "streamcar's admin port answers")

    expected = {}  # "<id>@<stream>@<format>" -> (stream, type, data, data bytes)

    def expect(entry_id, stream, event_type, data=None, data_bytes=None):
        for fmt in FORMATS:
            expected[f"{entry_id}@{stream}@{fmt}"] = (stream, event_type, data, data_bytes)

    for stream in STREAMS:
        for i, event_type in enumerate(TYPES):
            # With raw_field (data) present the body is its bytes; content_type is a media type.
            entry_id = redis_cli(redis_port, "XADD", stream, "*", "type", event_type,
                                 "data", json.dumps({"n": i}), "content_type", "application/json")
            expect(entry_id, stream, event_type, data=json.dumps({"n": i}, separators=(",", ":")))
        # An entry without a type gets the default type and still validates.
        entry_id = redis_cli(redis_port, "XADD", stream, "*", "k", "v")
        expect(entry_id, stream, "streamcar.entry", data='{"k":"v"}')
        # Text, and bytes that are not UTF-8 (passed to redis-cli as bytes).
        entry_id = redis_cli(redis_port, "XADD", stream, "*", "data", 'say "hi"\n',
                             "content_type", "text/plain; charset=utf-8")
        expect(entry_id, stream, "streamcar.entry", data='say "hi"\n')
        entry_id = subprocess.run(
            [b"redis-cli", b"-p", str(redis_port).encode(), b"XADD", stream.encode(), b"*",
             b"data", BINARY, b"content_type", b"application/octet-stream"],
            check=True, capture_output=True).stdout.decode().strip()
        expect(entry_id, stream, "streamcar.entry",
               data_bytes=base64.b64encode(BINARY).decode())

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
        fmt = report["path"].lstrip("/")
        stream = report["decoded_stream"]
        key = f"{report['id']}@{stream or ''}@{fmt}"
        check(key in expected, f"{fmt} event {report['id']} from {stream!r} was one of ours")
        want_stream, want_type, want_data, want_bytes = expected[key]
        # Binary mode percent-encodes attribute values in headers; structured mode carries them
        # as JSON strings, as they are.
        got_type = report["decoded_type"] if fmt == "cloudevents" else report["type"]
        check(got_type == want_type, f"{fmt}: type {report['type']!r} gives {want_type!r}")
        check(report["decoded_stream"] == want_stream,
              f"{fmt}: source {report['source']!r} decodes to {want_stream!r}")
        if fmt != "cloudevents":
            if want_bytes is not None:
                check(report.get("data_bytes") == want_bytes,
                      f"{fmt}: bytes that are not UTF-8 arrive exactly (data_base64)")
            else:
                check(report.get("data") == want_data,
                      f"{fmt}: data {report.get('data')!r} is the entry's {want_data!r}")
        if fmt == "dapr":
            check(report.get("topic") == want_stream and report.get("pubsubname") == "dapr",
                  f"dapr: topic {report.get('topic')!r} is the stream, pubsubname the group")
        matched += 1
    check(matched == len(expected), "every entry arrived once and matched")
    summary()
finally:
    stop_all()
