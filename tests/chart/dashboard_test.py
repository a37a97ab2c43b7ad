#!/usr/bin/env python3
"""The dashboard and the alerts against a real Prometheus scraping a real streamcar under load.

Starts a redis-server, the example handler (examples/python/handler.py: `action` fail-once, fail
and reject give retries and dead letters), streamcar with a plain subscription (plus the log API,
retention and a SQLite archive on its stream) and a sharded one, and Debian's Prometheus scraping
streamcar every second with the labels a ServiceMonitor scrape carries (namespace, pod) and the
alert rules loaded. Under about 40 s of load (XADDs of both subscriptions, API appends and reads):

1. the dashboard JSON is Grafana's current model: schemaVersion >= 39, a `datasource` variable of
   type datasource (prometheus), every panel and query on "${datasource}" (no hard-coded uid), the
   namespace / pod / subscription variables, unique panel ids; every `by (...)` / `on (...)` and
   legend naming a subscription, pod or stream also names the namespace (the same names in two
   namespaces are two things, and "All" namespaces is the default);
2. each template variable's label_values query answers the labels of this setup;
3. EVERY panel query, with the variables substituted (explicit values in Grafana's multi-value
   format, then "All"), is evaluated with /api/v1/query at the end of the load: an error fails,
   and so does an empty result unless the panel is listed in MAY_BE_EMPTY. Prometheus scrapes
   the one streamcar twice, as pod streamcar-0 of two namespaces (a StatefulSet deployed in both
   with the same subscriptions): with "All", every series that names a subscription, pod or
   stream comes once per namespace, none merged across them;
4. every range query is evaluated with /api/v1/query_range over the run (the data the plots of
   docs/dashboard.md are drawn from, `--plot PNG`);
5. the load has the shape the panels are meant to show (successes, retries, rejects, both
   dead-letter reasons, trims, archive folds, API appends);
6. every alert and recording expression evaluates without error; Prometheus loaded every rule and
   evaluates it healthily; StreamcarDeadLetters fires for both reasons and nothing else fires
   but StreamcarDeadLetters.

Every process the test starts is stopped, by its own handle, whatever happens.

Usage: dashboard_test.py STREAMCAR_BINARY REPO_ROOT [--plot PNG]
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402

BINARY, ROOT = sys.argv[1], sys.argv[2]
PLOT = sys.argv[sys.argv.index("--plot") + 1] if "--plot" in sys.argv else None
DASHBOARD = os.path.join(ROOT, "charts", "streamcar", "files", "grafana-dashboard.json")
RULES = os.path.join(ROOT, "charts", "streamcar", "files", "prometheus-rules.yaml")
LOAD_SECONDS = 40
NAMESPACE, POD = "streamcar-test", "streamcar-0"
# The same streamcar scraped a second time as if it ran in another namespace under the same names.
OTHER_NAMESPACE = "streamcar-other"
# Labels whose values are only unique inside one namespace.
NAMESPACED = ("subscription", "pod", "stream")
SUBSCRIPTIONS = ["orders/billing", "payments/ledger"]
# Grafana's $__rate_interval is max(4 x scrape interval, $__interval + scrape interval); with a
# 1 s scrape and a dashboard a minute wide that is a few seconds. 10 s keeps several samples.
RATE_INTERVAL = "10s"
# Panels (by title) that may legitimately have no data in this setup, with the reason. This setup
# runs every feature the dashboard shows (a sharded subscription, the log API, retention, the
# archive), so none may: an empty panel here is a wrong query or a missing metric.
MAY_BE_EMPTY = {}


def panels_of(dashboard):
    """Every panel, the ones inside collapsed rows included, with the row each sits in."""
    out, row = [], None
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            out.extend((row, p) for p in panel.get("panels", []))
        else:
            out.append((row, panel))
    return out


def substitute(expr, values):
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    if "$" in expr:
        check(False, f"every variable substituted in {expr!r}")
    return expr


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path, **params):
        url = f"{self.base}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400 / 422: a bad query, the body says why; 503: starting
            body = e.read().decode(errors="replace")
            try:
                return json.loads(body)
            except ValueError:
                return {"status": f"http {e.code}", "error": body}

    def query(self, expr, at):
        return self.get("/api/v1/query", query=expr, time=f"{at:.3f}")

    def query_range(self, expr, start, end, step=1):
        return self.get("/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=step)


def legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip() or json.dumps(labels)


# 1. the JSON model
with open(DASHBOARD) as f:
    dashboard = json.load(f)
check(dashboard["schemaVersion"] >= 39, f"schemaVersion {dashboard['schemaVersion']}")
variables = {v["name"]: v for v in dashboard["templating"]["list"]}
check(variables.get("datasource", {}).get("type") == "datasource" and variables["datasource"]["query"] == "prometheus",
      "a `datasource` variable of type datasource, plugin prometheus")
check(all(variables.get(n, {}).get("type") == "query" for n in ("namespace", "pod", "subscription")),
      "namespace, pod and subscription query variables")
panels = panels_of(dashboard)
ids = [p["id"] for _, p in panels] + [p["id"] for p in dashboard["panels"] if p["type"] == "row"]
check(len(ids) == len(set(ids)), "panel ids unique")
datasources = [p.get("datasource") for _, p in panels] + [t.get("datasource") for _, p in panels for t in p["targets"]]
datasources += [v["datasource"] for v in variables.values() if "datasource" in v]
check(all(d == {"type": "prometheus", "uid": "${datasource}"} for d in datasources),
      f"every panel, query and variable on ${{datasource}} ({len(datasources)}), no hard-coded uid")
check(all(p["type"] in ("timeseries", "stat", "table") for _, p in panels), "timeseries, stat and table panels only")
queries = [(row, p, t) for row, p in panels for t in p["targets"]]
check(len(queries) >= 40, f"{len(queries)} panel queries in {len(panels)} panels")
check(set(MAY_BE_EMPTY) <= {p["title"] for _, p in panels}, "MAY_BE_EMPTY names existing panels")
for row, panel, target in queries:
    where = f"[{row}] {panel['title']} {target['refId']}"
    for clause in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", target["expr"]):
        labels = {label.strip() for label in clause.split(",")}
        check(not (labels & set(NAMESPACED)) or "namespace" in labels, f"{where}: ({clause}) keeps the namespace")
    names = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
    check(not (names & set(NAMESPACED)) or "namespace" in names, f"{where}: legend {target.get('legendFormat')!r} names the namespace")

work = tempfile.mkdtemp(prefix="streamcar-dashboard-")
procs = {}
logs = {}


def start(name, args, **kwargs):
    logs[name] = open(os.path.join(work, f"{name}.log"), "w")
    procs[name] = subprocess.Popen(args, stdout=logs[name], stderr=subprocess.STDOUT, **kwargs)
    return procs[name]


def dump_logs():
    for name in logs:
        logs[name].flush()
        with open(os.path.join(work, f"{name}.log")) as f:
            tail = f.read()[-3000:]
        print(f"--- {name}.log (tail)\n{tail}")


try:
    redis_port, handler_port, admin_port, api_port, prom_port = (free_port() for _ in range(5))
    start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", work])
    start("handler", [sys.executable, os.path.join(ROOT, "examples", "python", "handler.py"), str(handler_port)])
    check(wait_port(redis_port) and wait_port(handler_port), "redis-server and the handler listen")
    config = os.path.join(work, "streamcar.yaml")
    with open(config, "w") as f:
        f.write(f"""version: 1
