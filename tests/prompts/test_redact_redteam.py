"""The red-team corpus (tests/prompts/redteam_corpus.py): every fake credential, in the syntax a CI
log, a card, a pod log or a config file holds it, is redacted whole, through the redactor and
through the cached scrubber the prompt assembler uses, and once end to end through `cardloop
prompt explain`; look-alikes of each (hashes, ids, names, references, masks, prose) stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cardloop.prompts.redact import redact
from cardloop.prompts.scrub import Scrubber
from tests.conftest import EXAMPLE_CARD, ROOT
from tests.prompts.redteam_corpus import TEMPLATES, leaked, samples

SEEDS = range(5)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_sample_loses_its_whole_secret(seed: int) -> None:
    missed = []
    for s in samples(seed):
        out = redact(s.text)
        if leaked(s, out):
            missed.append((s.family, out))
    assert not missed, missed


def test_the_assemblers_scrubber_redacts_the_corpus_the_same() -> None:
    scrubber = Scrubber()
    for s in samples(11):
        out = scrubber.scrub(s.text)
        assert out == redact(s.text)
        assert not leaked(s, out), (s.family, out)


def test_the_corpus_covers_many_families_with_one_sample_each() -> None:
    assert len({family for family, _, _ in TEMPLATES}) >= 70
    # And the keys: 4 PEM kinds x 3 forms, a service account, a PuTTY key.
    assert len(samples(0)) == len(TEMPLATES) + 14


# Look-alikes of every family above: stay as they are (a placeholder, a mask, a reference and a
# well-known default such as `changeme` or `changeit` are no secret to hide: they stay, so the
# model still sees what is configured).
BENIGN = [
    "commit 3f2a9c1e8b7d6f5a4e3c2b1a0f9e8d7c6b5a4f3e\nMerge: 1a2b3c4 5d6e7f8",
    "request id 550e8400-e29b-41d4-a716-446655440000 took 32 ms",
    "ALTER TABLE users ADD COLUMN password_hash VARCHAR(255) NOT NULL;",
    "SELECT id, password_hash, password_salt FROM users WHERE email = $1;",
    "usage: token_count=123 prompt_tokens=4567 completion_tokens=89",
    "passwordless login is enabled for this tenant",
    "docker login --password-stdin ghcr.io",
    "Set the password in the vault before deploying; rotate the API token every 90 days.",
    "env:\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}\n  password: ${{ secrets.DB_PASSWORD }}",
    'password: "********"\napi_key: <your-api-key>\ntoken = "<your-token>"',
    "password=changeme\nDB_PASSWORD=changeme\nauth_token: null\nsecret: \"\"",
    'password = os.environ["DB_PASSWORD"]\npassword = os.getenv("DB_PASSWORD", "")',
    'token = os.environ.get("GITHUB_TOKEN") or ""\nconst label = token ?? "not set";',
    'fields = ("username", "password", "password_confirmation")\nFIELDS = ["token", "refresh_token"]',
    'parser.add_argument("--password", "-p", help="the password")',
    'New-LocalUser -Name "bob" -Password $SecurePassword\nGet-Credential -Message "Enter password"',
    "mongosh --host db -u admin -p\nmongosh -u admin -p $MONGO_PASSWORD\nldapsearch -x -W -D cn=admin",
    "sqlcmd -S db -U sa -P $env:SA_PASSWORD\naz login -u user@example.com -p $AZ_PASSWORD",
    "nuget push pkg.nupkg -ApiKey $env:NUGET_KEY -Source https://nuget.example.com/v3",
    "smbclient -L //host -U guest%\nlftp -u anonymous, ftp.example.com\nnet user bob /delete\nnet user",
    "rabbitmqctl add_user admin\nnpm config set registry https://registry.npmjs.org/",
    "git config --global credential.helper store\nnpm config set //registry.npmjs.org/:_authToken ${NPM_TOKEN}",
    "gh auth login --with-token < token.txt\necho -n \"$USER:$PASS\" | base64",
    "echo -n 'content-type:text/plain' | base64",
    "requests.get(url, auth=(user, pw))\nHTTPBasicAuth(username, password)\nnew NetworkCredential(user, pass)",
    "DriverManager.getConnection(url, user, password)",
    '%any : RSA server.pem\n: PSK "secret"',
    "https://discord.com/api/webhooks/YOUR_WEBHOOK_ID/YOUR_WEBHOOK_TOKEN",
    "Cookie: theme=dark; lang=en-US; sidebar=collapsed\nSet-Cookie: session=; Max-Age=0; Path=/",
    "Cookie: session_count=12345678901234567890",
    'curl -u admin https://x.example.com\ncurl -u "$USER:$PASS" https://x\ncurl -u user:password https://x',
    "http -a user https://x.example.com\nhttp GET https://x.example.com/items page==2",
    "https://git@github.com/acme/app.git\nssh://git@github.com:22/acme/app.git",
    "https://ci-bot-user-name-here@gitlab.com/a/b.git",
    "pip install git+https://github.com/org/repo@a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0",
    "password reset123\nPassword rotation-2024\ntoken refreshed\ndb_password something",
    "psk: ${WIFI_PSK}\npsk=$PSK\nshared_key_length = 32",
    "password = hash(123)\nf(password=pw)\nreturn Token(42)\n  token: getToken(1),\n",
    "Driver={ODBC Driver 18 for SQL Server};Server=db;Trusted_Connection=yes;",
    "<Button token={authToken} onClick={go} />\n<Login password={password} />",
    '<setting name="Theme" serializeAs="String"><value>Dark</value></setting>',
    '<setting name="ApiKeyHeader" serializeAs="String"><value>X-Api-Key</value></setting>',
    "const apiKey = config.apiKey ?? process.env.API_KEY;\nsecret = vault.read(path) or {}",
    "define('DB_PASSWORD', getenv('DB_PASSWORD'));\ndefine('AUTH_KEY', 'put your unique phrase here');",
    'System.setProperty("javax.net.ssl.keyStorePassword", "changeit");',
    'os.environ["API_KEY"] = api_key\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "app.settings")',
    "ENV[\"RAILS_ENV\"] ||= \"production\"\n$_ENV['DB_PASSWORD'] = $password;",
    '{"kty": "RSA", "e": "AQAB", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1Wl"}',
    '{"d": "2024-05-01", "k": "value"}\nPublic-Lines: 2\nAAAAB3NzaC1yc2EAAAADAQABAAABAQ',
    "| Variable | Description |\n|---|---|\n| DB_PASSWORD | The database password |\n| API_TOKEN | string |",
    # Found in installed packages while this corpus was written: a key inside a longer string, an
    # object or an f-string after `=` or `:` (braces quote only in a connection string).
    '{"/v1/messages/count_tokens", "/v1/messages/count_tokens?beta=true"}',
    'auth["identity_token"] = {"source": "file", "path": v}\nf"has identity_token={identity_token_cfg!r}."',
    'x={clientSecret:{type:"string",minLength:0},tryItAuthBasicPassword:{type:"string"}};'
    'this.apiKey={name:n.name,in:n.in};y={withCredentials:{typeCaster:c,defaultValue:YT.withCredentials}}',
    "x-api-key: ${API_KEY}\nAuthorization: Bearer ${TOKEN}\nAuthorization: Bearer <token>",
    # A key named `*_KEY` that is no credential, or a value no generator made.
    'PRIMARY_KEY=id\nSORT_KEY=created_at\nKEY=value\nforeign_key: user_id\ncache_key = f"{prefix}:{user_id}"\n'
    "MONKEY=banana\nsorted(rows, key=itemgetter(1))",
    "ENV GPG_KEY 7169605F62C751356D054A26A821E680E5FA6305\nIDEMPOTENCY_KEY=550e8400-e29b-41d4-a716-446655440000",
    "S3_KEY=uploads/2024/05/Report-Q1.pdf\nCACHE_KEY=a8f5f167f44f4964e6c998dee827110c\nROUTING_KEY=orders.created.v2",
    "partition_key: tenant-42\nsort_key: 2024-01-01T00:00:00Z\nI18N_KEY=checkout.button.label",
    # Found in installed packages while these were written: a WebSocket handshake's public nonce,
    # and indented code whose lines split at commas as a CSV's would.
    '"Sec-WebSocket-Key": "k9kFAUWNAMmf5OEMfTlOEA==",',
    "    yield before, orig_token\n    yield var.identifier + '{', SYNTAX\n"
    "    yield from self.tokenize(var.base, VARIABLE)",
    # A DSN placeholder; git's prompt with no answer.
    "SENTRY_DSN=https://examplePublicKey@o0.ingest.sentry.io/0\nhttps://git@github.com/acme/app.git/12",
    "fatal: could not read Password for 'https://github.com': terminal prompts disabled",
    # Delimited text that is no table of credentials.
    "SELECT username, password\nFROM users, accounts\nfor key, value in d.items():\n    print(key, value)",
    "id,name,password_hash\n1,bob,2b12abcdefghij\nusername,password\nbob,sunshine\ndb_password,changeme",
    # Translation tables: a credential word translated is a label, not a secret.
    '{"login": {"title": "Melden Sie sich an", "password": "Passwort", "forgot": "Passwort vergessen?",'
    ' "submit": "Jetzt anmelden"}}',
    'de:\n  sessions:\n    new:\n      title: Anmelden bei Ihrem Konto\n      password: "Kennwort"\n'
    '      remember: Angemeldet bleiben\n',
    "const es = {\n  password: 'Contraseña',\n  forgot: '¿Olvidaste tu contraseña?',\n  submit: 'Iniciar sesión',\n};",
    '"password": "Mot de passe"\npassword: Passwort\nmsgid "Password"\nmsgstr "Passwort"\n',
    # Attribute paths on a YAML line or in code, with versions in their names.
    "password: settings.db.password\ntoken: config.secrets.token\napi_key: client.CoreV1Api\n"
    "secret = cfg.S3Spec.Version24\npassword = geometry.Point2D.x509Cert",
]


@pytest.mark.parametrize("text", BENIGN)
def test_look_alikes_stay(text: str) -> None:
    assert redact(text) == text


def test_look_alikes_stay_as_one_text() -> None:
    text = "\n".join(BENIGN)
    assert redact(text) == text


def test_prompt_explain_shows_no_secret_of_the_corpus(tmp_path: Path) -> None:
    """End to end: the corpus as a card's comments and context, through `cardloop prompt explain`
    with its payload; the secrets' markers are counted per item."""
    corpus = samples(23)
    card = json.loads(EXAMPLE_CARD.read_text())
    card["history"] = [{"role": "user", "author": "ops", "content": s.text} for s in corpus[:60]]
    card["context"] = [{"kind": "notes", "source": "ci", "title": f"log {i}", "content": s.text}
                       for i, s in enumerate(corpus[60:])]
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    cli = Path(sys.executable).parent / "cardloop"
    out = subprocess.run([str(cli), "prompt", "explain", "--card", str(path), "--stage", "planning", "--json",
                          "--provider", "anthropic"], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ), timeout=120)
    assert out.returncode == 0, out.stderr
    shown = out.stdout
    for s in corpus:
        for secret in s.secrets:
            # JSON escapes a PEM line's `/` as nothing else: the secret as written must be gone.
            assert secret not in shown and json.dumps(secret)[1:-1] not in shown, s.family
    assert sum(h["count"] for h in json.loads(shown)["explain"]["redacted_in"]) >= len(corpus)


