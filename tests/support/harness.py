"""Helpers shared by the Python tests (tests/chart, tests/examples): checks that stop at the first
failure, free ports, and waiting."""
import fcntl
import os
import random
import socket
import sys
import tempfile
import time

checks = 0


def check(condition, what):
    """Counts a check; on failure prints it and exits 1 (later checks depend on earlier ones)."""
    global checks
    checks += 1
    if not condition:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def summary():
    print(f"{checks} passed, 0 failed")


_held_ports = []  # lock files of the ports this process picked, held until it exits


def free_port():
    """A free port on 127.0.0.1 picked as tests/support/redis_server.cc picks them: below the
    kernel's ephemeral range (an outgoing connection cannot take it before the server binds it),
    locked with flock in the same directory, so parallel tests never pick the same one."""
    directory = os.path.join(tempfile.gettempdir(), "streamcar-test-ports")
    os.makedirs(directory, exist_ok=True)
    for _ in range(2000):
        port = random.randint(20000, 32000)
        fd = os.open(os.path.join(directory, str(port)), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
        except OSError:
            os.close(fd)
            continue
        _held_ports.append(fd)
        return port
    raise RuntimeError("no free TCP port between 20000 and 32000")


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def eventually(condition, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()
