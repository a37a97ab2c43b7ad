#!/usr/bin/env python3
"""The Helm chart, tested with helm itself and with the real binary.

1. helm lint for the default values and each example values file;
2. helm template in both modes (the chart's own Deployment; a parent chart that includes the
   streamcar container) and with the native-sidecar option, checking what was rendered; the
   Redis topologies (standalone, cluster, sentinel): the config, the sentinels' credentials and
   the KEDA trigger of each, with every KEDA object checked against KEDA's CRDs (keda_schema.py);
   a sharded subscription's sharding block, and KEDA refused on its logical stream;
   KEDA: a lag and a pending-entries trigger per subscription, activationLagCount, enableTLS from
   rediss:// in every mode, the TLS material in the TriggerAuthentication, the scale target in
   both modes, NOTES; the standard knobs (ServiceAccount, pull secrets, digests, names, spread,
   resources per container), the PDB, the readiness probe's modes, the app's preStop;
2b. every object of every value set rendered (defaults, every example, all options on, include
   mode, each Redis mode, TLS) validated with the published object models (kube_models.py) and
   the KEDA ones with KEDA's CRDs and scalers' names, with negative controls;
3. values.schema.json (closed everywhere: typos fail; its config keys are the ones `streamcar check`
   prints) and the chart's own checks refuse bad values;
4. the rendered streamcar.yaml passes `streamcar check`;
5. a pod on one machine: the binary runs with exactly the args, env and config the chart renders
   (the ConfigMap's mount path mapped to a folder, env resolved as the kubelet would) against a
   local redis-server and the example handler, and entries are delivered.

Usage: chart_test.py STREAMCAR_BINARY REPO_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, eventually, free_port, summary, wait_port  # noqa: E402
import keda_schema  # noqa: E402  (tests/chart, the script's own folder)
import kube_models  # noqa: E402

BINARY, ROOT = sys.argv[1], sys.argv[2]
CHART = os.path.join(ROOT, "charts", "streamcar")
HELM = subprocess.run([os.path.join(ROOT, "scripts", "helm")], check=True, capture_output=True,
                      text=True).stdout.strip()


def helm(*args, ok=True):
    result = subprocess.run([HELM, *args], capture_output=True, text=True)
    if ok and result.returncode != 0:
        print(result.stdout, result.stderr)
    return result


# Every value set rendered, with its objects: all are validated against the object models at the
# end (section 2b).
RENDERED = []


def render(*args, chart=CHART, release="t"):
    what = f"helm template {' '.join(os.path.basename(a) if a.endswith('.yaml') else a for a in args) or '(defaults)'}"
    result = helm("template", release, chart, *args)
    check(result.returncode == 0, what)
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    RENDERED.append((what, docs))
    return docs


def kind(docs, name):
    return [d for d in docs if d["kind"] == name]


def streamcar_container(spec):
    return [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == "streamcar"][0]




examples = sorted(os.path.join(CHART, "examples", f) for f in os.listdir(os.path.join(CHART, "examples")))

# 1. lint
check(helm("lint", "--strict", CHART).returncode == 0, "helm lint --strict (defaults)")
for values in examples:
    check(helm("lint", "--strict", CHART, "-f", values).returncode == 0, f"helm lint --strict -f {os.path.basename(values)}")

# 2. template, both modes and the native sidecar
docs = render()
check(kind(docs, "ConfigMap") and not kind(docs, "Deployment"), "defaults: ConfigMap, no Deployment (include mode)")
app = render("-f", os.path.join(CHART, "examples", "app-with-sidecar.yaml"))
pod = kind(app, "Deployment")[0]["spec"]["template"]
names = [c["name"] for c in pod["spec"]["containers"]]
check(names == ["app", "streamcar"], f"app mode: containers {names}")
sidecar = pod["spec"]["containers"][1]
check(sidecar["securityContext"]["readOnlyRootFilesystem"] and sidecar["securityContext"]["runAsNonRoot"]
      and sidecar["securityContext"]["capabilities"]["drop"] == ["ALL"]
      and sidecar["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", "hardened securityContext")
check(sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz" and sidecar["readinessProbe"]["httpGet"]["path"] == "/readyz"
      and sidecar["startupProbe"]["httpGet"]["path"] == "/readyz", "probes on /healthz and /readyz")
env = {e["name"]: e for e in sidecar["env"]}
check(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", "POD_NAME from the downward API")
check(env["POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid",
      "POD_UID from the downward API (the consumer-name lease's instance, SPEC 4.7)")
check(env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "redis-credentials", "password from the existing Secret")
check(pod["spec"]["terminationGracePeriodSeconds"] == 35, "grace period = drain_timeout 25s + 10")
check("checksum/streamcar-config" in pod["metadata"]["annotations"], "config checksum annotation")
check(kind(app, "ServiceMonitor") and kind(app, "PodDisruptionBudget") and kind(app, "Service"),
      "ServiceMonitor, PodDisruptionBudget and metrics Service")
other = render("-f", os.path.join(CHART, "examples", "app-with-sidecar.yaml"), "--set", "config.shutdown.drain_timeout=26s")
check(kind(other, "Deployment")[0]["spec"]["template"]["metadata"]["annotations"]["checksum/streamcar-config"]
      != pod["metadata"]["annotations"]["checksum/streamcar-config"], "a policy change rolls the pods")

native = render("-f", os.path.join(CHART, "examples", "native-sidecar.yaml"))
nspec = kind(native, "Deployment")[0]["spec"]["template"]["spec"]
check([c["name"] for c in nspec["initContainers"]] == ["streamcar"] and nspec["initContainers"][0]["restartPolicy"] == "Always"
      and [c["name"] for c in nspec["containers"]] == ["app"], "native sidecar: an initContainer with restartPolicy Always")
check(nspec["terminationGracePeriodSeconds"] == 60 and kind(native, "Secret"), "native example: grace 60, chart-made Secret")

keda = render("-f", os.path.join(CHART, "examples", "keda.yaml"))
trigger = kind(keda, "ScaledObject")[0]["spec"]["triggers"][0]
check(trigger["type"] == "redis-streams" and trigger["metadata"]["address"] == "redis-master.data:6380"
      and trigger["metadata"]["stream"] == "orders" and trigger["metadata"]["consumerGroup"] == "billing"
      and trigger["metadata"]["lagCount"] == "500", "KEDA ScaledObject on the group's lag")
check("replicas" not in kind(keda, "Deployment")[0]["spec"], "with KEDA the Deployment leaves replicas to it")

# Redis topologies (SPEC 8): config.redis.mode/nodes/sentinel reach streamcar.yaml, the sentinels'
# credentials come from the Secret through the environment, and the KEDA trigger follows the mode.
# Every KEDA object rendered here is checked against KEDA's CRDs and the names its scalers read.
def config_of(docs):
    return yaml.safe_load(kind(docs, "ConfigMap")[0]["data"]["streamcar.yaml"])

def env_of(docs):
    return {e["name"]: e for e in streamcar_container(kind(docs, "Deployment")[0]["spec"]["template"]["spec"])["env"]}

def auth_refs(docs):
    return {r["parameter"]: r for r in kind(docs, "TriggerAuthentication")[0]["spec"]["secretTargetRef"]}

def keda_valid(docs, what):
    objects = kind(docs, "ScaledObject") + kind(docs, "TriggerAuthentication")
    problems = [p for d in objects for p in keda_schema.validate(d)]
    problems += [p for d in kind(docs, "ScaledObject") for t in d["spec"]["triggers"] for p in keda_schema.trigger_problems(t)]
    problems += [p for d in kind(docs, "TriggerAuthentication") for p in keda_schema.auth_problems(d)]
    check(objects and not problems, f"{what}: valid against KEDA's CRDs and scalers {problems}")

placeholders = {"username": "${REDIS_SENTINEL_USERNAME:-}", "password": "${REDIS_SENTINEL_PASSWORD:-}"}
default_redis = config_of(render())["redis"]
check(default_redis.get("sentinel") == placeholders and default_redis.get("mode") == "auto" and default_redis.get("nodes") == [],
      "defaults: mode auto; the sentinels' credentials from the environment, empty when unset")
keda_valid(keda, "keda.yaml (mode auto)")
check(set(auth_refs(keda)) == {"username", "password"} and "REDIS_SENTINEL_PASSWORD" not in env_of(keda),
      "no sentinel keys: neither the env nor the TriggerAuthentication names them")

standalone = render("-f", os.path.join(CHART, "examples", "keda.yaml"), "--set", "config.redis.mode=standalone",
                    "--set", "config.redis.url=redis://:x@redis-master.data/3")
smeta = kind(standalone, "ScaledObject")[0]["spec"]["triggers"][0]
check(smeta["type"] == "redis-streams" and smeta["metadata"]["address"] == "redis-master.data:6379"
      and smeta["metadata"]["databaseIndex"] == "3"
      and not {"addresses", "sentinelMaster"} & set(smeta["metadata"]),
      f"standalone: redis-streams on the url's host, default port, database 3: {smeta}")
check(config_of(standalone)["redis"]["mode"] == "standalone", "standalone: mode in streamcar.yaml")
keda_valid(standalone, "standalone")

cluster = render("-f", os.path.join(CHART, "examples", "redis-cluster.yaml"))
ctrigger = kind(cluster, "ScaledObject")[0]["spec"]["triggers"][0]
check(ctrigger["type"] == "redis-cluster-streams"
      and ctrigger["metadata"]["addresses"] == "redis-cluster-0.redis-cluster.data:6379,"
      "redis-cluster-1.redis-cluster.data:6379,redis-cluster-2.redis-cluster.data:6379"
      and not {"address", "databaseIndex", "sentinelMaster"} & set(ctrigger["metadata"])
      and ctrigger["metadata"]["stream"] == "orders" and ctrigger["metadata"]["consumerGroup"] == "billing",
      f"cluster: redis-cluster-streams on the url's node and config.redis.nodes, no database: {ctrigger}")
cconfig = config_of(cluster)["redis"]
check(cconfig["mode"] == "cluster" and cconfig["nodes"] == ["redis-cluster-1.redis-cluster.data:6379", "redis-cluster-2.redis-cluster.data:6379"]
      and cconfig["sentinel"] == placeholders, f"cluster: mode and nodes in streamcar.yaml: {cconfig}")
keda_valid(cluster, "cluster")
ctyped = kind(render("-f", os.path.join(CHART, "examples", "redis-cluster.yaml"), "--set", r"keda.address=seed.data:7000\,seed2.data:7000"),
              "ScaledObject")[0]["spec"]["triggers"][0]["metadata"]
check(ctyped["addresses"] == "seed.data:7000,seed2.data:7000", "cluster: keda.address replaces the seeds")
override = kind(render("-f", os.path.join(CHART, "examples", "redis-cluster.yaml"), "--set", "keda.type=redis-streams"),
                "ScaledObject")[0]["spec"]["triggers"][0]
check(override["type"] == "redis-streams" and override["metadata"]["address"] == "redis-cluster-0.redis-cluster.data:6379",
      "keda.type overrides the trigger the mode picks")
auto_cluster = kind(render("-f", os.path.join(CHART, "examples", "keda.yaml"), "--set", "keda.type=redis-cluster-streams"),
                    "ScaledObject")[0]["spec"]["triggers"][0]
check(auto_cluster["type"] == "redis-cluster-streams" and auto_cluster["metadata"]["addresses"] == "redis-master.data:6380",
      "mode auto with keda.type redis-cluster-streams: the url's node as the seed")

sentinel = render("-f", os.path.join(CHART, "examples", "redis-sentinel.yaml"))
strigger = kind(sentinel, "ScaledObject")[0]["spec"]["triggers"][0]
check(strigger["type"] == "redis-sentinel-streams"
      and strigger["metadata"]["addresses"] == "redis-sentinel-0.redis-sentinel.data:26379,"
      "redis-sentinel-1.redis-sentinel.data:26379,redis-sentinel-2.redis-sentinel.data:26379"
      and strigger["metadata"]["sentinelMaster"] == "mymaster" and strigger["metadata"]["databaseIndex"] == "2"
      and "address" not in strigger["metadata"] and "redis-master" not in strigger["metadata"]["addresses"],
      f"sentinel: redis-sentinel-streams on the sentinels (not the url's host), the master's name, database 2: {strigger}")
sconfig_redis = config_of(sentinel)["redis"]
check(sconfig_redis["mode"] == "sentinel" and sconfig_redis["sentinel"] == {
          **placeholders, "master": "mymaster",
          "addresses": [f"redis-sentinel-{i}.redis-sentinel.data:26379" for i in range(3)]},
      f"sentinel: master, addresses and the credentials' placeholders in streamcar.yaml: {sconfig_redis}")
senv_s = env_of(sentinel)
check(senv_s["REDIS_SENTINEL_USERNAME"]["valueFrom"]["secretKeyRef"] == {"name": "redis-credentials", "key": "sentinel-username", "optional": True}
      and senv_s["REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "redis-credentials", "key": "sentinel-password"},
      "sentinel: REDIS_SENTINEL_USERNAME / REDIS_SENTINEL_PASSWORD from the Secret's keys")
sauth = auth_refs(sentinel)
check(sauth["sentinelUsername"]["key"] == "sentinel-username" and sauth["sentinelPassword"]["key"] == "sentinel-password"
      and sauth["sentinelPassword"]["name"] == "redis-credentials" and sauth["password"]["key"] == "password",
      f"sentinel: the TriggerAuthentication passes the sentinels' credentials to KEDA: {sauth}")
keda_valid(sentinel, "sentinel")
made_sentinel = render("-f", os.path.join(CHART, "examples", "redis-sentinel.yaml"), "--set", "redisAuth.existingSecret=",
                       "--set", "redisAuth.sentinelUsernameKey=", "--set", "redisAuth.sentinelPasswordKey=",
                       "--set", "redisAuth.sentinelUsername=watcher", "--set", "redisAuth.sentinelPassword=s3cret")
msecret = kind(made_sentinel, "Secret")[0]
check(msecret["stringData"]["sentinel-username"] == "watcher" and msecret["stringData"]["sentinel-password"] == "s3cret"
      and env_of(made_sentinel)["REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": msecret["metadata"]["name"], "key": "sentinel-password"}
      and auth_refs(made_sentinel)["sentinelPassword"]["name"] == msecret["metadata"]["name"],
      "sentinel: redisAuth.sentinelUsername/sentinelPassword go into the chart's Secret (no data-node password needed)")
keda_valid(made_sentinel, "sentinel with the chart's Secret")

# The log API and the archive (SPEC 10): rendered into the config, the token and the archive's
# storage mounted where the config points.

log_api = render("-f", os.path.join(CHART, "examples", "log-api.yaml"))
lconfig = yaml.safe_load(kind(log_api, "ConfigMap")[0]["data"]["streamcar.yaml"])
lspec = kind(log_api, "Deployment")[0]["spec"]["template"]["spec"]
lcontainer = streamcar_container(lspec)
lmounts = {m["name"]: m for m in lcontainer["volumeMounts"]}
lvolumes = {v["name"]: v for v in lspec["volumes"]}
check(lconfig["api"]["listen"] == "127.0.0.1:9465", "api: listens on localhost (the app reaches it in the pod)")
check(lconfig["api"]["token_file"] == lmounts["streamcar-api-token"]["mountPath"] + "/token"
      and lvolumes["streamcar-api-token"]["secret"]["secretName"] == "feed-api-token",
      "api: token_file is the key of the token Secret, mounted")
check(lconfig["archive"]["url"] == "sqlite://" + lmounts["streamcar-archive"]["mountPath"] + "/archive.db"
      and lvolumes["streamcar-archive"]["persistentVolumeClaim"]["claimName"] == "t-streamcar-archive",
      "archive sqlite: the file is on the claim's volume")
pvc = kind(log_api, "PersistentVolumeClaim")
check(len(pvc) == 1 and pvc[0]["metadata"]["name"] == "t-streamcar-archive"
      and pvc[0]["spec"]["resources"]["requests"]["storage"] == "20Gi", "archive sqlite: the chart makes the claim")
check(lspec["securityContext"]["fsGroup"] == 65532, "archive sqlite: fsGroup makes the claim writable for streamcar")
check("subscriptions" not in lconfig and lconfig["streams"][0]["archive"] is True, "a config with streams and no subscriptions")
check(kind(log_api, "Deployment")[0]["spec"].get("strategy") == {"type": "Recreate"},
      "archive sqlite: Recreate (one writer on a ReadWriteOnce claim; a rolling update would hang)")
check("strategy" not in kind(app, "Deployment")[0]["spec"], "no archive: the default rolling update")
check(not kind(render(), "PersistentVolumeClaim") and "api" not in yaml.safe_load(kind(render(), "ConfigMap")[0]["data"]["streamcar.yaml"]),
      "defaults: no API, no archive, no claim")

made = render("--set", "api.enabled=true", "--set", "api.token.value=s3cret")
check(kind(made, "Secret")[0]["stringData"]["token"] == "s3cret"
      and yaml.safe_load(kind(made, "ConfigMap")[0]["data"]["streamcar.yaml"])["api"]["token_file"] == "/var/run/streamcar/api/token",
      "api.token.value: the chart makes the token Secret")
open_api = yaml.safe_load(kind(render("--set", "api.enabled=true"), "ConfigMap")[0]["data"]["streamcar.yaml"])["api"]
check("token_file" not in open_api, "api without a token: no token_file")
check(open_api["allowed_origins"] == [] and open_api["max_follow_buffer"] == "8MiB",
      "api: allowed_origins and max_follow_buffer rendered with the binary's defaults")
origins_api = yaml.safe_load(kind(render("--set", "api.enabled=true", "--set", "api.allowed_origins={https://app.example.com}",
                                         "--set", "api.max_follow_buffer=16MiB"), "ConfigMap")[0]["data"]["streamcar.yaml"])["api"]
check(origins_api["allowed_origins"] == ["https://app.example.com"] and origins_api["max_follow_buffer"] == "16MiB",
      "api.allowed_origins and api.max_follow_buffer: rendered into config.api")

claimed = render("-f", os.path.join(CHART, "examples", "log-api.yaml"), "--set", "archive.sqlite.existingClaim=mine")
check(not kind(claimed, "PersistentVolumeClaim")
      and {v["name"]: v for v in kind(claimed, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]}["streamcar-archive"]["persistentVolumeClaim"]["claimName"] == "mine",
      "archive.sqlite.existingClaim: used, none made")

shared = render("-f", os.path.join(CHART, "examples", "log-api.yaml"), "--set", "app.replicas=4",
                "--set", "archive.backend=postgres", "--set", "archive.postgres.existingSecret=archive-db")
sconfig = yaml.safe_load(kind(shared, "ConfigMap")[0]["data"]["streamcar.yaml"])
senv = {e["name"]: e for e in streamcar_container(kind(shared, "Deployment")[0]["spec"]["template"]["spec"])["env"]}
check(sconfig["archive"]["url"] == "${STREAMCAR_ARCHIVE_URL}"
      and senv["STREAMCAR_ARCHIVE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "archive-db", "key": "url"}
      and not kind(shared, "PersistentVolumeClaim"),
      "archive postgres: the URL from the Secret, many replicas, no claim")
check("strategy" not in kind(shared, "Deployment")[0]["spec"], "archive postgres: the default rolling update")
pg_path = os.path.join(tempfile.gettempdir(), f"streamcar-chart-pg-{os.getpid()}.yaml")
with open(pg_path, "w") as f:
    f.write(kind(shared, "ConfigMap")[0]["data"]["streamcar.yaml"])
result = subprocess.run([BINARY, "check", "-c", pg_path], capture_output=True, text=True,
                        env={**os.environ, "POD_NAME": "p", "REDIS_PASSWORD": "x",
                             "STREAMCAR_ARCHIVE_URL": "postgres://feed@archive-db:5432/log"})
os.remove(pg_path)
check(result.returncode == 0, f"streamcar check on the postgres archive config: {result.stderr.strip()}")

# Sharded subscriptions (SPEC 9): the sharding block reaches streamcar.yaml as written (section 4
# runs `streamcar check` on it, timing relations included); KEDA is refused on a sharded
# subscription's logical stream, which holds no entries, unless keda.stream names a shard.
sharded_values = os.path.join(CHART, "examples", "sharded.yaml")
sharded = render("-f", sharded_values)
check(config_of(sharded)["subscriptions"][0]["sharding"] == {
    "shards": 16, "session_timeout": "15s", "heartbeat_interval": "3s", "drain_timeout": "20s",
    "rebalance_timeout": "60s", "initial_delay": "3s"}, "sharded: the sharding block in streamcar.yaml")
static = config_of(render("-f", sharded_values, "--set", "config.subscriptions[0].sharding.instance_id=${POD_NAME}",
                          "--set", "config.subscriptions[0].sharding.static_takeover=wait"))["subscriptions"][0]["sharding"]
check(static["instance_id"] == "${POD_NAME}" and static["static_takeover"] == "wait",
      "sharded: instance_id stays ${POD_NAME} for streamcar to expand from the pod's name")
stall = config_of(render("-f", sharded_values, "--set", "config.subscriptions[0].sharding.stall_timeout=2m",
                         "--set", "config.subscriptions[0].sharding.revoke_stalled=true"))["subscriptions"][0]["sharding"]
check(stall["stall_timeout"] == "2m" and stall["revoke_stalled"] is True,
      "sharded: stall_timeout and revoke_stalled (SHARDING.md B6.1) reach streamcar.yaml")
result = helm("template", "t", CHART, "-f", sharded_values, "--set", "keda.enabled=true", ok=False)
check(result.returncode != 0 and "is sharded" in result.stderr and "keda.stream" in result.stderr,
      f"chart: KEDA on a sharded subscription needs keda.stream: {result.stderr.strip()}")
sharded_keda = render("-f", sharded_values, "--set", "keda.enabled=true", "--set", "keda.stream=orders:{0}")
check(kind(sharded_keda, "ScaledObject")[0]["spec"]["triggers"][0]["metadata"]["stream"] == "orders:{0}",
      "sharded: with keda.stream the trigger watches that shard")

parent = os.path.join(ROOT, "examples", "kubernetes", "parent-chart")
check(helm("dependency", "update", parent).returncode == 0, "parent chart: helm dependency update")
pdocs = render(chart=parent, release="r")
pnames = [c["name"] for c in kind(pdocs, "Deployment")[0]["spec"]["template"]["spec"]["containers"]]
check(pnames == ["orders", "streamcar"] and kind(pdocs, "ConfigMap"), f"include mode: the parent's pod has {pnames}")

def refused(args, reason, what, chart=CHART):
    result = helm("template", "t", chart, *args, ok=False)
    said = next((line.strip() for line in result.stderr.splitlines() if reason in line), result.stderr.strip())
    check(result.returncode != 0 and reason in result.stderr, f"{what}: {said}")


def triggers(docs):
    return kind(docs, "ScaledObject")[0]["spec"]["triggers"]


def pod_spec(docs):
    return kind(docs, "Deployment")[0]["spec"]["template"]["spec"]


def app_container(docs):
    return [c for c in pod_spec(docs)["containers"] if c["name"] == "app"][0]


KEDA_EXAMPLE = os.path.join(CHART, "examples", "keda.yaml")
APP_EXAMPLE = os.path.join(CHART, "examples", "app-with-sidecar.yaml")
TWO_SUBSCRIPTIONS = ["--set", "config.subscriptions[1].stream=payments", "--set", "config.subscriptions[1].group=ledger",
                     "--set", "config.subscriptions[1].start=new", "--set", "config.subscriptions[1].handler.concurrency=32",
                     "--set", "config.subscriptions[1].handler.batch_size=2"]

# KEDA (K1, D-9, D-10): per subscription a lag trigger (lagCount with activationLagCount, which
# KEDA 2.11-2.16 require, at "1" by default: 2.16 refuses "0") and a pending-entries trigger; KEDA
# scales to the largest.
ktriggers = triggers(keda)
check(len(ktriggers) == 2 and ktriggers[0]["metadata"]["activationLagCount"] == "1"
      and ktriggers[1]["metadata"]["pendingEntriesCount"] == "64" and "lagCount" not in ktriggers[1]["metadata"]
      and ktriggers[1]["metadata"]["stream"] == "orders" and ktriggers[1]["metadata"]["consumerGroup"] == "billing",
      f"KEDA: a lag trigger (activationLagCount 1) and a pending trigger (default 16 x 1 x 4 = 64): {ktriggers}")
two = render("-f", KEDA_EXAMPLE, *TWO_SUBSCRIPTIONS)
watched = [(t["metadata"]["stream"], t["metadata"]["consumerGroup"], "lagCount" in t["metadata"], t["metadata"].get("pendingEntriesCount"))
           for t in triggers(two)]
check(watched == [("orders", "billing", True, None), ("orders", "billing", False, "64"),
                  ("payments", "ledger", True, None), ("payments", "ledger", False, "256")],
      f"two subscriptions: 4 triggers, each subscription's lag and pending (payments: 32 x 2 x 4 = 256): {watched}")
check(all(t["authenticationRef"]["name"] == "t-streamcar-redis" for t in triggers(two)), "every trigger has the credentials")
set_counts = triggers(render("-f", KEDA_EXAMPLE, *TWO_SUBSCRIPTIONS, "--set", "keda.pendingEntriesCount=10",
                             "--set", "keda.activationLagCount=5"))
check([t["metadata"].get("pendingEntriesCount") for t in set_counts] == [None, "10", None, "10"]
      and [t["metadata"].get("activationLagCount") for t in set_counts] == ["5", None, "5", None],
      "keda.pendingEntriesCount and keda.activationLagCount are used for every subscription")
lag_only = triggers(render("-f", KEDA_EXAMPLE, *TWO_SUBSCRIPTIONS, "--set", "keda.scaleOn={lag}"))
pending_only = triggers(render("-f", KEDA_EXAMPLE, *TWO_SUBSCRIPTIONS, "--set", "keda.scaleOn={pending}"))
check(len(lag_only) == 2 and all("lagCount" in t["metadata"] for t in lag_only)
      and len(pending_only) == 2 and all("pendingEntriesCount" in t["metadata"] for t in pending_only),
      "keda.scaleOn: lag only (2 triggers), pending only (2 triggers, e.g. Redis 6.2 without lag)")
one = triggers(render("-f", KEDA_EXAMPLE, *TWO_SUBSCRIPTIONS, "--set", "keda.stream=audit"))
check([(t["metadata"]["stream"], t["metadata"]["consumerGroup"]) for t in one] == [("audit", "billing")] * 2,
      "keda.stream: that stream alone (the first subscription's group)")
mixed = ["--set", "config.subscriptions[1].stream=payments", "--set", "config.subscriptions[1].group=ledger",
         "--set", "config.subscriptions[1].start=new", "--set", "config.subscriptions[1].sharding.shards=8"]
refused(["-f", KEDA_EXAMPLE, *mixed], "the subscription payments/ledger is sharded",
        "KEDA: a sharded second subscription is refused (its logical stream holds nothing)")
shard = triggers(render("-f", KEDA_EXAMPLE, *mixed, "--set", "keda.stream=payments:{0}", "--set", "keda.consumerGroup=ledger"))
check({(t["metadata"]["stream"], t["metadata"]["consumerGroup"]) for t in shard} == {("payments:{0}", "ledger")},
      "sharded: keda.stream and keda.consumerGroup name one shard")
refused(["-f", KEDA_EXAMPLE, "--set", "keda.consumerGroup=other"], "set keda.stream too",
        "KEDA: keda.consumerGroup without keda.stream is refused")

# K3, D-8: enableTLS from rediss:// in every mode, overridable; the CA, client certificate and key
# from Secrets in the TriggerAuthentication; unsafeSsl when asked or when streamcar does not verify.
def tls_of(docs):
    return {(t["metadata"]["enableTLS"], t["metadata"].get("unsafeSsl")) for t in triggers(docs)}

for args, mode in [
    (["-f", KEDA_EXAMPLE, "--set", "config.redis.url=rediss://redis.example.com:6380/3"], "standalone"),
    (["-f", os.path.join(CHART, "examples", "redis-cluster.yaml"), "--set", "config.redis.url=rediss://c0:6379"], "cluster"),
    (["-f", os.path.join(CHART, "examples", "redis-sentinel.yaml"), "--set", "config.redis.url=rediss://redis-master/2"], "sentinel"),
]:
    check(tls_of(render(*args)) == {("true", None)}, f"{mode}: rediss:// gives enableTLS true")
    check(tls_of(render(*args, "--set", "keda.enableTLS=false")) == {("false", None)}, f"{mode}: keda.enableTLS false overrides")
check(tls_of(keda) == {("false", None)}, "redis:// gives enableTLS false")
check(tls_of(render("-f", KEDA_EXAMPLE, "--set", "keda.enableTLS=true")) == {("true", None)}, "keda.enableTLS true overrides redis://")
tls_example = render("-f", os.path.join(CHART, "examples", "redis-tls.yaml"))
tls_spec = pod_spec(tls_example)
check(tls_of(tls_example) == {("true", None)} and auth_refs(tls_example)["ca"] == {"parameter": "ca", "name": "redis-ca", "key": "ca.crt"}
      and {"name": "redis-ca", "mountPath": "/etc/redis-ca", "readOnly": True} in streamcar_container(tls_spec)["volumeMounts"]
      and config_of(tls_example)["redis"]["tls"]["ca_file"] == "/etc/redis-ca/ca.crt",
      "redis-tls.yaml: streamcar mounts the CA its config names; KEDA gets TLS and the same CA")
RREDISS = ["-f", KEDA_EXAMPLE, "--set", "config.redis.url=rediss://redis.example.com:6380/0"]
private = render(*RREDISS, "--set", "keda.tls.caSecret=redis-ca", "--set", "keda.tls.certSecret=keda-client")
prefs = auth_refs(private)
check(prefs["ca"] == {"parameter": "ca", "name": "redis-ca", "key": "ca.crt"}
      and prefs["cert"] == {"parameter": "cert", "name": "keda-client", "key": "tls.crt"}
      and prefs["key"] == {"parameter": "key", "name": "keda-client", "key": "tls.key"}
      and prefs["password"]["name"] == "redis-credentials",
      f"keda.tls: ca, cert and key from the Secrets beside the credentials: {prefs}")
keda_valid(private, "private CA and client certificate")
ca_only = render(*RREDISS, "--set", "redisAuth.existingSecret=", "--set", "keda.tls.caSecret=redis-ca", "--set", "keda.tls.caKey=root.pem")
check(set(auth_refs(ca_only)) == {"ca"} and auth_refs(ca_only)["ca"]["key"] == "root.pem"
      and all(t["authenticationRef"]["name"] == "t-streamcar-redis" for t in triggers(ca_only)),
      "keda.tls.caSecret alone: a TriggerAuthentication with the CA, no credentials")
check(tls_of(render(*RREDISS, "--set", "config.redis.tls.verify=false")) == {("true", "true")},
      "config.redis.tls.verify false: KEDA gets unsafeSsl true")
check(tls_of(render(*RREDISS, "--set", "config.redis.tls.verify=false", "--set", "keda.tls.unsafeSsl=false")) == {("true", None)},
      "keda.tls.unsafeSsl false overrides verify false")
check(tls_of(render(*RREDISS, "--set", "keda.tls.unsafeSsl=true")) == {("true", "true")}, "keda.tls.unsafeSsl true")
refused(["-f", KEDA_EXAMPLE, "--set", "keda.tls.caSecret=redis-ca"], "KEDA's connection to Redis is not TLS",
        "keda.tls without TLS is refused (KEDA would ignore it)")
check(not kind(render("-f", KEDA_EXAMPLE, "--set", "redisAuth.existingSecret="), "TriggerAuthentication")
      and "authenticationRef" not in triggers(render("-f", KEDA_EXAMPLE, "--set", "redisAuth.existingSecret="))[0],
      "no credentials, no TLS material: no TriggerAuthentication")

# K5: the scale target. App mode: the chart's Deployment; include mode: named by the values
# (templated), refused when empty.
check(kind(keda, "ScaledObject")[0]["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t-streamcar"},
      "app mode: KEDA scales the chart's Deployment")
include_keda = render("--set", "keda.enabled=true",
                      "--set-json", 'keda.scaleTargetRef={"name": "{{ .Release.Name }}-workers", "kind": "StatefulSet"}')
check(kind(include_keda, "ScaledObject")[0]["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "t-workers"},
      "include mode: keda.scaleTargetRef (templated name, kind)")
refused(["--set", "keda.enabled=true"], "keda.scaleTargetRef.name", "include mode: KEDA without a scale target is refused")
pkeda = render("--set", "streamcar.keda.enabled=true", "--set", "streamcar.podDisruptionBudget.enabled=true",
               "--set", "streamcar.metrics.serviceMonitor.enabled=true", chart=parent, release="r")
check(kind(pkeda, "ScaledObject")[0]["spec"]["scaleTargetRef"]["name"] == kind(pkeda, "Deployment")[0]["metadata"]["name"] == "r-orders"
      and "replicas" not in kind(pkeda, "Deployment")[0]["spec"],
      "parent chart with KEDA: the ScaledObject targets the parent's Deployment r-orders, which leaves replicas to it")
ppod = kind(pkeda, "Deployment")[0]["spec"]["template"]
check(all(ppod["metadata"]["labels"].get(k) == v for k, v in kind(pkeda, "PodDisruptionBudget")[0]["spec"]["selector"]["matchLabels"].items())
      and all(ppod["metadata"]["labels"].get(k) == v for k, v in kind(pkeda, "Service")[0]["spec"]["selector"].items()),
      "parent chart: its pods carry the labels the PDB and the metrics Service select")
check(ppod["spec"]["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"] == 25,
      "parent chart: the app's preStop sleeps drain_timeout (classic sidecar mode)")
refused(["--set", "streamcar.keda.enabled=true", "--set", "streamcar.keda.scaleTargetRef.name="], "keda.scaleTargetRef.name",
        "parent chart: KEDA without a scale target is refused", chart=parent)


def notes(*args):
    result = helm("install", "t", CHART, "--dry-run=client", *args)
    check(result.returncode == 0, f"helm install --dry-run {' '.join(args)}")
    return result.stdout[result.stdout.find("NOTES:"):]

inotes = notes("--set", "keda.enabled=true", "--set", "keda.scaleTargetRef.name=orders", "--set", "metrics.service.enabled=false")
check("port-forward deployment/orders" in inotes and "exec deployment/orders" in inotes and "t-streamcar " not in inotes.split("\n", 2)[2],
      "NOTES, include mode: port-forward and exec name the scale target" + ("" if "deployment/orders" in inotes else f": {inotes}"))
dnotes = notes()
check("port-forward svc/t-streamcar-metrics" in dnotes and "kubectl get pod -l app.kubernetes.io/name=streamcar,app.kubernetes.io/instance=t" in dnotes
      and "deploy/t-streamcar" not in dnotes, "NOTES, include mode without a target: the metrics Service, a pod by its labels"
      + ("" if "svc/" in dnotes else f": {dnotes}"))
check("exec deployment/t-streamcar" in notes("-f", APP_EXAMPLE), "NOTES, app mode: the chart's Deployment")

# D-11: a closed values schema: a misspelt key is an error naming it, not silence.
for key, where in [("keda.enableTls=true", "/keda"), ("keda.activationLag=5", "/keda"), ("podDisruptionBudget.maxUnavaliable=1", "/podDisruptionBudget"),
                   ("imagePullSecret[0].name=x", "at ''"), ("metrics.servicemonitor.enabled=true", "/metrics"),
                   ("metrics.serviceMonitor.intervall=1m", "/metrics/serviceMonitor"), ("app.replica=3", "/app"),
                   ("app.image.tags=1", "/app/image"), ("image.digets=sha256:x", "/image"), ("probes.readiness.pat=/healthz", "/probes/readiness"),
                   ("probes.liveness.periodSecond=3", "/probes/liveness"), ("serviceAccount.nmae=x", "/serviceAccount"),
                   ("keda.tls.caSecert=x", "/keda/tls"), ("keda.scaleTargetRef.nmae=x", "/keda/scaleTargetRef"),
                   ("config.subscription[0].stream=x", "/config"), ("config.consumer.reap_idel=1h", "/config/consumer"),
                   ("resources.limit.memory=1Gi", "/resources"), ("resources.requests.memroy=1Gi", "/resources/requests")]:
    result = helm("template", "t", CHART, "--set", key, ok=False)
    # The misspelt key: the path's last segment, or the one right below `where`.
    path = [p.split("[")[0] for p in key.split("=")[0].split(".")]
    name = path[0] if where == "at ''" else path[len(where.strip("/").split("/"))]
    check(result.returncode != 0 and f"'{name}' not allowed" in result.stderr and where in result.stderr,
          f"schema: the typo {key} is refused at {where}: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ''}")
check(helm("template", "t", CHART, "--set", "global.imageRegistry=x", "--set", "config.consumer.reap_idle=1h").returncode == 0,
      "schema: a parent's global values and config.consumer.reap_idle (SPEC 4.6) are allowed")
# ... in every block of the configuration too (issue 30): a subscription's and the defaults'
# sections, the log API's streams and their retention, api, archive, redis.tls, tracing.
for key, where, name in [("config.subscriptions[0].handler.timout=5s", "/config/subscriptions/0/handler", "timout"),
                         ("config.subscriptions[0].retry.max_attempt=3", "/config/subscriptions/0/retry", "max_attempt"),
                         ("config.subscriptions[0].claim.min_idel=1m", "/config/subscriptions/0/claim", "min_idel"),
                         ("config.subscriptions[0].deadletter.stream=x", "/config/subscriptions/0", "deadletter"),
                         ("config.defaults.retry.max_attempt=3", "/config/defaults/retry", "max_attempt"),
                         ("config.defaults.handler.timout=5s", "/config/defaults/handler", "timout"),
                         ("config.defaults.stream=x", "/config/defaults", "stream"),
                         ("config.streams[0].retention.max_ag=1h", "/config/streams/0/retention", "max_ag"),
                         ("config.streams[0].notfy=true", "/config/streams/0", "notfy"),
                         ("config.api.max_bodyy=1MiB", "/config/api", "max_bodyy"),
                         ("config.archive.urll=x", "/config/archive", "urll"),
                         ("config.redis.tls.ca_fil=/ca.pem", "/config/redis/tls", "ca_fil"),
                         ("config.tracing.endpoint=x", "/config/tracing", "endpoint")]:
    result = helm("template", "t", CHART, "--set", "config.streams[0].name=feed", "--set", key, ok=False)
    check(result.returncode != 0 and f"'{name}' not allowed" in result.stderr and where in result.stderr,
          f"schema: the typo {key} is refused at {where}: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ''}")
# consumer.reap_idle: 0s or at least an hour, as the binary checks (one part of at least an hour).
for value, ok in [("0s", True), ("1h", True), ("90m", True), ("3600s", True), ("1h30m", True),
                  ("30m", False), ("59m59s", False), ("90ms", False), ("10", False)]:
    result = helm("template", "t", CHART, "--set", f"config.consumer.reap_idle={value}", ok=False)
    check((result.returncode == 0) == ok and (ok or "/config/consumer/reap_idle" in result.stderr),
          f"schema: config.consumer.reap_idle={value} is {'allowed' if ok else 'refused'}")
# The new keys of the log API (issue 29) are accepted.
check(helm("template", "t", CHART, "--set", "config.streams[0].name=feed", "--set", "config.api.listen=127.0.0.1:9465",
           "--set", "config.api.allowed_origins[0]=https://app.example", "--set", "config.api.max_follow_buffer=4MiB").returncode == 0,
      "schema: config.api.allowed_origins and max_follow_buffer are allowed")


# The schema's configuration keys are exactly the binary's: what `streamcar check` prints (every
# key, filled in; config_guard_test checks it against the loader's tables and
# docs/configuration.md) plus `defaults`, which holds a subscription's sections. A key the binary
# gains and the schema lacks would be refused by the chart; a key only the schema has would pass
# the chart and stop the pod.
def schema_paths(node, prefix, out):
    while "$ref" in node or "allOf" in node:
        node = SCHEMA["definitions"][node["$ref"].split("/")[-1]] if "$ref" in node else {
            k: v for part in node["allOf"] for k, v in (SCHEMA["definitions"][part["$ref"].split("/")[-1]] if "$ref" in part else part).items()}
    if node.get("type") == "array" and "properties" in node.get("items", {}):
        schema_paths(node["items"], prefix + "[]", out)
    elif "properties" in node and node.get("additionalProperties") is False:
        for key, child in node["properties"].items():
            schema_paths(child, f"{prefix}.{key}" if prefix else key, out)
    else:
        out.add(prefix)
    return out


def printed_paths(node, prefix, out):
    if isinstance(node, dict) and node:
        for key, child in node.items():
            printed_paths(child, f"{prefix}.{key}" if prefix else key, out)
    elif isinstance(node, list) and node and isinstance(node[0], dict):
        printed_paths(node[0], prefix + "[]", out)
    else:
        out.add(prefix)
    return out


SCHEMA = yaml.safe_load(open(os.path.join(CHART, "values.schema.json")))
with tempfile.TemporaryDirectory() as scratch:
    minimal = os.path.join(scratch, "streamcar.yaml")
    with open(minimal, "w") as f:
        f.write("version: 1\nsubscriptions: [{stream: s, group: g, start: new, handler: {url: 'http://127.0.0.1:1/'}}]\n"
                "streams: [{name: feed}]\n")
    printed = subprocess.run([BINARY, "check", "-c", minimal], capture_output=True, text=True)
check(printed.returncode == 0, f"streamcar check of a minimal file: {printed.stderr.strip()}")
binary_keys = printed_paths(yaml.safe_load(printed.stdout), "", set())
binary_keys |= {"defaults" + k[len("subscriptions[]"):] for k in binary_keys if k.startswith("subscriptions[].")
                and k.split(".")[1] not in ("stream", "group", "start", "name")}
schema_keys = schema_paths(SCHEMA["properties"]["config"], "", set())
check(len(binary_keys) > 90 and binary_keys == schema_keys,
      f"schema: config's keys are the binary's ({len(binary_keys)}): missing from the schema "
      f"{sorted(binary_keys - schema_keys)}, unknown to the binary {sorted(schema_keys - binary_keys)}")
for key, where in [("keda.lagCount=0", "/keda/lagCount"), ("keda.activationLagCount=-1", "/keda/activationLagCount"),
                   ("keda.scaleOn={cpu}", "/keda/scaleOn"), ("probes.readiness.path=/livez", "/probes/readiness/path"),
                   ("podDisruptionBudget.maxUnavailable=half", "/podDisruptionBudget/maxUnavailable"),
                   # 0 (or 0%) would block every node drain: the budget's one promise.
                   ("podDisruptionBudget.maxUnavailable=0", "/podDisruptionBudget/maxUnavailable"),
                   ("image.digest=latest", "/image/digest")]:
    result = helm("template", "t", CHART, "--set", key, ok=False)
    check(result.returncode != 0 and where in result.stderr, f"schema: {key} is refused at {where}")

# D-12: the PodDisruptionBudget never blocks a drain: maxUnavailable 1 by default, unhealthy pods
# evictable; minAvailable settable, not both.
pdb = kind(app, "PodDisruptionBudget")[0]["spec"]
check(pdb.get("maxUnavailable") == 1 and "minAvailable" not in pdb and pdb.get("unhealthyPodEvictionPolicy") == "AlwaysAllow",
      f"PDB default: maxUnavailable 1, unhealthyPodEvictionPolicy AlwaysAllow: {pdb}")
pmin = kind(render("-f", APP_EXAMPLE, "--set", "podDisruptionBudget.minAvailable=50%", "--set", "podDisruptionBudget.maxUnavailable=null"),
            "PodDisruptionBudget")[0]["spec"]
check(pmin.get("minAvailable") == "50%" and "maxUnavailable" not in pmin, "PDB: minAvailable with maxUnavailable null")
refused(["-f", APP_EXAMPLE, "--set", "podDisruptionBudget.minAvailable=1"], "not both", "PDB: minAvailable and maxUnavailable together are refused")
old = render("-f", APP_EXAMPLE, "--kube-version", "1.25.0")
check("unhealthyPodEvictionPolicy" not in kind(old, "PodDisruptionBudget")[0]["spec"],
      "PDB on Kubernetes 1.25: no unhealthyPodEvictionPolicy (the field came in 1.26)")

# D-15: a ServiceMonitor only with the metrics Service it scrapes.
refused(["-f", APP_EXAMPLE, "--set", "metrics.service.enabled=false"], "metrics.service.enabled: false",
        "a ServiceMonitor without the metrics Service is refused")

# D-13: the readiness probe: /readyz by default, /healthz (ready through a Redis outage) or off.
def probes(docs):
    container = streamcar_container(pod_spec(docs))
    return (container.get("readinessProbe", {}).get("httpGet", {}).get("path"), container["startupProbe"]["httpGet"]["path"])

check(probes(app) == ("/readyz", "/readyz"), "readiness and startup on /readyz by default")
check(probes(render("-f", APP_EXAMPLE, "--set", "probes.readiness.path=/healthz")) == ("/healthz", "/healthz"),
      "probes.readiness.path /healthz: readiness and startup do not depend on Redis")
off = render("-f", APP_EXAMPLE, "--set", "probes.readiness.enabled=false")
check("readinessProbe" not in streamcar_container(pod_spec(off)) and probes(off) == (None, "/healthz"),
      "probes.readiness.enabled false: no readiness probe, startup on /healthz")
check(streamcar_container(pod_spec(app))["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": "sc-admin"}, "periodSeconds": 5, "failureThreshold": 2},
      "the readiness probe carries its timing, not the chart's enabled/path keys")

# D-16: classic sidecar mode: the app's preStop sleeps drain_timeout, so it outlives the drain.
check(app_container(app)["lifecycle"] == {"preStop": {"sleep": {"seconds": 25}}}, "classic mode: app preStop sleeps drain_timeout 25s")
check("lifecycle" not in app_container(native), "native sidecar: no preStop (Kubernetes stops the app first)")
check(app_container(render("-f", APP_EXAMPLE, "--set", "config.shutdown.drain_timeout=1m30s"))["lifecycle"]["preStop"]["sleep"]["seconds"] == 90,
      "the preStop follows drain_timeout (1m30s: 90)")
check(app_container(old)["lifecycle"] == {"preStop": {"exec": {"command": ["sleep", "25"]}}}, "Kubernetes 1.25: preStop exec sleep 25")
check("lifecycle" not in app_container(render("-f", APP_EXAMPLE, "--set", "app.preStopSleepSeconds=0")), "app.preStopSleepSeconds 0: no preStop")
check(app_container(render("-f", APP_EXAMPLE, "--set", "app.preStopSleepSeconds=7"))["lifecycle"]["preStop"]["sleep"]["seconds"] == 7,
      "app.preStopSleepSeconds 7")
check(app_container(render("-f", APP_EXAMPLE, "--set", "app.lifecycle.preStop.httpGet.path=/drain", "--set", "app.lifecycle.preStop.httpGet.port=8080"))["lifecycle"]
      == {"preStop": {"httpGet": {"path": "/drain", "port": 8080}}}, "app.lifecycle replaces the chart's preStop")

# D-14: the standard knobs.
ALL_ON = os.path.join(tempfile.gettempdir(), f"streamcar-chart-all-on-{os.getpid()}.yaml")
with open(ALL_ON, "w") as f:
    yaml.safe_dump({
        "fullnameOverride": "orders-worker",
        "image": {"digest": "sha256:" + "ab" * 32},
        "imagePullSecrets": [{"name": "regcred"}],
        "serviceAccount": {"create": True, "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}},
        "podAnnotations": {"team": "payments"}, "podLabels": {"tier": "worker"},
        "priorityClassName": "high",
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}],
        "nodeSelector": {"kubernetes.io/os": "linux"}, "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "extraVolumes": [{"name": "redis-ca", "secret": {"secretName": "redis-ca"}}],
        "extraVolumeMounts": [{"name": "redis-ca", "mountPath": "/etc/redis-ca", "readOnly": True}],
        "env": [{"name": "STREAMCAR_LOG_LEVEL", "value": "debug"}],
        "app": {"enabled": True, "replicas": 2, "image": {"repository": "registry.example.com/orders-handler", "digest": "sha256:" + "cd" * 32},
                "command": ["/app/server"], "args": ["--port", "8080"], "resources": {"requests": {"cpu": "200m"}},
                "volumeMounts": [{"name": "redis-ca", "mountPath": "/etc/redis-ca"}]},
        "config": {"redis": {"url": "rediss://redis.example.com:6380/1", "tls": {"ca_file": "/etc/redis-ca/ca.crt"}},
                   "subscriptions": [{"stream": "orders", "group": "billing", "start": "new"},
                                     {"stream": "payments", "group": "ledger", "start": "new"}]},
        "redisAuth": {"existingSecret": "redis-credentials"},
        "metrics": {"serviceMonitor": {"enabled": True}, "grafanaDashboard": {"enabled": True},
                    "prometheusRule": {"enabled": True}},
        "podDisruptionBudget": {"enabled": True},
        "probes": {"readiness": {"path": "/healthz"}},
        "keda": {"enabled": True, "tls": {"caSecret": "redis-ca"}, "pollingInterval": 15, "cooldownPeriod": 0,
                 "fallback": {"failureThreshold": 3, "replicas": 4},
                 "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}}}}},
        "api": {"enabled": True, "token": {"value": "s3cret"}},
    }, f)
all_on = render("-f", ALL_ON)
os.remove(ALL_ON)
aspec = pod_spec(all_on)
apod = kind(all_on, "Deployment")[0]["spec"]["template"]
sidecar_all = streamcar_container(aspec)
check({d["metadata"]["name"] for d in all_on if d["kind"] not in ("Service", "TriggerAuthentication", "Secret")}
      == {"orders-worker", "orders-worker-dashboard"} and kind(all_on, "PrometheusRule")
      and kind(all_on, "Service")[0]["metadata"]["name"] == "orders-worker-metrics", "fullnameOverride names every object")
check(aspec["imagePullSecrets"] == [{"name": "regcred"}] and aspec["priorityClassName"] == "high"
      and aspec["serviceAccountName"] == "orders-worker" and aspec["automountServiceAccountToken"] is False,
      "imagePullSecrets, priorityClassName, the chart's ServiceAccount, no token")
sa = kind(all_on, "ServiceAccount")
check(len(sa) == 1 and sa[0]["metadata"]["name"] == "orders-worker" and sa[0]["automountServiceAccountToken"] is False
      and sa[0]["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"},
      "serviceAccount.create: a ServiceAccount with its annotations")
check(aspec["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": {"app.kubernetes.io/name": "streamcar", "app.kubernetes.io/instance": "t"}},
      "topologySpreadConstraints get the chart's selector")
check(apod["metadata"]["annotations"]["team"] == "payments" and "checksum/streamcar-config" in apod["metadata"]["annotations"]
      and apod["metadata"]["labels"]["tier"] == "worker" and apod["metadata"]["labels"]["app.kubernetes.io/name"] == "streamcar",
      "podAnnotations and podLabels beside the chart's")
check(sidecar_all["image"] == "localhost/streamcar@sha256:" + "ab" * 32 and app_container(all_on)["image"] == "registry.example.com/orders-handler@sha256:" + "cd" * 32,
      "image.digest and app.image.digest: pulled by digest")
check(sidecar_all["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
      and app_container(all_on)["resources"] == {"requests": {"cpu": "200m"}}, "resources per container")
check(app_container(all_on)["command"] == ["/app/server"] and app_container(all_on)["args"] == ["--port", "8080"],
      "app.command and app.args")
check({"name": "redis-ca", "mountPath": "/etc/redis-ca", "readOnly": True} in sidecar_all["volumeMounts"]
      and {"name": "redis-ca", "secret": {"secretName": "redis-ca"}} in aspec["volumes"], "extraVolumes and extraVolumeMounts")
aso = kind(all_on, "ScaledObject")[0]["spec"]
check(aso["pollingInterval"] == 15 and aso["cooldownPeriod"] == 0 and aso["fallback"] == {"failureThreshold": 3, "replicas": 4}
      and aso["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
      and not {"pollingInterval", "cooldownPeriod", "fallback", "advanced"} & set(kind(keda, "ScaledObject")[0]["spec"]),
      "keda.pollingInterval, cooldownPeriod (0 too), fallback and advanced: rendered when set, KEDA's defaults otherwise")
check(len(triggers(all_on)) == 4 and tls_of(all_on) == {("true", None)} and set(auth_refs(all_on)) == {"username", "password", "ca"},
      "all on: 4 triggers over TLS, the CA in the TriggerAuthentication")
named = render("-f", APP_EXAMPLE, "--set", "nameOverride=orders", "--set", "serviceAccount.name=runner")
check(kind(named, "Deployment")[0]["metadata"]["name"] == "t-orders" and pod_spec(named)["serviceAccountName"] == "runner"
      and not kind(named, "ServiceAccount")
      and kind(named, "Service")[0]["spec"]["selector"]["app.kubernetes.io/name"] == "orders"
      and kind(named, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "orders",
      "nameOverride: names and labels; serviceAccount.name without create: used, none made")
check(pod_spec(app)["serviceAccountName"] == "default" and pod_spec(app)["automountServiceAccountToken"] is False
      and "imagePullSecrets" not in pod_spec(app) and "priorityClassName" not in pod_spec(app),
      "defaults: the namespace's default ServiceAccount without its token, no pull secrets, no priority class")

# 2b. every object of every value set rendered above, against the object models (the core API,
# KEDA, the Prometheus Operator), and the KEDA objects against KEDA's CRDs and scalers.
objects = [(what, doc) for what, docs in RENDERED for doc in docs]
problems = kube_models.validate([doc for _, doc in objects], ROOT)
invalid = [(what, doc["kind"], doc["metadata"]["name"], errors) for (what, doc), errors in zip(objects, problems) if errors]
kinds = sorted({doc["kind"] for _, doc in objects})
check(len(RENDERED) >= 50 and not invalid,
      f"{len(objects)} objects of {len(RENDERED)} value sets ({', '.join(kinds)}) valid against the models: {invalid[:5]}")
for required in ["Deployment", "ConfigMap", "Secret", "Service", "ServiceAccount", "PodDisruptionBudget", "PersistentVolumeClaim",
                 "ScaledObject", "TriggerAuthentication", "ServiceMonitor"]:
    check(required in kinds, f"the validated objects include a {required}")
keda_problems = [(what, p) for what, doc in objects if doc["kind"] in ("ScaledObject", "TriggerAuthentication")
                 for p in keda_schema.validate(doc)
                 + [p for t in doc["spec"].get("triggers", []) for p in keda_schema.trigger_problems(t)]
                 + (keda_schema.auth_problems(doc) if doc["kind"] == "TriggerAuthentication" else [])]
check(not keda_problems, f"every KEDA object valid against KEDA's CRDs and the names its scalers read: {keda_problems[:5]}")
# Negative control: the validators reject bad objects (a wrong type, a missing required field, an
# unknown field, a ScaledObject trigger KEDA would misread).
bad_deployment = yaml.safe_load(yaml.safe_dump(kind(app, "Deployment")[0]))
bad_deployment["spec"]["template"]["spec"]["containers"][1]["ports"][0]["containerPort"] = "9464"
unknown = yaml.safe_load(yaml.safe_dump(kind(app, "Deployment")[0]))
unknown["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["sleep"]["second"] = 25
bad_pdb = yaml.safe_load(yaml.safe_dump(kind(app, "PodDisruptionBudget")[0]))
bad_pdb["spec"]["unhealthyPodEvictionPolicy"] = "Sometimes"
no_target = yaml.safe_load(yaml.safe_dump(kind(keda, "ScaledObject")[0]))
del no_target["spec"]["scaleTargetRef"]
bad_monitor = yaml.safe_load(yaml.safe_dump(kind(app, "ServiceMonitor")[0]))
bad_monitor["spec"]["endpoints"] = "metrics"
typo_target = yaml.safe_load(yaml.safe_dump(kind(keda, "ScaledObject")[0]))
typo_target["spec"]["scaleTargetRef"]["nmae"] = "x"
typo_auth = yaml.safe_load(yaml.safe_dump(kind(keda, "TriggerAuthentication")[0]))
typo_auth["spec"]["secretTargetRef"][0]["paramter"] = "password"
typo_monitor = yaml.safe_load(yaml.safe_dump(kind(app, "ServiceMonitor")[0]))
typo_monitor["spec"]["endpoints"][0]["intervall"] = "1m"
negative = kube_models.validate([bad_deployment, unknown, bad_pdb, no_target, bad_monitor, typo_target, typo_auth, typo_monitor], ROOT)
check(all(negative), f"negative control: the models reject a string containerPort, an unknown field, a bad enum, "
      f"a ScaledObject without scaleTargetRef, a ServiceMonitor with a string endpoints, unknown fields in a "
      f"ScaledObject, a TriggerAuthentication and a ServiceMonitor: {negative}")
no_activation = dict(triggers(keda)[0], metadata={k: v for k, v in triggers(keda)[0]["metadata"].items() if k != "activationLagCount"})
check(keda_schema.trigger_problems(no_activation) and keda_schema.validate(no_target)
      and keda_schema.auth_problems({"spec": {"secretTargetRef": [{"parameter": "cert", "name": "s", "key": "k"}]}}),
      "negative control: keda_schema rejects lagCount without activationLagCount, no scaleTargetRef, cert without key")

# 3. bad values are refused
for args, what in [
    (["--set", "config.subscriptions[0].start=later"], "schema: start must be new|beginning|<id>"),
    (["--set", "config.shutdown.drain_timeout=25"], "schema: a duration needs a unit"),
    (["--set", "adminPort=0"], "schema: adminPort range"),
    (["--set", "image.tag="], "schema: image tag required"),
    (["--set", "config.subscriptions=null"], "chart: at least one subscription"),
    (["--set", "app.enabled=true"], "chart: app mode needs the app's image"),
    (["-f", os.path.join(CHART, "examples", "app-with-sidecar.yaml"), "--set", "terminationGracePeriodSeconds=20"],
     "chart: grace period must exceed drain_timeout"),
    (["--set", "nativeSidecar=yes"], "schema: nativeSidecar is a boolean"),
    (["-f", os.path.join(CHART, "examples", "log-api.yaml"), "--set", "keda.enabled=true"],
     "chart: KEDA without a subscription needs keda.stream and keda.consumerGroup"),
    (["--set", "archive.enabled=true", "--set", "archive.backend=postgres"],
     "chart: a postgres archive needs its Secret"),
    (["--set", "archive.backend=mysql"], "schema: archive.backend is sqlite or postgres"),
    (["--set", "api.max_body=1MB"], "schema: api.max_body is a size"),
]:
    check(helm("template", "t", CHART, *args, ok=False).returncode != 0, what)

# Redis topologies: refused, each for its own reason.
for args, reason, what in [
    (["--set", "config.redis.mode=replicas"], "/config/redis/mode", "schema: redis.mode is auto|standalone|cluster|sentinel"),
    (["--set", "config.redis.mode=sentinel"], "missing properties 'master', 'addresses'",
     "schema: mode sentinel needs sentinel.master and addresses"),
    (["--set", "config.redis.mode=sentinel", "--set", "config.redis.sentinel.master=m"], "missing property 'addresses'",
     "schema: mode sentinel needs sentinel.addresses"),
    (["--set", "config.redis.mode=sentinel", "--set", "config.redis.sentinel.addresses[0]=s:26379"],
     "missing property 'master'", "schema: mode sentinel needs sentinel.master"),
    (["--set", "config.redis.nodes[0]=redis-1"], "/config/redis/nodes/0", "schema: a cluster node is host:port"),
    (["--set", "config.redis.sentinel.addresses[0]=redis://s:26379"], "/config/redis/sentinel/addresses/0",
     "schema: a sentinel is host:port"),
    (["--set", "keda.type=redis"], "/keda/type", "schema: keda.type is a Redis Streams trigger"),
    (["--set", "config.subscriptions[0].sharding.shards=5000"], "/config/subscriptions/0/sharding/shards",
     "schema: sharding.shards is at most 4096"),
    (["--set", "config.subscriptions[0].sharding.shard=4"], "/config/subscriptions/0/sharding",
     "schema: an unknown sharding key (typo) is refused"),
    (["--set", "config.subscriptions[0].sharding.key_pattern=orders-%s"], "/config/subscriptions/0/sharding/key_pattern",
     "schema: sharding.key_pattern holds one %d"),
    (["--set", "config.subscriptions[0].sharding.session_timeout=15"], "/config/subscriptions/0/sharding/session_timeout",
     "schema: a sharding timeout is a duration"),
    (["--set", "config.subscriptions[0].sharding.static_takeover=later"], "/config/subscriptions/0/sharding/static_takeover",
     "schema: sharding.static_takeover is immediate or wait"),
    (["--set", "config.subscriptions[0].sharding.revoke_stalled=sometimes"],
     "/config/subscriptions/0/sharding/revoke_stalled", "schema: sharding.revoke_stalled is a boolean"),
    (["--set", "redisAuth.existingSecret=creds", "--set", "redisAuth.sentinelUsernameKey=u"],
     "the sentinels' user needs its password", "chart: the sentinels' user needs its password key"),
    (["-f", os.path.join(CHART, "examples", "keda.yaml"), "--set", "keda.type=redis-sentinel-streams"],
     "needs the sentinels' addresses", "chart: the sentinel trigger needs the sentinels"),
    (["-f", os.path.join(CHART, "examples", "keda.yaml"), "--set", "config.redis.url=unix:///run/redis.sock"],
     "KEDA cannot reach Redis through the pod's unix socket", "chart: KEDA needs keda.address with a unix url"),
]:
    result = helm("template", "t", CHART, *args, ok=False)
    said = next((line.strip() for line in result.stderr.splitlines() if reason in line), result.stderr.strip())
    check(result.returncode != 0 and reason in result.stderr, f"{what}: {said}")
check(helm("template", "t", CHART, "--set", "config.redis.mode=sentinel", "--set", "config.redis.sentinel.master=m",
           "--set", "config.redis.sentinel.addresses[0]=[::1]:26379").returncode == 0,
      "schema: mode sentinel with master and an IPv6 sentinel renders")

for args, what in [
    (["--set", "app.replicas=2"], "app.replicas is 2"),
    (["--set", "keda.enabled=true", "--set", "keda.stream=feed", "--set", "keda.consumerGroup=g"],
     "KEDA may scale to 10"),
]:
    result = helm("template", "t", CHART, "-f", os.path.join(CHART, "examples", "log-api.yaml"), *args, ok=False)
    check(result.returncode != 0 and "ONE replica" in result.stderr and what in result.stderr,
          f"chart: a SQLite archive is refused with {what}: {result.stderr.strip()}")

# 4. the rendered config passes streamcar check
work = tempfile.mkdtemp(prefix="streamcar-chart-")
try:
    for values in [None, *examples]:
        args = ["-f", values] if values else []
        rendered = render(*args)
        cm = kind(rendered, "ConfigMap")[0]
        path = os.path.join(work, "check.yaml")
        with open(path, "w") as f:
            f.write(cm["data"]["streamcar.yaml"])
        pod_env = {"POD_NAME": "pod-0", "REDIS_PASSWORD": "x"}
        for d in kind(rendered, "Deployment"):  # the sentinels' credentials, where the pod gets them
            pod_env.update({e["name"]: "x" for e in streamcar_container(d["spec"]["template"]["spec"])["env"]
                            if e["name"].startswith("REDIS_SENTINEL_")})
        result = subprocess.run([BINARY, "check", "-c", path], capture_output=True, text=True,
                                env={**os.environ, **pod_env})
        check(result.returncode == 0, f"streamcar check on the rendered config ({os.path.basename(values) if values else 'defaults'}): {result.stderr.strip()}")

# 5. a pod on one machine
    redis_port, handler_port, admin_port = free_port(), free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--requirepass", "chart-secret", "--dir", work],
                             stdout=subprocess.DEVNULL)
    handler_log = open(os.path.join(work, "handler.log"), "w")
    handler = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "python", "handler.py"), str(handler_port)],
                               stdout=handler_log, stderr=subprocess.STDOUT)
    sidecar_proc = None
    try:
        docs = render("-f", os.path.join(CHART, "examples", "app-with-sidecar.yaml"),
                      "--set", f"config.redis.url=redis://127.0.0.1:{redis_port}/0",
                      "--set", f"config.admin.listen=127.0.0.1:{admin_port}", "--set", f"adminPort={admin_port}",
                      "--set", "redisAuth.existingSecret=", "--set", "redisAuth.password=chart-secret",
                      "--set", f"config.subscriptions[0].handler.url=http://127.0.0.1:{handler_port}/orders",
                      "--set", "config.subscriptions[0].stream=orders", "--set", "config.subscriptions[0].group=billing",
                      "--set", "config.subscriptions[0].start=beginning")
        container = [c for c in kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"] if c["name"] == "streamcar"][0]
        secret = kind(docs, "Secret")[0]["stringData"]
        mount = container["volumeMounts"][0]["mountPath"]
        config_dir = os.path.join(work, "etc-streamcar")  # stands for the ConfigMap volume
        os.makedirs(config_dir)
        with open(os.path.join(config_dir, "streamcar.yaml"), "w") as f:
            f.write(kind(docs, "ConfigMap")[0]["data"]["streamcar.yaml"])
        env = {
  "PATH" : os.environ["PATH"]}
        for e in container["env"]:  # as the kubelet resolves them
            source = e.get("valueFrom", {})
            if "fieldRef" in source:
                env[e["name"]] = "orders-7d9f-abcde"
            elif "secretKeyRef" in source:
                env[e["name"]] = secret[source["secretKeyRef"]["key"]]
            else:
                env[e["name"]] = e["value"]
        args = [a.replace(mount, config_dir) for a in container["args"]]
        check(args[:2] == ["run", "-c"], f"the container runs {container['args']}")
        check(wait_port(handler_port), "the handler listens")
        sidecar_log = open(os.path.join(work, "sidecar.log"), "w")
        sidecar_proc = subprocess.Popen([BINARY, *args], env=env, stderr=sidecar_log)
        cli = ["redis-cli", "-p", str(redis_port), "--no-auth-warning", "-a", "chart-secret"]
        for n in range(5):
            subprocess.run([*cli, "XADD", "orders", "*", "action", "ok", "n", str(n)], check=True, capture_output=True)
        def delivered():
            with open(os.path.join(work, "handler.log")) as f:
                return sum(1 for line in f if line.startswith("processed"))
        check(eventually(lambda: delivered() == 5, 30), f"the chart-rendered pod delivered {delivered()}/5 entries")
        def metrics():
            return urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read().decode()
        # Acknowledgements are counted when the batched XACK returns, just after delivery.
        check(eventually(lambda: 'streamcar_acked_total{subscription="orders/billing"} 5' in metrics(), 10),
              "metrics count 5 acknowledged")
        ready = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/readyz", timeout=5).status
        check(ready == 200, "the readiness probe's path answers 200")
        consumers = subprocess.run([*cli, "XINFO", "CONSUMERS", "orders", "billing"], capture_output=True, text=True).stdout
        check("orders-7d9f-abcde" in consumers, "the consumer is named after the pod (POD_NAME)")
        sidecar_proc.terminate()
        check(sidecar_proc.wait(timeout=30) == 0, "SIGTERM: exit 0")
    finally:
        for proc in [sidecar_proc, handler, redis]:
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
finally:
    shutil.rmtree(work, ignore_errors=True)

summary()
