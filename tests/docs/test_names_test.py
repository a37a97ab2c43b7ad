"""Every test the docs name exists (docs/*.md, README.md; docs/reliability.md names most): each `Suite.Name` in backticks (both capitalised;
`Suite.*` names a whole suite) is a TEST, TEST_F, TEST_P or TYPED_TEST in tests/, or a ctest test
that tests/CMakeLists.txt adds by that name. A renamed test otherwise leaves the table pointing at
nothing.

usage: test_names_test.py SOURCE_DIR"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import check, summary  # noqa: E402

source = sys.argv[1]
DEFINITION = re.compile(r"\b(?:TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\(\s*(\w+)\s*,\s*(\w+)\s*\)")
ADDED = re.compile(r"add_test\(NAME\s+(\w+)\.(\w+)")
# Config keys (`api.listen`) and file names (`README.md`) are not capitalised and so never match.
REFERENCE = re.compile(r"`([A-Z]\w*)\.([A-Z]\w*|\*)`")

defined = set()
for directory, _, files in os.walk(os.path.join(source, "tests")):
    for name in files:
        if name.endswith((".cc", ".h")):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                defined.update(DEFINITION.findall(f.read()))
with open(os.path.join(source, "tests", "CMakeLists.txt"), encoding="utf-8") as f:
    defined.update(ADDED.findall(f.read()))
suites = {suite for suite, _ in defined}
check(len(defined) > 100, f"tests/ defines {len(defined)} tests")

docs = [os.path.join(source, "README.md")] + sorted(
    os.path.join(source, "docs", name) for name in os.listdir(os.path.join(source, "docs"))
    if name.endswith(".md"))
for doc in docs:
    with open(doc, encoding="utf-8") as f:
        references = sorted(set(REFERENCE.findall(f.read())))
    if doc.endswith("reliability.md"):
        check(len(references) > 50, f"docs/reliability.md names {len(references)} tests")
    missing = [f"{suite}.{name}" for suite, name in references
               if (suite not in suites if name == "*" else (suite, name) not in defined)]
    check(not missing, f"every test {os.path.relpath(doc, source)} names exists in tests/"
          + (f"; missing: {', '.join(missing)}" if missing else ""))
summary()
