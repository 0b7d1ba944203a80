"""A Kubernetes Secret's data: base64 values under any key, redacted in text that declares the
kind (kubectl get secret -o yaml / -o json, a manifest); its metadata and other kinds stay."""

from __future__ import annotations

import base64
import json

import pytest

from cardloop.prompts.redact import redact

PASSWORD = "Zx9kQ2mLp4" + "Vb7Ns1"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


ENCODED = {
    "DATABASE_URL": b64(f"postgres://app:{PASSWORD}@db:5432/app"),
    ".env": b64(f"API_KEY={PASSWORD}\nDEBUG=false\n"),
    "config.json": b64(json.dumps({"db": {"password": PASSWORD}})),
    "username": b64("svc-deploy"),
}
METADATA = '  name: app-env\n  namespace: production\n  resourceVersion: "12345678"\n  labels:\n    app: frontend\n'


def test_every_data_value_of_a_secret_manifest_is_redacted_and_its_metadata_stays() -> None:
    data = "".join(f"  {k}: {v}\n" for k, v in ENCODED.items())
    text = f"apiVersion: v1\nkind: Secret\nmetadata:\n{METADATA}type: Opaque\ndata:\n{data}"
    out = redact(text)
    assert not any(v[:12] in out for v in ENCODED.values()), out
    assert METADATA in out and "type: Opaque" in out
    assert out.count("[REDACTED:kubernetes-secret-data]") == len(ENCODED)


def test_kubectl_json_output_loses_its_data_values() -> None:
    text = json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "resourceVersion": "12345678"},
                       "data": ENCODED, "type": "Opaque"}, indent=4)
    out = redact(text)
    parsed = json.loads(out)
    assert set(parsed["data"].values()) == {"[REDACTED:kubernetes-secret-data]"}
    assert parsed["metadata"] == {"name": "x", "resourceVersion": "12345678"}


@pytest.mark.parametrize("text", [
    # Another kind: base64 values there are data the model may need (a ConfigMap's binaryData).
    "apiVersion: v1\nkind: ConfigMap\ndata:\n  logo.txt: " + b64("hello world, plain config") + "\n",
    # A Secret's fields that are no base64 of text.
    "kind: Secret\nmetadata:\n  name: mysecret\n  uid: 3f2a9c1e-1111-4222-8333-444455556666\n"
    '  resourceVersion: "12345678"\ntype: kubernetes.io/tls\n',
])
def test_base64_elsewhere_and_secret_metadata_stay(text: str) -> None:
    assert redact(text) == text
