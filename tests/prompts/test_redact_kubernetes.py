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


OTHER = "Qm3Rt8Wv" + "Xy2Kp5Ln"
STRING_DATA_METADATA = ("metadata:\n  name: app-env\n  namespace: production\n  labels:\n    app: frontend\n"
                        "type: Opaque\n")


def test_every_string_data_value_of_a_secret_manifest_is_redacted_under_any_key() -> None:
    text = (f"apiVersion: v1\nkind: Secret\n{STRING_DATA_METADATA}stringData:\n"
            f"  DATABASE_URL: postgres://app:{PASSWORD}@db:5432/app\n"
            f"  username: svc-deploy\n"
            f"  SMTP_PASS: \"{OTHER}\"\n"
            f"  note: correct horse battery staple  # a comment stays\n"
            f"  single: 'it''s {PASSWORD}'\n")
    out = redact(text)
    assert PASSWORD[:8] not in out and OTHER[:8] not in out and "horse" not in out and "svc-deploy" not in out
    assert out.startswith(f"apiVersion: v1\nkind: Secret\n{STRING_DATA_METADATA}stringData:\n")
    assert out.count("[REDACTED:kubernetes-secret-string-data]") == 5, out
    assert '  SMTP_PASS: "[REDACTED:kubernetes-secret-string-data]"\n' in out
    assert "  note: [REDACTED:kubernetes-secret-string-data]  # a comment stays\n" in out


def test_a_block_scalar_in_string_data_loses_every_line_and_the_keys_after_it_stay() -> None:
    text = (f"kind: Secret\nstringData:\n  .env: |\n    API_KEY={PASSWORD}\n    # rotated monthly\n\n"
            f"    DEBUG=false\n  config.yaml: >-\n    db:\n      password: {OTHER}\n  port: \"5432\"\n"
            "type: Opaque\n")
    out = redact(text)
    assert out == ("kind: Secret\nstringData:\n  .env: |\n    [REDACTED:kubernetes-secret-string-data]\n"
                   "  config.yaml: >-\n    [REDACTED:kubernetes-secret-string-data]\n"
                   "  port: \"[REDACTED:kubernetes-secret-string-data]\"\ntype: Opaque\n")


@pytest.mark.parametrize("compact", [False, True], ids=["kubectl-json", "compact"])
def test_string_data_in_json_is_redacted_and_the_json_still_parses(compact: bool) -> None:
    metadata = {"name": "x", "uid": "3f2a9c1e-1111-4222-8333-444455556666"}
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata,
                "stringData": {"password": PASSWORD, "quoted": f'a"b{OTHER}', "url": f"redis://:{OTHER}@cache:6379"},
                "type": "Opaque"}
    text = json.dumps(manifest, separators=(",", ":")) if compact else json.dumps(manifest, indent=2)
    parsed = json.loads(redact(text))
    assert set(parsed["stringData"].values()) == {"[REDACTED:kubernetes-secret-string-data]"}
    assert parsed["metadata"] == manifest["metadata"]


def test_string_data_inside_a_json_string_and_in_kubectls_last_applied_annotation() -> None:
    manifest = {"apiVersion": "v1", "kind": "Secret", "stringData": {"password": PASSWORD, "q": f'x"{OTHER}'}}
    quoted = json.dumps({"tool": "read_file", "content": json.dumps(manifest)})
    parsed = json.loads(json.loads(redact(quoted))["content"])
    assert set(parsed["stringData"].values()) == {"[REDACTED:kubernetes-secret-string-data]"}
    # `kubectl get secret -o yaml` after `kubectl apply` of a stringData manifest.
    applied = ("apiVersion: v1\nkind: Secret\nmetadata:\n  annotations:\n"
               "    kubectl.kubernetes.io/last-applied-configuration: |\n      "
               + json.dumps(manifest, separators=(",", ":"))
               + "\n  name: x\ndata:\n  password: " + b64(PASSWORD) + "\n")
    out = redact(applied)
    assert PASSWORD[:8] not in out and OTHER[:8] not in out and b64(PASSWORD)[:12] not in out
    assert "kubectl.kubernetes.io/last-applied-configuration: |" in out and "  name: x\n" in out


