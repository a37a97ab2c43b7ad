#!/usr/bin/env python3
"""The alert rules (charts/streamcar/files/prometheus-rules.yaml), checked with promtool itself.

1. `promtool check rules` on the file;
2. `promtool test rules` on tests/chart/prometheus_rules_test.yaml (series in, alerts out);
3. that test file has, for EVERY alert of the rules file, a case where it fires and one where it
   stays silent (a new alert without both fails here);
4. every alert carries a severity (warning or critical), a summary and a description, and a
   runbook_url on the one runbook base whose anchor is a section of docs/runbooks.md.

Usage: alerts_test.py REPO_ROOT
"""
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, summary  # noqa: E402

ROOT = sys.argv[1]
RULES = os.path.join(ROOT, "charts", "streamcar", "files", "prometheus-rules.yaml")
UNIT_TESTS = os.path.join(ROOT, "tests", "chart", "prometheus_rules_test.yaml")
RUNBOOKS = os.path.join(ROOT, "docs", "runbooks.md")
# The base every runbook_url starts with; the chart swaps it for metrics.prometheusRule.runbookBaseUrl.
RUNBOOK_BASE = "https://github.com/streamcar/streamcar/blob/main/docs/runbooks.md"


def promtool(*args):
    result = subprocess.run(["promtool", *args], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout, result.stderr)
    return result


check(promtool("check", "rules", RULES).returncode == 0, "promtool check rules prometheus-rules.yaml")
# promtool resolves rule_files relative to the test file's folder.
result = subprocess.run(["promtool", "test", "rules", os.path.basename(UNIT_TESTS)],
                        cwd=os.path.dirname(UNIT_TESTS), capture_output=True, text=True)
if result.returncode != 0:
    print(result.stdout, result.stderr)
check(result.returncode == 0, "promtool test rules prometheus_rules_test.yaml")

with open(RULES) as f:
    alerts = [rule for group in yaml.safe_load(f)["groups"] for rule in group["rules"] if "alert" in rule]
with open(UNIT_TESTS) as f:
    cases = [case for test in yaml.safe_load(f)["tests"] for case in test.get("alert_rule_test", [])]
names = [alert["alert"] for alert in alerts]
check(len(names) == len(set(names)) and len(names) >= 8, f"{len(names)} alerts, each named once: {names}")
for name in names:
    fires = [c for c in cases if c["alertname"] == name and c.get("exp_alerts")]
    silent = [c for c in cases if c["alertname"] == name and not c.get("exp_alerts")]
    check(fires and silent, f"{name}: unit-tested firing ({len(fires)} cases) and not firing ({len(silent)})")
tested = {c["alertname"] for c in cases}
check(tested <= set(names), f"the unit tests name only existing alerts: {sorted(tested - set(names))}")

with open(RUNBOOKS) as f:
    # GitHub's heading anchors: lower case, spaces to '-', punctuation dropped.
    anchors = {re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
               for line in f if line.startswith("## ")}
for alert in alerts:
    name, annotations = alert["alert"], alert.get("annotations", {})
    check(alert.get("labels", {}).get("severity") in ("warning", "critical"), f"{name}: severity warning or critical")
    check(annotations.get("summary") and annotations.get("description"), f"{name}: summary and description")
    check("$labels.subscription" in annotations["summary"] or "$labels.pod" in annotations["summary"],
          f"{name}: the summary names the subscription or pod")
    url = annotations.get("runbook_url", "")
    check(url == f"{RUNBOOK_BASE}#{name.lower()}", f"{name}: runbook_url {url}")
    check(name.lower() in anchors, f"{name}: docs/runbooks.md has the section '## {name}'")

summary()