def test_a_sentry_dsn_keeps_its_host_and_project() -> None:
    key, secret = "0123456789abcdef" * 2, "fedcba9876543210" * 2
    out = redact(f"dsn: https://{key}:{secret}@sentry.acme.io:9000/team/12\nSENTRY_DSN=https://{key}@o1.ingest.sentry.io/5")
    assert key not in out and secret not in out
    assert "@sentry.acme.io:9000/team/12" in out and "@o1.ingest.sentry.io/5" in out


def test_a_dictionary_word_password_in_a_config_still_goes() -> None:
    """Only a table of UI phrases makes a one-word value a translation: a config's neighbours
    (hosts, users, ports) are no phrases, and a random value goes even in a locale table."""
    assert "Sunshine" not in redact('{"host": "db.internal", "user": "admin", "password": "Sunshine", "port": 5432}')
    assert "Xk9pQ7vR2mT4" not in redact('{"password": "Xk9pQ7vR2mT4", "forgot": "Passwort vergessen?", '
                                        '"login": "Jetzt anmelden"}')
    # One phrase nearby is not a table.
    assert "Sunshine" not in redact('{"password": "Sunshine", "note": "rotate yearly"}')


def test_a_csv_table_ends_where_its_rows_do() -> None:
    pw = "Xk9pQ7vR2mT4"
    out = redact(f"user,password\nbob,{pw}\n\nname,Zq8wE3rT5yU7\ndb_password,{pw}X")
    assert pw not in out
    # After the blank line a new header `name,Zq8...` is no header (a value is no name): kept.
    assert "name,Zq8wE3rT5yU7" in out
    # A quoted label of words is a header's field (KeePass's export); the value goes, its quotes stay.
    out = redact(f'"Account","Login Name","Password"\n"Mail","bob","{pw}"')
    assert pw not in out and '"Login Name"' in out
    assert redact(f'"user","password"\n"bob","{pw}"') == '"user","password"\n"bob","[REDACTED:csv-credential]"'


