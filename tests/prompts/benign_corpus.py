"""Text that holds no secret but looks like one to a careless scanner: commit SHAs, UUIDs,
lock-file hashes (package-lock integrity, poetry.lock, Cargo.lock, go.sum, pip --hash), base64
images, a sourcemap, minified JavaScript, image digests, test fixture hashes and manifests and
config files that hold references and templates where credentials go, all generated;
plus, for bulk, the Python sources and RECORD files (sha256 of every file) of the installed
packages. Whatever the redactor finds here is a false positive.

Used by tests/prompts/test_redaction_corpus.py and bench/redaction.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import sysconfig
import uuid
from collections.abc import Callable
from pathlib import Path

B62 = string.ascii_letters + string.digits


def _sha1(rng: random.Random) -> str:
    return hashlib.sha1(rng.randbytes(16)).hexdigest()


def _sha256(rng: random.Random) -> str:
    return hashlib.sha256(rng.randbytes(16)).hexdigest()


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(bytes=rng.randbytes(16), version=4))


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def git_log(rng: random.Random) -> str:
    sha, parent = _sha1(rng), _sha1(rng)
    return (f"commit {sha}\nMerge: {parent[:7]} {_sha1(rng)[:7]}\nAuthor: Dev <dev@example.com>\n"
            f"Date:   Tue Mar 4 05:06:07 2026 +0000\n\n    Fix retry of {parent[:10]} (#{rng.randint(1, 9999)})\n\n"
            f"diff --git a/app.py b/app.py\nindex {sha[:7]}..{parent[:7]} 100644\n"
            f"HEAD is now at {sha[:12]}\nrevision: {sha}\n")


def uuids(rng: random.Random) -> str:
    return (f'{{"id": "{_uuid(rng)}", "request_id": "{_uuid(rng)}", "trace_id": "{rng.randbytes(16).hex()}", '
            f'"span_id": "{rng.randbytes(8).hex()}", "tenant": "acme"}}\n'
            f"uid: {_uuid(rng)}\nresourceVersion: \"{rng.randint(10**6, 10**8)}\"\n")


def package_lock(rng: random.Random) -> str:
    name = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
    version = f"{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 30)}"
    digest = base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode()
    return (f'    "node_modules/{name}": {{\n      "version": "{version}",\n'
            f'      "resolved": "https://registry.npmjs.org/{name}/-/{name}-{version}.tgz",\n'
            f'      "integrity": "sha512-{digest}",\n      "dev": true\n    }},\n'
            f'{name}@^{version}:\n  version "{version}"\n  integrity sha512-{digest}\n')


def poetry_lock(rng: random.Random) -> str:
    name = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
    return (f'[[package]]\nname = "{name}"\nversion = "1.{rng.randint(0, 9)}.0"\n'
            f'files = [\n    {{file = "{name}-1.0-py3-none-any.whl", hash = "sha256:{_sha256(rng)}"}},\n'
            f'    {{file = "{name}-1.0.tar.gz", hash = "sha256:{_sha256(rng)}"}},\n]\n'
            f'{name}==1.0 \\\n    --hash=sha256:{_sha256(rng)}\n'
            f'content-hash = "{_sha256(rng)}"\n')


def cargo_lock(rng: random.Random) -> str:
    name = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
    h1 = base64.b64encode(hashlib.sha256(rng.randbytes(8)).digest()).decode()
    return (f'[[package]]\nname = "{name}"\nversion = "0.{rng.randint(0, 9)}.{rng.randint(0, 9)}"\n'
            f'source = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "{_sha256(rng)}"\n'
            f"golang.org/x/{name} v0.1.0 h1:{h1}\n")


def base64_image(rng: random.Random) -> str:
    return f'<img alt="logo" src="data:image/png;base64,iVBORw0KGgo{_b64(rng, rng.randint(300, 1500))}" />\n'


def sourcemap(rng: random.Random) -> str:
    vlq = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    segments = ";".join(",".join("".join(rng.choice(vlq) for _ in range(rng.randint(4, 7)))
                                 for _ in range(rng.randint(3, 12))) for _ in range(40))
    return json.dumps({"version": 3, "file": "app.min.js", "sources": ["src/app.ts", "src/api.ts"],
                       "names": ["fetchToken", "apiKey", "secret", "render"], "mappings": segments}) + "\n"


def minified_js(rng: random.Random) -> str:
    def ident() -> str:
        return rng.choice(string.ascii_letters) + "".join(rng.choice(B62) for _ in range(rng.randint(0, 2)))
    parts = []
    for _ in range(60):
        a, b, c = ident(), ident(), ident()
        parts.append(rng.choice([
            f"function {a}({b},{c}){{return {b}.apiKey||{c}.token}}",
            f"var {a}={b}({c},\"{rng.randbytes(6).hex()}\")",
            f"{a}.prototype.{b}=function(){{this._secret=null;return this.{c}}}",
            f"const {a}=\"{_b64(rng, 24)}\"",
            f"{a}=new Uint8Array([{','.join(str(rng.randint(0, 255)) for _ in range(12))}])",
            f"headers:{{Authorization:\"Bearer \"+{a}.accessToken}}",
            f"color:\"#{rng.randbytes(3).hex()}\"",
        ]))
    return ";".join(parts) + ";\n//# sourceMappingURL=app.min.js.map\n"


def digests(rng: random.Random) -> str:
    return (f"image: ghcr.io/acme/api@sha256:{_sha256(rng)}\n"
            f"Digest: sha256:{_sha256(rng)}\netag: \"{rng.randbytes(16).hex()}\"\n"
            f"X-Amz-Content-Sha256: {_sha256(rng)}\n")


def fixture_hashes(rng: random.Random) -> str:
    return (f'EXPECTED_SHA256 = "{_sha256(rng)}"\n'
            f'assert hashlib.md5(data).hexdigest() == "{rng.randbytes(16).hex()}"\n'
            f'FIXTURE_DIGEST = "{_sha1(rng)}"\nchecksum: {_sha256(rng)}\n'
            f'token_count = {rng.randint(1, 99999)}\nsecret_name = "db-credentials"\n'
            f'TOKEN_URL = "https://auth.example.com/oauth/token"\npassword_min_length = 12\n')


def manifests(rng: random.Random) -> str:
    """Configuration around credentials that holds none: a ConfigMap (base64 and block text),
    a Deployment reading its secrets by reference, block text under ordinary keys, a Helm
    chart's values (an existing Secret's name), .NET settings with the value first. No `kind: Secret`:
    the texts are joined into one, and a Secret's rules read every value of a text that declares
    one (tests/prompts/test_redact_kubernetes.py checks a chart's templated Secret stays)."""
    name = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 10)))
    return (f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-config\n"
            f"  annotations:\n    checksum/config: {_sha256(rng)}\ndata:\n  LOG_LEVEL: info\n"
            f"  settings.yaml: |\n    cache_ttl: 300\n    build: {_sha1(rng)}\n    token_header: X-Request-Token\n"
            f"binaryData:\n  logo.png: {_b64(rng, 48)}\n"
            f"---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  uid: {_uuid(rng)}\n"
            f"spec:\n  template:\n    spec:\n      containers:\n      - name: {name}\n"
            f"        image: ghcr.io/acme/{name}@sha256:{_sha256(rng)}\n        env:\n        - name: DB_PASSWORD\n"
            f"          valueFrom:\n            secretKeyRef:\n"
            f"              name: {name}-db\n              key: password\n"
            f"        args:\n        - --token-file=/var/run/secrets/token\n"
            f"description: |\n  Rotates the API token of {name} every {rng.randint(2, 90)} days.\n"
            f"  Commit {_sha1(rng)} moved the secret to Vault.\n"
            f"steps:\n  - run: |\n      echo \"$DEPLOY_TOKEN\" | docker login -u ci --password-stdin\n"
            f"      make deploy REV={_sha1(rng)[:12]}\n  - with:\n      token: ${{{{ secrets.GITHUB_TOKEN }}}}\n"
            f"password:\n  existingSecret: {name}-db\n  secretKey: password\n"
            f'<appSettings>\n  <add value="{rng.randint(1, 600)}" key="TokenLifetimeMinutes" />\n'
            f'  <add value="{_uuid(rng)}" key="TenantId" />\n</appSettings>\n'
            # Placeholders with no credential for a default (Compose, Spring, a shell).
            f"services:\n  {name}:\n    environment:\n      DB_PASSWORD: ${{DB_PASSWORD}}\n"
            f"      API_TOKEN: ${{API_TOKEN:?set API_TOKEN}}\n      PORT: ${{PORT:-{rng.randint(1024, 9999)}}}\n"
            f"      SECRET_NAME: ${{SECRET_NAME:-{name}-credentials}}\n      TOKEN_TTL: ${{TOKEN_TTL:-3600}}\n"
            f"      KEY_FILE: ${{TLS_KEY_FILE:-/etc/tls/{name}.pem}}\n"
            f"spring.datasource.url=${{DB_URL:jdbc:postgresql://db:5432/{name}}}\n"
            # YAML anchors, aliases and tags on references (CloudFormation, Home Assistant).
            f"base: &base\n  token_header: X-Request-Token\n  password: *{name}_password\n"
            f"Resources:\n  DbPassword: !Ref {name.capitalize()}DbPassword\n  ApiToken: !GetAtt Secret.Arn\n"
            f"api_key: !secret {name}_api_key\n"
            # TOML multi-line strings of prose under keys that mention a credential.
            f'[{name}]\nPASSWORD_HELP = """\nUse {rng.randint(8, 20)} characters or more.\n"""\n'
            f"token_doc = '''Rotated every {rng.randint(2, 90)} days.'''\n"
            # .properties lines separated by a space, and prose that starts with a credential word.
            f"db.password ${{DB_PASSWORD}}\njavax.net.ssl.trustStorePassword changeit\n"
            f"password reset link sent to {name}@example.com\ntoken refreshed for {name}\n"
            # A login form: a password input with no value, or a template's.
            f'<form>\n  <input type="hidden" name="rev" value="{_sha1(rng)}">\n'
            f'  <input type="password" name="password" placeholder="Password" autocomplete="current-password">\n'
            f'  <input type="password" value="{{{{ form.password.value }}}}">\n</form>\n')


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "git-log": git_log, "uuids": uuids, "package-lock": package_lock, "poetry-lock": poetry_lock,
    "cargo-lock": cargo_lock, "base64-image": base64_image, "sourcemap": sourcemap,
    "minified-js": minified_js, "digests": digests, "fixture-hashes": fixture_hashes, "manifests": manifests,
}


def generated(size: int, seed: int = 7) -> dict[str, str]:
    """About `size` characters of each kind."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    for name, make in GENERATORS.items():
        chunks: list[str] = []
        total = 0
        while total < size:
            chunks.append(make(rng))
            total += len(chunks[-1])
        out[name] = "".join(chunks)
    return out


def installed(size: int) -> dict[str, str]:
    """About `size` characters each of the installed packages' Python sources and RECORD files
    (real code and real sha256 hashes), read in a stable order."""
    site = Path(sysconfig.get_path("purelib"))
    out: dict[str, str] = {}
    for kind, pattern in (("site-packages-python", "*/*.py"), ("site-packages-RECORD", "*.dist-info/RECORD")):
        chunks: list[str] = []
        total = 0
        for path in sorted(site.glob(pattern)):
            text = path.read_text(encoding="utf-8", errors="replace")
            chunks.append(text)
            total += len(text)
            if total >= size:
                break
        out[kind] = "".join(chunks)[:size]
    return out