redis: {{url: "redis://127.0.0.1:{redis_port}/0"}}
consumer: {{name: {POD}}}
admin: {{listen: "127.0.0.1:{admin_port}"}}
defaults:
  handler: {{url: "http://127.0.0.1:{handler_port}/", timeout: 2s}}
  retry: {{max_attempts: 3, initial_backoff: 200ms, max_backoff: 1s}}
api: {{listen: "127.0.0.1:{api_port}"}}
streams:
  - name: orders
    produce: true
    retention: {{max_len: 300, interval: 2s}}
    archive: true
archive: {{url: "sqlite://{work}/archive.db", interval: 2s}}
subscriptions:
  - stream: orders
    group: billing
    start: beginning
  - stream: payments
    group: ledger
    start: beginning
    sharding: {{shards: 2, initial_delay: 1s}}
""")
    sidecar = start("streamcar", [BINARY, "run", "-c", config])
    check(wait_port(admin_port) and wait_port(api_port), "streamcar serves /metrics and the log API")

    prom_config = os.path.join(work, "prometheus.yml")
    with open(prom_config, "w") as f:
        f.write(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: streamcar
    static_configs:
      - targets: ["127.0.0.1:{admin_port}"]
        labels: {{namespace: {NAMESPACE}, pod: {POD}}}
  - job_name: streamcar-other
    static_configs:
      - targets: ["127.0.0.1:{admin_port}"]
        labels: {{namespace: {OTHER_NAMESPACE}, pod: {POD}}}
""")
    start("prometheus", ["prometheus", f"--config.file={prom_config}", f"--storage.tsdb.path={work}/tsdb",
                         f"--web.listen-address=127.0.0.1:{prom_port}"])
    prom = Prometheus(prom_port)
    check(eventually(lambda: wait_port(prom_port, 1) and prom.get("/api/v1/query", query="up")["status"] == "success", 30),
          "Prometheus answers")
    check(eventually(lambda: [r["value"][1] for r in prom.get("/api/v1/query", query='up{job="streamcar"}')["data"]["result"]] == ["1"], 30),
          "Prometheus scrapes streamcar (up == 1)")

    # The load: both subscriptions' streams, each entry's `action` drawn from a mix with failures.
    stop_load = threading.Event()
    mix = ["ok"] * 16 + ["fail-once"] * 2 + ["fail", "reject"]

    def load():
        cli = subprocess.Popen(["redis-cli", "-p", str(redis_port)], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, text=True)
        n = 0
        try:
            while not stop_load.is_set():
                n += 1
                cli.stdin.write(f"XADD orders * action {random.choice(mix)} n {n}\n")
                cli.stdin.write(f"XADD payments:{{{n % 2}}} * action {random.choice(mix)} n {n}\n")
                cli.stdin.flush()
                if n % 5 == 0:  # the log API: appends (with a receipt) and reads
                    body = json.dumps({"action": random.choice(mix), "n": n}).encode()
                    request = urllib.request.Request(f"http://127.0.0.1:{api_port}/v1/streams/orders/entries",
                                                     data=body, headers={"Content-Type": "application/json"})
                    urllib.request.urlopen(request, timeout=5).read()
                if n % 20 == 0:
                    urllib.request.urlopen(f"http://127.0.0.1:{api_port}/v1/streams/orders/entries?count=10", timeout=5).read()
                time.sleep(0.05)
        finally:
            cli.stdin.close()
            cli.wait(timeout=10)

    loader = threading.Thread(target=load)
    load_start = time.time()
    loader.start()
    time.sleep(LOAD_SECONDS)
    load_end = time.time()  # the queries are evaluated here: still under load
    stop_load.set()
    loader.join(timeout=30)
    check(not loader.is_alive() and sidecar.poll() is None, "the load ran; streamcar still runs")
    time.sleep(2)  # Prometheus has scraped past load_end

    # 2. the template variables
    explicit = {"datasource": "", "namespace": NAMESPACE, "pod": POD,
                "subscription": "(" + "|".join(SUBSCRIPTIONS) + ")"}  # Grafana's multi-value regex
    expected = {"namespace": sorted([NAMESPACE, OTHER_NAMESPACE]), "pod": [POD], "subscription": SUBSCRIPTIONS}
    for name in ("namespace", "pod", "subscription"):
        m = re.fullmatch(r"label_values\((.*), (\w+)\)", variables[name]["definition"])
        check(m and variables[name]["query"] == variables[name]["definition"], f"${name}: {variables[name]['definition']}")
        answer = prom.get(f"/api/v1/label/{m.group(2)}/values", **{"match[]": substitute(m.group(1), explicit)})
        check(answer["status"] == "success" and answer["data"] == expected[name], f"${name} offers {answer.get('data')}")

    # 3. every panel query, instant, with explicit values and with All
    every = dict(explicit, namespace=".*", pod=".*", subscription=".*")
    empty = []
    for row, panel, target in queries:
        for values, how in ((explicit, "explicit"), (every, "All")):
            expr = substitute(target["expr"], values)
            answer = prom.query(expr, load_end)
            if answer["status"] != "success":
                print(f"query error: {answer}")
            check(answer["status"] == "success", f"[{row}] {panel['title']} {target['refId']} ({how}) evaluates")
            if not answer["data"]["result"] and panel["title"] not in MAY_BE_EMPTY:
                empty.append(f"[{row}] {panel['title']} {target['refId']} ({how}): {expr}")
            if how == "All":
                named = [r["metric"] for r in answer["data"]["result"] if set(r["metric"]) & set(NAMESPACED)]
                per_namespace = {}
                for metric in named:
                    # the scrape job tells the two scrapes apart too: not part of what is compared
                    key = tuple(sorted((k, v) for k, v in metric.items() if k not in ("namespace", "job")))
                    per_namespace.setdefault(key, set()).add(metric.get("namespace"))
                check(all(found == {NAMESPACE, OTHER_NAMESPACE} for found in per_namespace.values()),
                      f"[{row}] {panel['title']} {target['refId']} (All): each series once per namespace "
                      f"({len(named)} series)")
    for line in empty:
        print(f"EMPTY: {line}")
    check(not empty, f"every panel query has data ({len(empty)} empty)")

    # 4. range queries over the run: the plots' data
    plots = {"start": load_start, "end": load_end, "panels": []}
    for row, panel in panels:
        series = []
        for target in panel["targets"]:
            if target.get("instant"):
                continue
            expr = substitute(target["expr"], explicit)
            answer = prom.query_range(expr, load_start, load_end)
            check(answer["status"] == "success", f"[{row}] {panel['title']} {target['refId']}: query_range over the run")
            for r in answer["data"]["result"]:
                series.append({"legend": legend(target["legendFormat"], r["metric"]),
                               "points": [[float(t), float(v)] for t, v in r["values"]]})
        plots["panels"].append({"row": row, "title": panel["title"], "type": panel["type"],
                                "unit": panel["fieldConfig"]["defaults"].get("unit", ""), "series": series})

    # 5. the load's shape, as the panels show it
    def value(expr):
        result = prom.query(expr, load_end)["data"]["result"]
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in result}

    outcomes = {dict(k)["outcome"]: v for k, v in value('sum by (outcome) (increase(streamcar_deliveries_total[1m]))').items()}
    check(all(outcomes.get(o, 0) > 0 for o in ("success", "retry", "reject")), f"deliveries by outcome: {outcomes}")
    reasons = {dict(k)["reason"]: v for k, v in value('sum by (reason) (increase(streamcar_dead_lettered_total[1m]))').items()}
    check(reasons.get("max_attempts", 0) > 0 and reasons.get("rejected", 0) > 0, f"dead letters by reason: {reasons}")
    retention = value('sum(streamcar_trimmed_total) > 0 and sum(streamcar_archive_folded_total) > 0')
    check(retention, "entries trimmed and archived")
    check(value('sum(streamcar_produced_total) > 0'), "entries appended through the API")
    owned = value(f'sum(streamcar_shard_owned{{namespace="{NAMESPACE}", subscription="payments/ledger"}})')
    check(list(owned.values()) == [2.0], f"the sharded subscription's 2 shards are owned: {owned}")

    # 6. the alert rules
    with open(RULES) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    for rule in rules:
        answer = prom.query(rule["expr"], load_end)
        check(answer["status"] == "success", f"{rule.get('alert') or rule.get('record')}: its expression evaluates")
    loaded = [r for g in prom.get("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
    check(sorted(r["name"] for r in loaded) == sorted(r.get("alert") or r.get("record") for r in rules),
          f"Prometheus loaded every rule ({len(loaded)})")
    check(all(r["health"] == "ok" and not r.get("lastError") for r in loaded),
          f"every rule evaluates healthily: {[(r['name'], r.get('lastError')) for r in loaded if r['health'] != 'ok']}")
    firing = {(a["labels"]["alertname"], a["labels"].get("reason", "")) for a in prom.get("/api/v1/alerts")["data"]["alerts"]
              if a["state"] == "firing"}
    check({("StreamcarDeadLetters", "max_attempts"), ("StreamcarDeadLetters", "rejected")} <= firing,
          f"StreamcarDeadLetters fires for both reasons: {sorted(firing)}")
    check({name for name, _ in firing} == {"StreamcarDeadLetters"}, f"no other alert fires: {sorted(firing)}")

    if PLOT:
        data = os.path.join(work, "plots.json")
        with open(data, "w") as f:
            json.dump(plots, f)
        subprocess.run([os.path.join(ROOT, "tests", "chart", "dashboard_plots.py"), data, PLOT], check=True)
        print(f"wrote {PLOT}")

    sidecar.send_signal(signal.SIGTERM)
    check(sidecar.wait(timeout=40) == 0, "streamcar: SIGTERM, exit 0")
except SystemExit:
    dump_logs()
    raise
finally:
    for name in ("streamcar", "prometheus", "handler", "redis"):
        proc = procs.get(name)
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for f in logs.values():
        f.close()
    shutil.rmtree(work, ignore_errors=True)

summary()