def test_a_bare_key_goes_only_with_a_generated_value() -> None:
    token = "q8ZxT2mPvL9kW3nB7cD4"
    for text in (f"OPENAI_KEY={token}", f"serviceKey: '{token}'", f"OPENAIKEY={token}", f"sort_key = \"{token}\""):
        assert token not in redact(text), text
    for text in ("OPENAI_KEY=sk-your-key-here", "SORT_KEY=created_at_desc_2024", "KEY=" + token,
                 "MONKEY=" + "banana" * 3):
        assert redact(text) == text, text


@pytest.mark.parametrize("value", ["ctrNL833.XTCQY.i9", "hqnYN875.qlInt.px", "aB3.cD4.eF5", "wg46mK.Tr9x.zQ"])
def test_a_dotted_generated_password_is_no_attribute_path(value: str) -> None:
    """A part that mixes digits with both cases and holds no word of four letters is no name."""
    for text in (f"password: {value}", f"DB_PASSWORD={value}", f"db:\n  password: {value}\n"):
        assert value not in redact(text), text


@pytest.mark.parametrize(("row", "value"), [
    ('bob,"p,4ss;W0rd",db1', "p,4ss;W0rd"),  # the delimiter inside a quoted cell
    ('bob,"Xk9,pQ7""vR2",db1', 'Xk9,pQ7""vR2'),  # and an escaped quote
    ('"bob" , "p,4ss;W0rd" ,"db1"', "p,4ss;W0rd"),  # blanks around quoted cells
])
def test_a_quoted_cell_holding_the_delimiter_is_one_cell_of_its_column(row: str, value: str) -> None:
    out = redact(f"user,password,host\n{row}\nalice,Zq8wE3rT5yU7,db2\n")
    assert value not in out and "Zq8wE3rT5yU7" not in out
    assert "db1" in out and "db2" in out and "[REDACTED:csv-credential]" in out


