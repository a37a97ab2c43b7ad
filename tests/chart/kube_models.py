"""Every object the chart test renders, validated with the published object models
(validate_models.mjs: kubernetes-models, @kubernetes-models/keda and
@kubernetes-models/prometheus-operator, installed by scripts/kube-models) in one node run."""
import json
import os
import subprocess

_HERE = os.path.dirname(os.path.abspath(__file__))


def validate(objects, root):
    """The problems of each object, in order: a list of lists of strings ([] when valid)."""
    models = subprocess.run([os.path.join(root, "scripts", "kube-models")], check=True, capture_output=True,
                            text=True).stdout.strip()
    result = subprocess.run(["node", os.path.join(_HERE, "validate_models.mjs"), models],
                            input=json.dumps(objects), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"validate_models.mjs failed: {result.stderr.strip()}")
    return [entry["errors"] for entry in json.loads(result.stdout)]
