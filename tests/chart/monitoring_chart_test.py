#!/usr/bin/env python3
"""The chart's two monitoring objects, rendered by helm and checked against the files they embed.

- Neither is rendered by default.
- metrics.grafanaDashboard: a ConfigMap whose JSON is byte for byte
  charts/streamcar/files/grafana-dashboard.json, with the sidecar's label (default
  grafana_dashboard: "1", configurable), the folder annotation only when a folder is set, the
  namespace override, extra labels and annotations.
- metrics.prometheusRule: a monitoring.coreos.com/v1 PrometheusRule whose groups are the rules
  file's, identical except that runbookBaseUrl replaces each runbook_url's base (keeping its
  anchor) and alertLabels are added to every alert (not over its severity); `promtool check rules` accepts the rendered groups; its labels reach the metadata.
- The values schema refuses unknown keys under both (a typo is an error, not silence).

Usage: monitoring_chart_test.py REPO_ROOT
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, summary  # noqa: E402

ROOT = sys.argv[1]
CHART = os.path.join(ROOT, "charts", "streamcar")
HELM = subprocess.run([os.path.join(ROOT, "scripts", "helm")], check=True, capture_output=True,
                      text=True).stdout.strip()
DASHBOARD = os.path.join(CHART, "files", "grafana-dashboard.json")
RULES = os.path.join(CHART, "files", "prometheus-rules.yaml")


def render(*args, ok=True):
    result = subprocess.run([HELM, "template", "rel", CHART, "--namespace", "shop", *args],
                            capture_output=True, text=True)
    if ok:
        if result.returncode != 0:
            print(result.stderr)
        check(result.returncode == 0, f"helm template {' '.join(args) or '(defaults)'}")
        return [d for d in yaml.safe_load_all(result.stdout) if d]
    return result


def of_kind(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


docs = render()
check(not of_kind(docs, "ConfigMap", "rel-streamcar-dashboard") and not of_kind(docs, "PrometheusRule"),
      "defaults: no dashboard ConfigMap, no PrometheusRule")
for extra in ([], ["-f", os.path.join(CHART, "examples", "app-with-sidecar.yaml")]):
    lint = subprocess.run([HELM, "lint", "--strict", CHART, *extra, "--set", "metrics.grafanaDashboard.enabled=true",
                           "--set", "metrics.prometheusRule.enabled=true"], capture_output=True, text=True)
    if lint.returncode != 0:
        print(lint.stdout, lint.stderr)
    check(lint.returncode == 0, f"helm lint --strict with both on {' '.join(extra) or '(defaults)'}")

# The dashboard ConfigMap.
with open(DASHBOARD) as f:
    dashboard_text = f.read()
json.loads(dashboard_text)
docs = render("--set", "metrics.grafanaDashboard.enabled=true")
cm = of_kind(docs, "ConfigMap", "rel-streamcar-dashboard")
check(len(cm) == 1, "grafanaDashboard.enabled: one ConfigMap rel-streamcar-dashboard")
cm = cm[0]
check(cm["data"] == {"streamcar-dashboard.json": dashboard_text.rstrip("\n")},
      "its JSON is files/grafana-dashboard.json, byte for byte")
check(cm["metadata"]["labels"].get("grafana_dashboard") == "1", "labelled grafana_dashboard: \"1\" for the sidecar")
check(cm["metadata"]["namespace"] == "shop" and not cm["metadata"].get("annotations"),
      "in the release's namespace, no folder annotation by default")
docs = render("--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.label=dashboards",
              "--set", "metrics.grafanaDashboard.labelValue=streamcar", "--set", "metrics.grafanaDashboard.namespace=monitoring",
              "--set", "metrics.grafanaDashboard.folder=Streams", "--set", "metrics.grafanaDashboard.labels.team=data",
              "--set", "metrics.grafanaDashboard.annotations.owner=data-team")
meta = of_kind(docs, "ConfigMap", "rel-streamcar-dashboard")[0]["metadata"]
check(meta["labels"].get("dashboards") == "streamcar" and "grafana_dashboard" not in meta["labels"]
      and meta["labels"].get("team") == "data", f"label, value and extra labels configurable: {meta['labels']}")
check(meta["namespace"] == "monitoring", "namespace configurable (Grafana's, for a sidecar that searches only its own)")
check(meta["annotations"] == {"grafana_folder": "Streams", "owner": "data-team"}, f"folder annotation and extras: {meta['annotations']}")
docs = render("--set", "metrics.grafanaDashboard.enabled=true", "--set", "metrics.grafanaDashboard.folder=Streams",
              "--set", "metrics.grafanaDashboard.folderAnnotation=k8s-sidecar-target-directory")
meta = of_kind(docs, "ConfigMap", "rel-streamcar-dashboard")[0]["metadata"]
check(meta["annotations"] == {"k8s-sidecar-target-directory": "Streams"}, "folder annotation name configurable")

# The PrometheusRule.
with open(RULES) as f:
    file_groups = yaml.safe_load(f)["groups"]
docs = render("--set", "metrics.prometheusRule.enabled=true")
rules = of_kind(docs, "PrometheusRule")
check(len(rules) == 1 and rules[0]["apiVersion"] == "monitoring.coreos.com/v1", "prometheusRule.enabled: one monitoring.coreos.com/v1 PrometheusRule")
check(rules[0]["spec"]["groups"] == file_groups and rules[0]["metadata"]["namespace"] == "shop",
      "its groups are the rules file's, unchanged without runbookBaseUrl")
base = "https://wiki.example.com/ops/streamcar-runbooks"
docs = render("--set", "metrics.prometheusRule.enabled=true", "--set", f"metrics.prometheusRule.runbookBaseUrl={base}",
              "--set", "metrics.prometheusRule.labels.release=kube-prometheus-stack",
              "--set", "metrics.prometheusRule.namespace=monitoring",
              "--set", "metrics.prometheusRule.alertLabels.team=data", "--set", "metrics.prometheusRule.alertLabels.severity=page")
rule = of_kind(docs, "PrometheusRule")[0]
check(rule["metadata"]["labels"].get("release") == "kube-prometheus-stack" and rule["metadata"]["namespace"] == "monitoring",
      "labels (for the ruleSelector) and namespace configurable")
expected = copy.deepcopy(file_groups)
for group in expected:
    for r in group["rules"]:
        if "alert" in r:
            r["annotations"]["runbook_url"] = f"{base}#{r['alert'].lower()}"
            r["labels"]["team"] = "data"  # added; the alert's own severity stays
check(rule["spec"]["groups"] == expected,
      "runbookBaseUrl replaces every runbook_url's base and keeps its anchor; alertLabels reach every alert, its severity kept")
with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
    yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
    f.flush()
    result = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    check(result.returncode == 0, f"promtool check rules on the rendered PrometheusRule's groups: {result.stdout.strip()} {result.stderr.strip()}")

# The schema closes both objects.
for typo in ("metrics.grafanaDashboard.enable=true", "metrics.prometheusRule.runbookBaseURL=https://x",
             "metrics.prometheusRule.runbookBaseUrl=wiki/runbooks",  # not a URL
             "metrics.grafanaDashboard.labels.team=1"):  # a number: not a label value
    result = render("--set", typo, ok=False)
    check(result.returncode != 0 and "values don't meet the specifications of the schema" in result.stderr,
          f"the schema refuses {typo}")

summary()