def test_a_semicolon_table_with_a_quoted_semicolon_loses_the_whole_value() -> None:
    out = redact('user;password;host\nbob;"p;4ss;W0rd";db1\n')
    assert out == 'user;password;host\nbob;"[REDACTED:csv-credential]";db1\n'


def test_a_plain_word_goes_under_a_login_exports_password_column() -> None:
    out = redact("user,password,host\nbob,sunshine,db1\nalice,\"moonlight\",db2\n")
    assert "sunshine" not in out and "moonlight" not in out and "bob" in out and "db2" in out
    out = redact("email;db_password;url\nbob@acme.io;correcthorse;https://db.acme.io\n")
    assert "correcthorse" not in out


@pytest.mark.parametrize("text", [
    "username,password\nbob,sunshine\n",  # two fields: a form's or a doc's example
    "name,token,role\nbob,sessions,admin\n",  # no password's column, no user's
    "id,password_hash,created\n1,sunshine,2024-01-01\n",  # a hash's column
    'user,password,host\nbob,"unclosed,sunshine,db1\n',  # a quote that never closes: no row
])
def test_a_plain_word_stays_where_the_column_is_no_login_exports_password(text: str) -> None:
    assert redact(text) == text


def test_a_tab_separated_table_keeps_its_empty_cells_before_a_quoted_one() -> None:
    """A tab is the delimiter there, not a blank to skip: an empty cell stays a cell."""
    out = redact('id\tuser\tpassword\n1\t\t"Xk9,pQ7;vR2"\n2\tbob\t"Zq8wE3rT5yU7"\t\n')
    assert out == 'id\tuser\tpassword\n1\t\t"[REDACTED:csv-credential]"\n2\tbob\t"Zq8wE3rT5yU7"\t\n'
