"""Helpers shared by the Python tests (tests/chart, tests/examples): checks that stop at the first
failure, free ports, and waiting."""
import fcntl
import os
import random
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


_held_ports = []  # lock files of the ports this process picked, held until it exits


def _test_port_range():
    """As TestPortRange in tests/support/redis_server.cc."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except OSError:
        low, high = 32768, 60999
    below_last = min(low - 1, 29999)
    if below_last - 10000 + 1 >= 2000:
        return 10000, below_last
    if 65535 - high >= 2000:
        return high + 1, 65535
    raise RuntimeError("no room for test ports outside the ephemeral range (net.ipv4.ip_local_port_range)")


def free_port():
    """A free port on 127.0.0.1 picked as tests/support/redis_server.cc picks them: outside the
    kernel's ephemeral range (an outgoing connection cannot take it before the server binds it),
    locked with flock in the same directory, so parallel tests never pick the same one."""
    directory = "/tmp/streamcar-test-ports"
    try:
        os.mkdir(directory, 0o1777)
        os.chmod(directory, 0o1777)
    except FileExistsError:
        pass
    first, last = _test_port_range()
    for _ in range(2000):
        port = random.randint(first, last)
        try:
            fd = os.open(os.path.join(directory, str(port)), os.O_RDONLY | os.O_CREAT, 0o666)
        except OSError:
            continue
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
    raise RuntimeError(f"no free TCP port in {first}-{last}")


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
