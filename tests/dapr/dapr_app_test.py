#!/usr/bin/env python3
"""A Dapr subscriber app, unchanged, behind the real streamcar binary (SPEC 11): streamcar asks
the app GET /dapr/subscribe (while the app is not up yet: /readyz stays 503 and it retries),
delivers each stream to the route the app declares, and reads Dapr's answers — SUCCESS and an
empty 2xx acknowledge, RETRY retries (attempts grow), DROP dead-letters to the declared
deadLetterTopic with reason dropped, a 404 dead-letters as dropped. Then the refusals: a topic
routed by a CEL match rule, and a stream the app does not declare, each end streamcar with exit
2 and a line naming the subscription.

    dapr_app_test.py STREAMCAR_BINARY
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

binary = sys.argv[1]


def flask_python():
    """An interpreter that has Flask: this one, else Debian's (scripts/setup installs
    python3-flask for /usr/bin/python3; a Python of the machine's own may carry Flask already)."""
    for python in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([python, "-c", "import flask"], capture_output=True).returncode == 0:
            return python
    sys.exit("dapr_app_test: no Python with Flask (scripts/setup installs python3-flask)")

work = tempfile.mkdtemp(prefix="streamcar-dapr-")
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


def redis_cli(*args):
    return subprocess.run(["redis-cli", "-p", str(redis_port), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def dead_letters(stream):
    """Each dead letter of `stream` as {field: value}."""
    out = subprocess.run(["redis-cli", "-p", str(redis_port), "--json", "XRANGE", stream, "-",
                          "+"], check=True, capture_output=True, text=True).stdout
    records = []
    for _, fields in json.loads(out or "[]"):
        records.append(dict(zip(fields[0::2], fields[1::2])))
    return records


def readyz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def write_config(name, app_port, admin_port, streams):
    subscriptions = ""
    for stream in streams:
        subscriptions += (
            f"  - stream: {stream}\n    group: billing\n    start: beginning\n"
            f"    handler: {{ url: \"http://127.0.0.1:{app_port}\", format: dapr }}\n"
            f"    retry: {{ max_attempts: 3, initial_backoff: 100ms, max_backoff: 200ms }}\n")
    path = os.path.join(work, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"version: 1\nredis:\n  url: redis://127.0.0.1:{redis_port}/0\n"
                f"admin:\n  listen: 127.0.0.1:{admin_port}\nsubscriptions:\n{subscriptions}")
    return path


try:
    redis_port = free_port()
    processes.append(subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no",
         "--dir", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    check(wait_port(redis_port), "redis-server answers")

    app_port = free_port()
    admin_port = free_port()
    config = write_config("streamcar.yaml", app_port, admin_port, ["orders", "checkout", "legacy"])
    log = open(os.path.join(work, "streamcar.log"), "w")
    sidecar = subprocess.Popen([binary, "run", "-c", config], stderr=log)
    processes.append(sidecar)
    check(wait_port(admin_port), "streamcar's admin port answers before the app is up")

    # Entries written before anyone listens: they wait in the stream.
    actions = {"ok": None, "empty": None, "retry-once": None, "retry": None, "drop": None}
    for action in actions:
        actions[action] = redis_cli("XADD", "orders", "*", "data",
                                    json.dumps({"action": action}), "content_type",
                                    "application/json", "type", "order.created")
    checkout_id = redis_cli("XADD", "checkout", "*", "item", "book")
    legacy_id = redis_cli("XADD", "legacy", "*", "data", "old", "content_type", "text/plain")

    time.sleep(1.0)
    check(readyz(admin_port) == 503, "/readyz is 503 while the app does not answer /dapr/subscribe")
    check(sidecar.poll() is None, "streamcar keeps waiting for the app")

    app = subprocess.Popen([flask_python(), os.path.join(here, "subscriber.py"), str(app_port)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    processes.append(app)
    deliveries = queue.Queue()
    # Flask's start-up banner shares stdout: only the app's JSON lines are deliveries.
    threading.Thread(target=lambda: [deliveries.put(json.loads(line)) for line in app.stdout
                                     if line.startswith("{")], daemon=True).start()
    ready = eventually(lambda: readyz(admin_port) == 200, 30)
    if not ready:
        with open(os.path.join(work, "streamcar.log")) as f:
            print(f.read()[-4000:])
    check(ready, "/readyz turns 200 once the app declared its routes")

    received = []

    def drain():
        while True:
            try:
                received.append(deliveries.get_nowait())
            except queue.Empty:
                return

    def settled():
        drain()
        pending = sum(int(redis_cli("XPENDING", s, "billing").split("\n")[0] or 0)
                      for s in ("orders", "checkout", "legacy"))
        return pending == 0 and len(dead_letters("poisonMessages")) == 2 and \
            len(dead_letters("legacy:dlq")) == 1

    ok = eventually(settled, 30)
    if not ok:
        with open(os.path.join(work, "streamcar.log")) as f:
            print(f.read()[-4000:])
    check(ok, "every entry is acknowledged or dead-lettered")

    # The app reports before it answers, and the reader thread may still hold the last lines.
    expected_count = {actions["ok"]: 1, actions["empty"]: 1, actions["retry-once"]: 2,
                      actions["retry"]: 3, actions["drop"]: 1, checkout_id: 1}
    by_id = {}

    def all_reported():
        drain()
        by_id.clear()
        for delivery in received:
            by_id.setdefault(delivery["event"]["id"], []).append(delivery)
        return all(len(by_id.get(i, [])) >= n for i, n in expected_count.items())

    eventually(all_reported, 5)
    for action, entry_id in actions.items():
        check(entry_id in by_id and by_id[entry_id][0]["route"] == "/orders",
              f"{action}: delivered to the declared route /orders")
    event = by_id[actions["ok"]][0]["event"]
    check(event["specversion"] == "1.0" and event["type"] == "order.created" and
          event["source"] == "/streams/orders", "the event carries the CloudEvents attributes")
    check(event["topic"] == "orders" and event["pubsubname"] == "billing",
          "Dapr's topic is the stream and pubsubname the group")
    check(event["datacontenttype"] == "application/json" and event["data"] == {"action": "ok"},
          "the data is the entry's JSON")
    check(len(by_id[actions["retry-once"]]) == 2, "RETRY once: delivered again, then acknowledged")
    check(len(by_id[actions["retry"]]) == 3, "RETRY always: delivered max_attempts (3) times")
    check(len(by_id[actions["drop"]]) == 1, "DROP: delivered once")
    check(by_id[checkout_id][0]["route"] == "/checkout" and
          by_id[checkout_id][0]["event"]["data"] == {"item": "book"},
          "routes.default: checkout arrives at /checkout")

    poison = {r["streamcar.id"]: r for r in dead_letters("poisonMessages")}
    check(set(poison) == {actions["retry"], actions["drop"]},
          "the deadLetterTopic holds exactly the exhausted and the dropped entry")
    check(poison[actions["drop"]]["streamcar.reason"] == "dropped" and
          poison[actions["drop"]]["streamcar.attempts"] == "1", "DROP dead-letters as dropped")
    check(poison[actions["retry"]]["streamcar.reason"] == "max_attempts" and
          poison[actions["retry"]]["streamcar.attempts"] == "3",
          "RETRY until max_attempts dead-letters as max_attempts")
    legacy = dead_letters("legacy:dlq")[0]
    check(legacy["streamcar.id"] == legacy_id and legacy["streamcar.reason"] == "dropped" and
          legacy["streamcar.status"] == "404", "a 404 dead-letters as dropped, at once")
    check(dead_letters("orders:dlq") == [], "nothing goes to the default dead-letter stream")

    # Refusals: exit 2 with one line naming the subscription and the reason.
    for streams, expected in ((["filtered"], "match"), (["unknown"], "declares none")):
        bad = write_config("bad.yaml", app_port, free_port(), streams)
        run = subprocess.run([binary, "run", "-c", bad], capture_output=True, text=True,
                             timeout=30)
        check(run.returncode == 2, f"{streams[0]}: streamcar exits 2 (got {run.returncode})")
        check("subscriptions[0]" in run.stderr and expected in run.stderr,
              f"{streams[0]}: the error names the subscription and says '{expected}': " +
              run.stderr.strip()[-300:])
    summary()
finally:
    stop_all()