def test_a_secret_in_a_kubectl_list_and_in_a_manifest_yaml_quoted_in_json() -> None:
    listed = f"items:\n- apiVersion: v1\n  kind: Secret\n  stringData:\n    password: {PASSWORD}\n  type: Opaque\n"
    assert redact(listed) == listed.replace(PASSWORD, "[REDACTED:kubernetes-secret-string-data]")
    quoted = json.dumps({"content": f"kind: Secret\nstringData:\n  token: {PASSWORD}\n  empty: \"\"\n"})
    assert json.loads(redact(quoted))["content"] == \
        "kind: Secret\nstringData:\n  token: [REDACTED:kubernetes-secret-string-data]\n  empty: \"\"\n"


@pytest.mark.parametrize("text", [
    # A Helm chart's Secret: templates and variables where the values go.
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ include \"app.fullname\" . }}\ntype: Opaque\nstringData:\n"
    "  password: {{ .Values.db.password | quote }}\n  DATABASE_URL: ${DATABASE_URL}\n  empty: \"\"\n"
    "  {{- range $k, $v := .Values.env }}\n  {{ $k }}: {{ $v | quote }}\n  {{- end }}\n",
    # Another kind: its values are configuration, whatever the key.
    "apiVersion: v1\nkind: ConfigMap\ndata:\n  stringData: hello world\n  settings.yaml: |\n    mode: fast\n",
    # `stringData` as a word, not a key.
    "kind: Secret\nmetadata:\n  name: x\n# stringData: is write-only\nstringDataNote: plain\n",
])
def test_templated_string_data_and_other_kinds_stay(text: str) -> None:
    assert redact(text) == text


def test_data_values_of_a_secret_quoted_in_json_are_redacted() -> None:
    # A tool result quoting `kubectl get secret -o json`, in a prompt or log line that is JSON.
    manifest = {"kind": "Secret", "metadata": {"resourceVersion": "12345678"}, "data": ENCODED}
    parsed = json.loads(json.loads(redact(json.dumps({"content": json.dumps(manifest)})))["content"])
    assert set(parsed["data"].values()) == {"[REDACTED:kubernetes-secret-data]"}
    assert parsed["metadata"] == manifest["metadata"]


LOGO = b64("<svg xmlns='http://www.w3.org/2000/svg'><title>acme</title></svg>")


@pytest.mark.parametrize("text", [
    # A ConfigMap after a Secret in one file: its data is configuration.
    f"apiVersion: v1\nkind: Secret\ntype: Opaque\ndata:\n  password: {b64(PASSWORD)}\n---\n"
    f"apiVersion: v1\nkind: ConfigMap\ndata:\n  logo.svg: {LOGO}\n",
    # kubectl get secrets,configmaps -o yaml: a list whose items name their own kinds (after their data).
    f"apiVersion: v1\nitems:\n- apiVersion: v1\n  data:\n    logo.svg: {LOGO}\n  kind: ConfigMap\n"
    f"  metadata:\n    name: brand\n- apiVersion: v1\n  data:\n    password: {b64(PASSWORD)}\n  kind: Secret\n"
    f"  metadata:\n    name: db\n    annotations:\n      checksum: {LOGO}\nkind: List\n",
    # The same as JSON.
    json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "ConfigMap", "data": {"logo.svg": LOGO}},
        {"kind": "Secret", "data": {"password": b64(PASSWORD)}, "metadata": {"annotations": {"checksum": LOGO}}},
    ]}, indent=2),
    # A comment that names the kind; base64 under another key.
    f"# the chart renders a kind: Secret from these\nbranding:\n  logo: {LOGO}\n",
], ids=["next-document", "kubectl-list", "kubectl-list-json", "comment"])
def test_base64_outside_a_secrets_data_stays_in_text_that_declares_one(text: str) -> None:
    out = redact(text)
    assert b64(PASSWORD) not in out and LOGO in out
    assert out.count(LOGO) == text.count(LOGO)


@pytest.mark.parametrize("text", [
    f'"kind": "Secret",\n"data": {{"password": "{b64(PASSWORD)}"}}\n',  # an excerpt without its outer braces
    f'{{"kind": "Secret", "data": {{"password": "{b64(PASSWORD)}", "port": "{b64("5432")}"',  # a cut log line
    f"kind: Secret\nmetadata:\n  name: db\n\n    data:\n      password: {b64(PASSWORD)}\n",  # odd indentation
], ids=["json-excerpt", "json-truncated", "indented-excerpt"])
def test_a_secrets_data_cut_from_its_object_is_still_redacted(text: str) -> None:
    assert b64(PASSWORD) not in redact(text)
