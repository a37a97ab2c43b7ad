"""The documentation is self-contained and complete (issue 32):

- every relative link in README.md, docs/*.md and the chart's and the Kubernetes example's READMEs
  resolves to a file or folder inside the repository, and a `#anchor` to a heading of the target
  (GitHub's slug of it); no link leaves the repository tree, since a clone has nothing beside it;
- every configuration key the binary knows is in the reference, docs/configuration.md: the keys
  are the paths of the YAML `streamcar check` prints for config/streamcar.example.yaml (which sets
  every key; config_guard_test keeps it so), list items written `[]`. A key counts as documented
  when a code span of the reference starts with the key's dotted path or a tail of it that ends
  in its last component (`subscriptions[].handler.timeout`: `handler.timeout` or `timeout`).

usage: docs_links_test.py SOURCE_DIR STREAMCAR_BINARY"""
import os
import re
import subprocess
import sys
import urllib.parse

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import check, summary  # noqa: E402

source = os.path.realpath(sys.argv[1])
binary = sys.argv[2]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target), the target up to a space (a title may follow) or ")".
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """The lines outside fenced code blocks, with their numbers."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor of a heading: its text (code spans and links reduced to their text),
    lower case, punctuation other than '-' and '_' dropped, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    """Every heading anchor of a Markdown file; a repeated slug gets -1, -2, ... as on GitHub."""
    seen = {}
    result = set()
    with open(path, encoding="utf-8") as f:
        for _, line in prose_lines(f.read()):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(path):
    with open(path, encoding="utf-8") as f:
        for number, line in prose_lines(f.read()):
            line = CODE_SPAN.sub("", line)
            for match in INLINE_LINK.finditer(line):
                yield number, match.group(1)
            match = REFERENCE_LINK.match(line)
            if match:
                yield number, match.group(1)


docs_dir = os.path.join(source, "docs")
documents = [os.path.join(source, "README.md"),
             os.path.join(source, "charts", "streamcar", "README.md"),
             os.path.join(source, "examples", "kubernetes", "README.md")]
documents += sorted(os.path.join(docs_dir, name) for name in os.listdir(docs_dir)
                    if name.endswith(".md"))

# The slug rules on headings this repository has.
check(slug("Delivery policies: `circuit_breaker` and `handler.max_rps` (SPEC 11)")
      == "delivery-policies-circuit_breaker-and-handlermax_rps-spec-11",
      "a heading's slug drops backticks, dots, colons and parentheses")
check(slug("Redis topologies: standalone, Cluster, Sentinel")
      == "redis-topologies-standalone-cluster-sentinel",
      "a heading's slug lowers case and drops commas")

anchor_cache = {}
total = 0
for document in documents:
    name = os.path.relpath(document, source)
    broken = []
    for number, target in links(document):
        parsed = urllib.parse.urlsplit(target)
        if parsed.scheme or target.startswith("//"):
            continue  # a web address or mailto:, not a file of the repository
        total += 1
        where = f"{name}:{number}: {target}"
        path_part = urllib.parse.unquote(parsed.path)
        if path_part.startswith("/"):
            broken.append(f"{where} (an absolute path: not inside a clone)")
            continue
        resolved = os.path.realpath(os.path.join(os.path.dirname(document), path_part)) \
            if path_part else document
        if os.path.commonpath([resolved, source]) != source:
            broken.append(f"{where} (leaves the repository)")
            continue
        if not os.path.exists(resolved):
            broken.append(f"{where} (no such file)")
            continue
        if parsed.fragment:
            if not resolved.endswith(".md") or os.path.isdir(resolved):
                broken.append(f"{where} (an anchor into a file that is not Markdown)")
                continue
            if resolved not in anchor_cache:
                anchor_cache[resolved] = anchors(resolved)
            if parsed.fragment not in anchor_cache[resolved]:
                broken.append(f"{where} (no heading with that anchor)")
    check(not broken, f"every relative link of {name} resolves inside the repository"
          + ("".join(f"\n  {b}" for b in broken) if broken else ""))
check(total > 100, f"the documents hold {total} relative links (the parser finds them)")

# The keys the binary knows: the paths of the effective configuration `check` prints.
example = os.path.join(source, "config", "streamcar.example.yaml")
env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_MODE")}
result = subprocess.run([binary, "check", "-c", example], capture_output=True, text=True,
                        env=env, timeout=60)
check(result.returncode == 0, f"streamcar check accepts {os.path.relpath(example, source)}"
      + (f": {result.stderr.strip()}" if result.returncode else ""))
effective = yaml.safe_load(result.stdout)


def key_paths(node, path):
    """(path, whether it holds keys of its own) for every key under node."""
    if isinstance(node, dict):
        for key, value in node.items():
            child = f"{path}.{key}" if path else str(key)
            yield child, isinstance(value, dict) and key != "headers"
            # A mapping of the user's own names (handler.headers) has no keys of streamcar's.
            if key != "headers":
                yield from key_paths(value, child)
    elif isinstance(node, list):
        for item in node:
            yield from key_paths(item, path + "[]")


sections = dict(key_paths(effective, ""))
keys = sorted(sections)
check(len(keys) > 100, f"streamcar check prints {len(keys)} key paths")
for expected in ("redis.tls.verify", "subscriptions[].handler.auth.hmac_secret",
                 "subscriptions[].routes[].equals", "streams[].retention.max_age",
                 "tracing.sample_ratio"):
    check(expected in keys, f"the key paths include {expected}")

reference_path = os.path.join(docs_dir, "configuration.md")
with open(reference_path, encoding="utf-8") as f:
    spans = [span for _, span in CODE_SPAN.findall(f.read())]


def documented(key):
    """The tails of the key's dotted path ending in its last component, with `[]` dropped
    (`subscriptions[].handler.timeout`: `handler.timeout`, `timeout`), or the whole path; one of
    them starts a code span, followed by nothing or by what is not part of a name. A section
    (`redis.tls`) may be followed by a key of its own (`redis.tls.verify`, `redis.tls.*`)."""
    parts = key.replace("[]", "").split(".")
    tails = {key} | {".".join(parts[i:]) for i in range(len(parts))}
    end = r"(?![\w\[])" if sections[key] else r"(?![\w.\[])"
    return any(re.match(re.escape(tail) + end, span.strip()) for tail in tails for span in spans)


missing = [key for key in keys if not documented(key)]
check(not missing, "every configuration key streamcar check prints is in docs/configuration.md"
      + (": missing " + ", ".join(missing) if missing else ""))
summary()
