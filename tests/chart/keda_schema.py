"""KEDA's side of the chart test: the ScaledObject and TriggerAuthentication the chart renders,
checked against KEDA's own CustomResourceDefinitions (tests/chart/keda/, copied from kedacore/keda
8b4f083) and against the metadata and parameter names KEDA's Redis scalers read.

The CRDs' openAPIV3Schema uses a small part of OpenAPI v3 (type, properties, required, items,
enum, minimum, minItems, minLength, pattern, additionalProperties, anyOf,
x-kubernetes-int-or-string); `validate` implements exactly that part, and refuses unknown fields
as the API server's strict field validation does. Not checked: `format` and the CEL rules of
x-kubernetes-validations (none applies to the fields the chart renders).
"""
import os
import re

import yaml

_HERE = os.path.dirname(os.path.abspath(__file__))

# The metadata names KEDA's redis-streams, redis-cluster-streams and redis-sentinel-streams
# scalers read (pkg/scalers/redis_streams_scaler.go: redisStreamsMetadata, and
# pkg/scalers/redis_scaler.go: redisConnectionInfo, at 8b4f083: the `order=triggerMetadata` tags).
# A name outside these is ignored by KEDA: a typo in the chart would silently drop a setting. The
# TLS material (ca, cert, key) is read from authParams only, unsafeSsl from the metadata only.
TRIGGER_METADATA = {
    "address", "addresses", "host", "hosts", "port", "ports", "username", "password",
    "sentinelUsername", "sentinelPassword", "sentinelMaster", "unsafeSsl",
    "stream", "consumerGroup", "pendingEntriesCount", "streamLength", "lagCount",
    "activationLagCount", "databaseIndex", "enableTLS",
}
# The names KEDA takes from a TriggerAuthentication (order=...authParams... in the same structs).
# `tls` is left out on purpose: KEDA refuses it together with the metadata's enableTLS, which the
# chart always renders.
AUTH_PARAMETERS = {
    "address", "addresses", "host", "hosts", "port", "ports", "username", "password",
    "sentinelUsername", "sentinelPassword", "sentinelMaster", "cert", "Cert", "key",
    "keyPassword", "ca",
}
# pkg/scaling/scalers_builder.go: the trigger types that build a Redis Streams scaler.
STREAM_TRIGGERS = {"redis-streams", "redis-cluster-streams", "redis-sentinel-streams"}


def _load_schemas():
    schemas = {}
    for name in sorted(n for n in os.listdir(os.path.join(_HERE, "keda")) if n.endswith(".yaml")):
        with open(os.path.join(_HERE, "keda", name)) as f:
            crd = yaml.safe_load(f)
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


SCHEMAS = _load_schemas()

_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool,
    "integer": int, "number": (int, float),
}


def _check(schema, value, path, errors):
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append(f"{path}: must be an integer or a string")
        return
    kind = schema.get("type")
    if kind:
        ok = isinstance(value, _TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool))
        if not ok:
            errors.append(f"{path}: must be of type {kind}, got {type(value).__name__} {value!r}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} is below {schema['minimum']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{path}: shorter than {schema['minLength']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: fewer than {schema['minItems']} items")
    if "anyOf" in schema:
        if not any(not _errors(option, value, path) for option in schema["anyOf"]):
            errors.append(f"{path}: matches none of anyOf")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: {name} is required")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in properties:
                _check(properties[name], item, f"{path}.{name}", errors)
            elif isinstance(extra, dict):
                _check(extra, item, f"{path}.{name}", errors)
            elif properties or extra is False:
                errors.append(f"{path}.{name}: unknown field")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(schema["items"], item, f"{path}[{i}]", errors)


def _errors(schema, value, path):
    errors = []
    _check(schema, value, path, errors)
    return errors


def validate(doc):
    """The problems of one rendered KEDA object against its CRD ([] when it is valid)."""
    schema = SCHEMAS.get((doc.get("apiVersion"), doc.get("kind")))
    if schema is None:
        return [f"no KEDA CRD for {doc.get('apiVersion')} {doc.get('kind')}"]
    # metadata is the API server's ObjectMeta: the CRD schema says only `type: object`.
    return _errors(schema, doc, doc["kind"])


def trigger_problems(trigger):
    """What KEDA's Redis Streams scalers would ignore or refuse in one ScaledObject trigger."""
    problems = []
    if trigger["type"] not in STREAM_TRIGGERS:
        problems.append(f"type {trigger['type']} is not a Redis Streams trigger")
    metadata = trigger["metadata"]
    unknown = sorted(set(metadata) - TRIGGER_METADATA)
    if unknown:
        problems.append(f"metadata KEDA does not read: {unknown}")
    # redis_scaler.go validateRedisAddress: an address (or hosts and ports) is required.
    if not (metadata.get("address") or metadata.get("addresses") or metadata.get("host") or metadata.get("hosts")):
        problems.append("no address")
    if trigger["type"] == "redis-sentinel-streams" and not metadata.get("sentinelMaster"):
        problems.append("redis-sentinel-streams without sentinelMaster")
    # redisStreamsMetadata.Validate: with a consumerGroup, a non-zero lagCount picks the lag and
    # drops pendingEntriesCount; without lagCount, the pending entries are counted.
    if not metadata.get("consumerGroup"):
        problems.append("no consumerGroup: KEDA would scale on the stream's length")
    if "lagCount" in metadata and "pendingEntriesCount" in metadata:
        problems.append("lagCount and pendingEntriesCount in one trigger: KEDA ignores pendingEntriesCount")
    # KEDA 2.11-2.15 refuse lagCount without activationLagCount (2.16 refuses it at 0, >= 2.17
    # defaults it to 0): the chart always renders it.
    if "lagCount" in metadata and "activationLagCount" not in metadata:
        problems.append("lagCount without activationLagCount: KEDA 2.11-2.16 refuse the trigger")
    for name in ("lagCount", "activationLagCount", "pendingEntriesCount", "databaseIndex"):
        if name in metadata and not re.fullmatch(r"[0-9]+", str(metadata[name])):
            problems.append(f"{name} {metadata[name]!r} is not a whole number")
    for name in ("enableTLS", "unsafeSsl"):
        if name in metadata and metadata[name] not in ("true", "false"):
            problems.append(f"{name} {metadata[name]!r} is not true or false")
    return problems


def auth_problems(trigger_auth):
    """Parameters of a TriggerAuthentication that KEDA's Redis scalers do not read, or refuse."""
    names = [ref["parameter"] for ref in trigger_auth["spec"].get("secretTargetRef", [])]
    unknown = sorted(set(names) - AUTH_PARAMETERS)
    problems = [f"parameters KEDA does not read: {unknown}"] if unknown else []
    # redis_scaler.go (2.12-2.15 parseTLSConfigIntoConnectionInfo): cert and key go together.
    if ("cert" in names) != ("key" in names):
        problems.append("cert without key or key without cert: KEDA refuses the pair")
    if len(names) != len(set(names)):
        problems.append(f"a parameter given twice: {names}")
    return problems
