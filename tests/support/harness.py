"""Helpers shared by the Python tests (tests/chart, tests/examples): checks that stop at the first
failure, free ports, and waiting."""
import socket
import sys
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
