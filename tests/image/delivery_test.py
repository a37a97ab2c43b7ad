"""A real delivery from inside the image (scripts/image runs it): a redis-server and an HTTP
handler on the host's loopback, `streamcar run` inside the container (chroot isolation shares the
host's network), entries XADDed, and then: the handler got every one with its payload, the group
has nothing pending, the admin port answers from the host, and SIGTERM stops it with exit 0.

  python3 tests/image/delivery_test.py CONFIG REDIS_HOST -- COMMAND...

CONFIG is the path this test writes the configuration to, and which COMMAND (a `streamcar run -c
CONFIG` in the container) reads at the same path. REDIS_HOST is the name the container resolves
to 127.0.0.1 through its /etc/hosts, so the lookup goes through the image's nsswitch.conf."""
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

config_path, redis_host, separator, *command = sys.argv[1:]
assert separator == "--" and command, __doc__

ENTRIES = 25
STREAM, GROUP = "image-smoke", "delivery"

work = tempfile.mkdtemp(prefix="streamcar-image-")
processes = []
received = []
received_lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as streamcar's pool expects

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with received_lock:
            received.append(json.loads(body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def stop_all():
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    shutil.rmtree(work, ignore_errors=True)


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def descendant_named(root_pid, name):
    """The pid of the process called name below root_pid (buildah run forks the container's
    process), or None."""
    processes = {}  # pid: (parent pid, command name)
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # it exited
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        processes[int(entry)] = (int(stat[stat.rindex(")") + 2:].split()[1]), comm)
    for pid, (parent, comm) in processes.items():
        while comm == name and parent in processes:
            if parent == root_pid:
                return pid
            parent = processes[parent][0]
    return None


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status
    except OSError:
        return None


try:
    redis_port = free_port()
    processes.append(subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    check(wait_port(redis_port), "redis-server answers on the host's loopback")

    handler_port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", handler_port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    admin_port = free_port()
    with open(config_path, "w", encoding="utf-8") as f:
        f.write(f"version: 1\n"
                f"redis:\n  url: redis://{redis_host}:{redis_port}/0\n"
                f"admin:\n  listen: 127.0.0.1:{admin_port}\n"
                f"subscriptions:\n"
                f"  - stream: {STREAM}\n    group: {GROUP}\n    start: beginning\n"
                f"    handler: {{ url: \"http://127.0.0.1:{handler_port}/deliver\" }}\n")
    os.chmod(config_path, 0o644)  # the container runs as 65532

    log_path = os.path.join(work, "streamcar.log")
    log = open(log_path, "w")
    # Its own session: a stop reaches buildah and the container's process, and nothing else.
    sidecar = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    processes.append(sidecar)

    def show_log():
        with open(log_path) as f:
            print(f.read()[-4000:])

    ready = eventually(lambda: http_status(f"http://127.0.0.1:{admin_port}/readyz") == 200, 30)
    if not ready:
        show_log()
    check(ready, "streamcar in the image is ready (/readyz 200 from the host)")

    expected = {}
    for n in range(ENTRIES):
        entry_id = redis_cli(redis_port, "XADD", STREAM, "*", "n", str(n), "text", f"entry {n}")
        expected[entry_id] = {"n": str(n), "text": f"entry {n}"}

    def all_received():
        with received_lock:
            return len(received) >= ENTRIES

    ok = eventually(all_received, 30)
    if not ok:
        show_log()
    check(ok, f"the handler on the host received {ENTRIES} deliveries (got {len(received)})")
    with received_lock:
        got = {body["id"]: body for body in received}
    check(len(got) == len(received), "no entry was delivered twice")
    check(set(got) == set(expected), "the deliveries are exactly the entries XADDed")
    check(all(got[i]["payload"] == expected[i] and got[i]["stream"] == STREAM and
              got[i]["group"] == GROUP for i in expected),
          "each delivery carries its entry's stream, group and fields")

    def nothing_pending():
        return redis_cli(redis_port, "XPENDING", STREAM, GROUP).splitlines()[0] == "0"

    check(eventually(nothing_pending, 15), f"the group {GROUP} has nothing pending (all acknowledged)")

    # buildah answers a SIGTERM of its own by killing the container's process: stop streamcar itself,
    # as the kubelet would, and buildah run exits with its status.
    streamcar_pid = descendant_named(sidecar.pid, "streamcar")
    check(streamcar_pid is not None, "the container's streamcar process is found below buildah run")
    check(os.readlink(f"/proc/{streamcar_pid}/root") != "/",
          "it runs in the image's root, not the host's")
    os.kill(streamcar_pid, signal.SIGTERM)
    try:
        code = sidecar.wait(40)
    except subprocess.TimeoutExpired:
        code = None
    if code != 0:
        show_log()
    check(code == 0, f"SIGTERM stops streamcar in the image with exit 0 (got {code})")
    server.shutdown()
    summary()
finally:
    stop_all()
