"""The build's revision stamp (sidecar/common/version_stamp.cmake) run as the build runs it, on
scratch checkouts: an explicit revision wins, else the checkout's HEAD, else "unknown"; the date
is SOURCE_DATE_EPOCH's when set; a second run with nothing changed leaves the header untouched
(so nothing recompiles), and a new commit rewrites it.

usage: version_stamp_test.py SOURCE_DIR"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import check, summary  # noqa: E402

source = sys.argv[1]
template = os.path.join(source, "sidecar", "common", "version.h.in")
script = os.path.join(source, "sidecar", "common", "version_stamp.cmake")


def stamp(output, checkout, revision="", epoch=None):
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = str(epoch)
    return subprocess.run(
        ["cmake", f"-DTEMPLATE={template}", f"-DOUTPUT={output}", f"-DSOURCE_DIR={checkout}",
         "-DVERSION=9.8.7", f"-DREVISION={revision}", "-P", script],
        env=env, capture_output=True, text=True)


def stamped(output):
    text = open(output).read()
    return {name: re.search(rf'{name} = "([^"]*)"', text).group(1)
            for name in ("kVersion", "kRevision", "kBuildDate")}


def git(checkout, *args):
    return subprocess.run(["git", "-C", checkout, "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


with tempfile.TemporaryDirectory() as scratch:
    output = os.path.join(scratch, "version.h")

    # Reproducible: the given revision and SOURCE_DATE_EPOCH's instant, in UTC.
    result = stamp(output, scratch, revision="0123abcd4567", epoch=1764644280)
    check(result.returncode == 0, f"an explicit revision is stamped ({result.stderr.strip()})")
    check(stamped(output) == {"kVersion": "9.8.7", "kRevision": "0123abcd4567",
                              "kBuildDate": "2025-12-02T02:58:00Z"},
          f"version, revision and SOURCE_DATE_EPOCH's date: {stamped(output)}")
    before = os.stat(output).st_mtime_ns
    time.sleep(0.05)
    stamp(output, scratch, revision="0123abcd4567", epoch=1764644280)
    check(os.stat(output).st_mtime_ns == before, "the same stamp again leaves the file untouched")

    # Not a git checkout, no revision given: "unknown".
    plain = os.path.join(scratch, "plain")
    os.mkdir(plain)
    stamp(output, plain)
    check(stamped(output)["kRevision"] == "unknown", "no checkout and no revision: unknown")
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamped(output)["kBuildDate"]),
          f"without SOURCE_DATE_EPOCH the date is now, ISO 8601 UTC: {stamped(output)['kBuildDate']}")

    # A checkout: its HEAD, 12 characters; the date stays while the revision does.
    checkout = os.path.join(scratch, "checkout")
    os.mkdir(checkout)
    git(checkout, "init", "-q")
    git(checkout, "commit", "-q", "--allow-empty", "-m", "one")
    stamp(output, checkout)
    first = stamped(output)
    check(first["kRevision"] == git(checkout, "rev-parse", "--short=12", "HEAD"),
          f"the checkout's HEAD is stamped: {first['kRevision']}")
    check(len(first["kRevision"]) == 12, "12 hex digits")
    before = os.stat(output).st_mtime_ns
    time.sleep(1.1)  # a later second: a date taken anew would differ
    stamp(output, checkout)
    check(stamped(output) == first and os.stat(output).st_mtime_ns == before,
          "a rebuild of the same revision keeps the header as it is (nothing recompiles)")

    # A new commit: the next build stamps it, with a new date.
    git(checkout, "commit", "-q", "--allow-empty", "-m", "two")
    stamp(output, checkout)
    second = stamped(output)
    check(second["kRevision"] == git(checkout, "rev-parse", "--short=12", "HEAD")
          and second["kRevision"] != first["kRevision"], "a new commit is stamped at the next build")
    check(second["kBuildDate"] > first["kBuildDate"], "with the time of that build")
    # An explicit revision wins over the checkout's.
    stamp(output, checkout, revision="release-1")
    check(stamped(output)["kRevision"] == "release-1", "STREAMCAR_REVISION wins over git")

    # A revision that would break the header (or a label value) is refused.
    result = stamp(output, checkout, revision='a"b')
    check(result.returncode != 0 and "STREAMCAR_REVISION" in result.stderr,
          "a revision with a quote fails the configure, naming the variable")

summary()
