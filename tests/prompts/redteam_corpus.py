"""A red-team corpus of fake credentials, written apart from tests/prompts/secret_corpus.py (which
crosses provider formats with generic syntaxes): here each sample is a line or a few lines as a
CI log, a card body, a pod log, a shell history or a config file holds them, in the tools' and
languages' own syntaxes (curl, httpie, psql, mysql, JDBC/ODBC/ADO.NET, MongoDB/AMQP/Redis URLs,
git remotes, ~/.aws/credentials, a GCP service account, Azure SAS, webhooks, JSON logs with
escaped quotes, source code in seven languages, Compose, GitHub Actions, Ansible, Helm,
Terraform, .env, Windows shells, keytool, sshpass, openssl, pip, npm, Maven, NuGet, OAuth
answers, JWTs, PEM keys whole and cut across prefixed log lines, query strings, YAML flow
maps, XML attributes, session cookies, ipsec.secrets, wpa_supplicant).

Every secret is drawn at random per seed, so a rule tuned to one sample does not pass: a
sample is caught when no 4 characters of its secret that the text around it does not hold
remain after redaction (`leaked`).
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Sample:
    family: str
    text: str
    secrets: tuple[str, ...]  # as written in `text`; no 4 characters of one may stay


def _rnd(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _password(rng: random.Random) -> str:
    """A strong human-made password: letters, digits and symbols a shell or YAML takes as is."""
    return _rnd(rng, 5, string.ascii_letters) + _rnd(rng, 3, string.digits) + rng.choice("!#%*+-.@^_~") \
        + _rnd(rng, 5) + rng.choice("!#%*+-.@^_~") + _rnd(rng, 2)


def _token(rng: random.Random) -> str:
    return _rnd(rng, 32 + rng.randrange(12))


def _basic(rng: random.Random) -> str:
    return base64.b64encode(f"svc-{_rnd(rng, 4, string.ascii_lowercase)}:{_password(rng)}".encode()).decode()


def _jwt(rng: random.Random) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return part({"alg": "RS256", "typ": "JWT"}) + "." + part({"sub": _rnd(rng, 10), "exp": 1_900_000_000}) \
        + "." + _rnd(rng, 86, ALNUM + "-_")


def _pem_lines(rng: random.Random, n: int = 5) -> list[str]:
    return [_rnd(rng, 64, B64) for _ in range(n)]


# (family, template, kind of secret): `{s}` is where the secret goes.
_KINDS: dict[str, Callable[[random.Random], str]] = {
    "pw": _password,
    "tok": _token,
    "hex": lambda r: _rnd(r, 40, HEX),
    "basic": _basic,
    "jwt": _jwt,
    "aws": lambda r: _rnd(r, 40, B64),
    "ghp": lambda r: "gh" + "p_" + _rnd(r, 36),
    "stripe": lambda r: "sk" + "_live_" + _rnd(r, 24),
    "sendgrid": lambda r: "S" + "G." + _rnd(r, 22, ALNUM + "-_") + "." + _rnd(r, 43, ALNUM + "-_"),
    "twilio": lambda r: "S" + "K" + _rnd(r, 32, HEX),
    "sas": lambda r: _rnd(r, 43, B64),
    "session": lambda r: _rnd(r, 32, HEX),
    "b64url": lambda r: _rnd(r, 43, ALNUM + "-_"),
    "hex32": lambda r: _rnd(r, 32, HEX),
    "sentry-legacy": lambda r: _rnd(r, 32, HEX) + ":" + _rnd(r, 32, HEX),
}

TEMPLATES: tuple[tuple[str, str, str], ...] = (
    # HTTP clients and their verbose logs
    ("curl-user", "curl -fsS -u deploy:{s} https://jenkins.internal/api/json", "pw"),
    ("curl-user", 'curl --user "ci-bot:{s}" -X POST https://nexus.internal/service/rest', "pw"),
    ("curl-user", "curl -su admin:{s} https://registry.internal/v2/_catalog", "pw"),
    ("httpie-auth", "http -a deploy:{s} POST https://api.internal/v1/jobs", "pw"),
    ("curl-verbose-bearer", "> GET /v1/me HTTP/2\n> Host: api.example.com\n> Authorization: Bearer {s}\n> Accept: */*",
     "tok"),
    ("curl-verbose-basic", "> POST /token HTTP/1.1\n> Authorization: Basic {s}\n> Content-Length: 0", "basic"),
    ("httpie-header", 'http GET api.example.com/v2/items "Authorization:Token {s}"', "tok"),
    ("curl-header", 'curl -H "X-API-Key: {s}" https://api.example.com/v1/search', "tok"),
    ("curl-header", "curl --header 'PRIVATE-TOKEN: {s}' https://gitlab.example.com/api/v4/projects", "tok"),
    ("basic-built", 'curl -H "Authorization: Basic $(echo -n admin:{s} | base64)" https://x.internal', "pw"),
    # databases
    ("mysql", "mysqldump -h db.internal -uroot -p{s} shop > shop.sql", "pw"),
    ("mysql", 'mysql -h db -u app --password="{s}" shop -e "select 1"', "pw"),
    ("pgpassword", "PGPASSWORD={s} psql -h db.internal -U app -d shop -c 'select 1'", "pw"),
    ("pgpass", "$ cat ~/.pgpass\ndb.internal:5432:shop:app:{s}", "pw"),
    ("jdbc", "spring.datasource.url=jdbc:postgresql://db:5432/shop?user=app&password={s}&ssl=true", "pw"),
    ("jdbc", "jdbc:sqlserver://db:1433;databaseName=shop;user=sa;password={s};encrypt=true", "pw"),
    ("odbc", "Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:db,1433;Uid=sa;Pwd={{{s}}};Encrypt=yes;", "pw"),
    ("odbc", "DSN=warehouse;UID=etl;PWD={s};", "pw"),
    ("adonet", '"ConnectionStrings": {{ "Default": "Server=db;Database=shop;User Id=sa;Password={s};" }}', "pw"),
    ("adonet", "Data Source=db;Initial Catalog=shop;User ID=sa;Password='{s}';Pooling=true", "pw"),
    ("mongodb-url", "MONGO_URL=mongodb+srv://app:{s}@cluster0.ab1cd.mongodb.net/shop?retryWrites=true", "tok"),
    ("amqp-url", "CELERY_BROKER_URL=amqps://worker:{s}@rabbit.internal:5671/prod", "tok"),
    ("redis-url", "REDIS_URL=rediss://default:{s}@redis-13337.c1.eu-west-1.ec2.cloud.redislabs.com:13337", "tok"),
    ("mongosh", 'mongosh "mongodb://db.internal:27017/admin" -u root -p {s}', "pw"),
    ("sqlcmd", 'sqlcmd -S db.internal -U sa -P {s} -Q "SELECT 1"', "pw"),
    ("redis-cli", "redis-cli -h cache.internal -a {s} ping", "pw"),
    # git, package managers, registries
    ("git-url", "remote: https://x-access-token:{s}@github.com/acme/app.git", "tok"),
    ("git-url", "git clone https://{s}@github.com/acme/private-repo.git", "tok"),
    ("git-url", "git remote set-url origin https://oauth2:{s}@gitlab.example.com/acme/app.git", "tok"),
    ("pip-index", "pip install --index-url https://ci:{s}@pypi.internal/simple/ acme-core==2.1", "pw"),
    ("npmrc", "//npm.pkg.github.com/:_authToken={s}", "tok"),
    ("npm-config", "npm config set //registry.npmjs.org/:_authToken {s}", "tok"),
    ("maven", "<server>\n  <id>nexus</id>\n  <username>ci</username>\n  <password>{s}</password>\n</server>", "pw"),
    ("nuget", '<packageSourceCredentials>\n  <acme>\n    <add key="Username" value="ci" />\n'
              '    <add key="ClearTextPassword" value="{s}" />\n  </acme>\n</packageSourceCredentials>', "pw"),
    ("nuget-cli", "nuget sources add -Name acme -Source https://nuget.acme.io/v3 -Username ci -Password {s}", "pw"),
    ("docker-login", "echo {s} | docker login ghcr.io -u bot --password-stdin", "pw"),
    ("gh-login", "gh auth login --with-token <<< {s}", "tok"),
    # clouds
    ("aws-credentials", "[prod]\naws_access_key_id = AKIA" + "Q3EXAMPLEKEY7ID\naws_secret_access_key = {s}\n", "aws"),
    ("gcp-service-account", '{{"type": "service_account", "project_id": "acme-prod", "private_key_id": "{s}", '
                            '"client_email": "ci@acme-prod.iam.gserviceaccount.com"}}', "hex"),
    ("azure-sas", "https://acme.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&srt=o&sp=r"
                  "&se=2025-01-01T00:00:00Z&sig={s}", "sas"),
    ("az-login", "az login --service-principal -u 5f1c-app -p {s} --tenant acme.onmicrosoft.com", "pw"),
    ("powershell-param", "Connect-AzAccount -ServicePrincipal -ApplicationId $appId -Tenant $t -ClientSecret {s}",
     "tok"),
    # webhooks and provider keys inside JSON logs
    ("slack-webhook", "SLACK_WEBHOOK=https://hooks.slack.com/services/T0ABCDE12/B0ABCDE3456/{s}", "tok"),
    ("discord-webhook", "post to https://discord.com/api/webhooks/1234567890123456789/{s}", "tok"),
    ("json-log-escaped", '{{"level":"error","msg":"stripe call failed","request":"{{\\"api_key\\":\\"{s}\\"}}"}}',
     "stripe"),
    ("json-log-escaped", '{{"ts":"2024-05-01T10:00:00Z","msg":"send","cfg":"{{\\"sendgrid_key\\":\\"{s}\\"}}"}}',
     "sendgrid"),
    ("json-log", '{{"event":"sms","twilio":{{"api_key":"{s}","region":"ie1"}}}}', "twilio"),
    ("json-log-escaped", '{{"log":"POST /login body={{\\"user\\":\\"bob\\",\\"password\\":\\"{s}\\"}}\\n",'
                         '"stream":"stdout"}}', "pw"),
    # source code
    ("js-const", 'const API_KEY = "{s}";', "tok"),
    ("js-object", "export const config = {{ apiKey: '{s}', region: 'eu' }};", "tok"),
    ("js-fallback", "const token = process.env.API_TOKEN || '{s}';", "tok"),
    ("python-environ", 'os.environ["OPENAI_API_KEY"] = "{s}"', "tok"),
    ("python-getenv", 'SECRET_KEY = os.getenv("SECRET_KEY", "{s}")', "tok"),
    ("python-auth", "r = requests.get(url, auth=('svc-ci', '{s}'), timeout=10)", "pw"),
    ("go", 'os.Setenv("API_TOKEN", "{s}")', "tok"),
    ("go", 'apiKey := "{s}"', "tok"),
    ("java", 'private static final String API_KEY = "{s}";', "tok"),
    ("java-value", '@Value("${{db.password:{s}}}")\nprivate String dbPassword;', "pw"),
    ("java-jdbc", 'Connection c = DriverManager.getConnection(url, "app", "{s}");', "pw"),
    ("csharp", 'var apiKey = Environment.GetEnvironmentVariable("API_KEY") ?? "{s}";', "tok"),
    ("csharp", 'var cred = new NetworkCredential("svc", "{s}");', "pw"),
    ("ruby", 'ENV["STRIPE_SECRET_KEY"] ||= "{s}"', "tok"),
    ("php", "define('AUTH_KEY', '{s}');", "tok"),
    ("php", "$password = '{s}';", "pw"),
    # deployment configuration
    ("compose-env-list", "services:\n  db:\n    image: postgres:16\n    environment:\n"
                         "      - POSTGRES_PASSWORD={s}\n      - POSTGRES_USER=app\n", "pw"),
    ("actions-env", "jobs:\n  publish:\n    runs-on: ubuntu-latest\n    env:\n      NPM_TOKEN: {s}\n", "tok"),
    ("ansible", "ansible_become_password: {s}\nansible_user: deploy\n", "pw"),
    ("helm-set", "helm upgrade --install shop ./chart --set postgresql.auth.password={s} --set image.tag=1.4",
     "pw"),
    ("tfvars", 'db_password = "{s}"\nregion      = "eu-west-1"\n', "pw"),
    ("dotenv-export", 'export GITLAB_TOKEN="{s}"', "tok"),
    ("windows-set", "C:\\app> set DB_PASSWORD={s}", "pw"),
    ("powershell-env", "$env:API_TOKEN = '{s}'", "tok"),
    ("kubectl-literal", "kubectl create secret generic db --from-literal=password={s}", "pw"),
    ("docker-run-env", "docker run -d -e MYSQL_ROOT_PASSWORD={s} mysql:8", "pw"),
    ("yaml-flow-map", "db: {{host: db.internal, password: {s}, port: 5432}}", "pw"),
    ("xml-attribute", '<DataSource url="jdbc:postgresql://db/shop" user="app" password="{s}"/>', "pw"),
    ("dotnet-settings", '<setting name="ApiKey" serializeAs="String">\n  <value>{s}</value>\n</setting>', "tok"),
    # command lines
    ("keytool", "keytool -genkeypair -alias app -keystore app.p12 -storepass {s} -keypass {s}", "pw"),
    ("sshpass", "sshpass -p '{s}' ssh deploy@10.0.3.7 uptime", "pw"),
    ("openssl", "openssl pkcs12 -in client.p12 -passin pass:{s} -nodes -out client.pem", "pw"),
    ("ldap", 'ldapsearch -x -H ldaps://ldap.internal -D "cn=admin,dc=acme" -w {s} -b dc=acme', "pw"),
    ("smbclient", "smbclient //fs.internal/share -U backup%{s} -c ls", "pw"),
    ("rabbitmqctl", "rabbitmqctl add_user deploy {s}", "pw"),
    # OAuth and tokens in logs
    ("oauth-log", "INFO oauth: issued token={s} expires_in=3600 scope=read", "tok"),
    ("oauth-json", '{{"access_token":"{s}","token_type":"bearer","expires_in":3600}}', "tok"),
    ("oauth-json", '{{"client_id":"acme-web","client_secret":"{s}"}}', "tok"),
    ("oauth-json", 'refresh_token: {s}', "tok"),
    ("jwt", 'Authorization: Bearer {s}', "jwt"),
    ("jwt", '{{"id_token": "{s}"}}', "jwt"),
    ("query-string", "GET /api/v1/items?page=2&api_key={s}&sort=asc HTTP/1.1", "tok"),
    ("query-string", "redirect to https://app.example.com/callback#access_token={s}&token_type=Bearer", "tok"),
    ("session-cookie", "< Set-Cookie: sessionid={s}; Path=/; HttpOnly; Secure", "session"),
    ("session-cookie", "Cookie: csrftoken=abc; JSESSIONID={s}; theme=dark", "session"),
    # network secrets
    ("wpa-supplicant", 'network={{\n    ssid="acme-office"\n    psk="{s}"\n}}', "pw"),
    ("ipsec-secrets", '%any %any : PSK "{s}"', "pw"),
    ("nmconnection", "[wifi-security]\nkey-mgmt=wpa-psk\npsk={s}\n", "pw"),
    # keys in other formats, docs
    ("jwk", '{{"keys": [{{"kty": "RSA", "kid": "k1", "e": "AQAB", "n": "sXch", "d": "{s}"}}]}}', "b64url"),
    ("jwk", '{{"kty":"oct","alg":"HS256","k":"{s}"}}', "b64url"),
    ("azure-apim", "Ocp-Apim-Subscription-Key: {s}", "hex"),
    ("markdown-table", "| Variable | Value |\n|---|---|\n| `DB_PASSWORD` | `{s}` |\n| DB_HOST | db |", "pw"),
    # a key named only `*_KEY`, with a generated value
    ("bare-key-env", "OPENAI_KEY={s}\nSORT_KEY=created_at\n", "tok"),
    ("bare-key-env", "export STRIPE_KEY='{s}'", "tok"),
    ("bare-key-yaml", "billing:\n  MY_SERVICE_KEY: {s}\n  region: eu\n", "tok"),
    ("bare-key-code", "const client = new Client({{ serviceKey: \"{s}\", retries: 3 }});", "tok"),
    # error reporting
    ("sentry-dsn", "SENTRY_DSN=https://{s}@o450123.ingest.sentry.io/5501234", "hex32"),
    ("sentry-dsn", 'sentry_sdk.init(dsn="https://{s}@sentry.acme.io/12", traces_sample_rate=0.2)', "sentry-legacy"),
    # delimited text: a CSV of logins, a settings sheet saved as CSV
    ("csv-credentials", "username,password,role\nbob,{s},admin\nalice,{s},viewer\n", "pw"),
    ("csv-credentials", "id;name;api_token\n1;ci;{s}\n", "tok"),
    ("csv-pair", "db_host,db.internal\ndb_password,{s}\n", "pw"),
    # git's credential helper and its prompt answered in a log
    ("git-credential", "$ git credential fill\nprotocol=https\nhost=github.com\nusername=bob\npassword={s}\n", "pw"),
    ("git-prompt", "Username for 'https://github.com': bob\nPassword for 'https://bob@github.com': {s}\n"
                   "remote: Enumerating objects: 5, done.", "pw"),
)


def samples(seed: int = 0) -> list[Sample]:
    """One sample per template, with secrets drawn from `seed`; plus PEM keys whole and cut."""
    rng = random.Random(seed)
    out: list[Sample] = []
    for family, template, kind in TEMPLATES:
        secret = _KINDS[kind](rng)
        out.append(Sample(family, template.format(s=secret), (secret,)))
    out += _pem_samples(rng)
    body = _pem_lines(rng, 3)
    ppk = "\n".join(["PuTTY-User-Key-File-3: ssh-ed25519", "Encryption: none", "Comment: deploy",
                     "Public-Lines: 1", "AAAAC3NzaC1lZDI1NTE5AAAAIOa", "Private-Lines: 3", *body,
                     "Private-MAC: " + _rnd(rng, 64, HEX)])
    out.append(Sample("putty-key", ppk, tuple(body)))
    return out


def _pem_samples(rng: random.Random) -> list[Sample]:
    out: list[Sample] = []
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):
        body = _pem_lines(rng)
        pem = "\n".join([f"-----BEGIN {label}-----", *body, f"-----END {label}-----"])
        out.append(Sample("pem", pem, tuple(body)))
        # A pod log: each line prefixed with a timestamp and the stream (kubectl logs, CRI format).
        log = "\n".join(f"2024-05-01T10:00:0{i}.{rng.randrange(10**9):09d}Z stdout F {line}"
                        for i, line in enumerate(pem.splitlines()))
        out.append(Sample("pem-in-pod-log", log, tuple(body)))
        # An excerpt that starts inside the key (a log tail).
        tail = "\n".join(f"[web-7d9f] {line}" for line in pem.splitlines()[2:])
        out.append(Sample("pem-tail", tail, tuple(body[1:])))
    body = _pem_lines(rng, 3)
    sa = json.dumps({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body)
                     + "\n-----END PRIVATE KEY-----\n", "client_email": "ci@acme.iam.gserviceaccount.com"})
    out.append(Sample("gcp-service-account-key", sa, tuple(body)))
    return out


_MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def leaked(sample: Sample, out: str) -> list[str]:
    """The runs of 4 characters of a secret still in `out` that the text around the secrets
    does not hold by itself (`deploy`, `https`); the markers do not count."""
    around = sample.text
    for secret in sample.secrets:
        around = around.replace(secret, "\x00")
    out = _MARKER.sub("\x00", out)
    found = []
    for secret in sample.secrets:
        for i in range(len(secret) - 3):
            part = secret[i:i + 4]
            if part in out and part not in around:
                found.append(part)
                break
    return found
