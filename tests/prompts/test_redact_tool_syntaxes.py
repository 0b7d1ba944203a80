"""Passwords in tools' own syntaxes, where the key names no credential or no `=` marks the value:
.netrc over lines, .npmrc's `_auth`, keys ending in "pass", a Dockerfile's legacy `ENV`, a
.properties line with an undotted key, a Terraform variable's default, keytool, htpasswd, a
password piped to `--password-stdin`, redis.conf and PowerShell. References, prompts, names and
prose stay."""

from __future__ import annotations

import base64

import pytest

from cardloop.prompts.redact import redact

PW = "Zx9Qm2Lk" + "8Wt4Rv"
AUTH = base64.b64encode(f"deploy:{PW}".encode()).decode()


@pytest.mark.parametrize(("text", "rule"), [
    (f"machine github.com\n  login deploy\n  password {PW}\n", "command-login-password"),
    (f"machine h\nlogin deploy\npassword {PW}\n", "command-login-password"),
    (f"//npm.example.com/:_auth={AUTH}\nalways-auth=true\n", "npmrc-auth"),
    (f"_auth = \"{AUTH}\"\n", "npmrc-auth"),
    (f"SMTP_PASS={PW}\n", "generic-assignment"),
    (f"ansible_ssh_pass: {PW}\n", "generic-assignment"),
    (f"helm install app ./chart --set-string db.pass={PW}\n", "generic-assignment"),
    (f"openssl pkcs12 -export -passout pass:{PW} -out app.p12\n", "generic-assignment"),
    (f"FROM postgres:16\nENV POSTGRES_PASSWORD {PW}\n", "generic-assignment"),
    (f"# app.properties\npassword {PW}\n", "generic-assignment"),
    (f'variable "db_password" {{\n  type      = string\n  sensitive = true\n  default   = "{PW}"\n}}\n',
     "terraform-variable-default"),
    (f"keytool -importkeystore -srcstorepass {PW} -deststorepass '{PW}'\n", "keytool-password"),
    (f"jarsigner -keystore app.jks -storepass {PW} -keypass {PW} app.jar key\n", "keytool-password"),
    (f"RUN htpasswd -bc /etc/nginx/.htpasswd admin {PW}\n", "htpasswd-password"),
    (f"htpasswd -nbB admin '{PW}' > users\n", "htpasswd-password"),
    (f"echo '{PW}' | docker login -u deploy --password-stdin ghcr.io\n", "piped-password"),
    (f"printf %s {PW} | helm registry login r.example.com -u ci --password-stdin\n", "piped-password"),
    (f"requirepass {PW}\nmasterauth \"{PW}\"\n", "redis-config-password"),
    (f"redis-server --requirepass {PW}\n", "redis-config-password"),
    (f"$pw = ConvertTo-SecureString '{PW}' -AsPlainText -Force\n", "powershell-secure-string"),
    (f'$pw = convertto-securestring -String "{PW}" -asplaintext -force\n', "powershell-secure-string"),
], ids=["netrc-indented", "netrc-lines", "npmrc-auth", "npmrc-auth-quoted", "env-pass", "ansible-pass",
        "helm-pass", "openssl-pass", "dockerfile-env", "properties-undotted", "terraform", "keytool",
        "jarsigner", "htpasswd", "htpasswd-stdout", "echo-stdin", "printf-stdin", "redis-conf",
        "redis-server", "powershell", "powershell-lower"])
def test_a_password_in_a_tools_syntax_is_redacted(text: str, rule: str) -> None:
    out = redact(text)
    assert PW[:8] not in out and PW[-8:] not in out and AUTH[:12] not in out, out
    assert f"[REDACTED:{rule}]" in out, out


@pytest.mark.parametrize("text", [
    "machine github.com\n  login deploy\n  password $NETRC_PASSWORD\n",
    "login page\npassword reset link sent\n",
    "_auth=aGVsbG8gd29ybGQ=\n//npm.example.com/:_authToken=${NPM_TOKEN}\n",
    "DB_PASS=${DB_PASS}\nfirst_pass = compile(src)\nsecond_pass=True\nbypass=Xk9pQ7vR2mZa9\n",
    'const m = {all:"every",allPass:"overEvery",anyPass:"overSome"};\n',
    "a root that does not resolve grants nothing. Pass `strict_roots=False`\n    for a lenient check\n",
    "ENV PASSWORD_FILE /run/secrets/db_password\nENV APP_HOME /srv/app\n",
    "Password expired\npassword reset123\nPassword rotation-2024\nsecret_name db-creds-2024\n",
    'variable "region" {\n  default = "eu-west-1"\n}\nvariable "db_password_length" {\n  default = "16"\n}\n',
    'variable "db_password" {\n  default = var.fallback_password\n}\n',
    "keytool -list -keystore app.jks -storepass:env STOREPASS\nkeytool -storepass changeit -list\n",
    "htpasswd -b .htpasswd admin $ADMIN_PASSWORD\nhtpasswd -c .htpasswd admin\n",
    'echo "$CR_PAT" | docker login ghcr.io -u bot --password-stdin\necho done | tee log\n',
    "# requirepass foobared\nrequirepass ${REDIS_PASSWORD}\n",
    '$pw = ConvertTo-SecureString $plain -AsPlainText -Force\n$s = ConvertTo-SecureString "$env:PW" -AsPlainText\n',
], ids=["netrc-variable", "prose-lines", "npmrc-no-pair", "pass-names", "minified-pass", "prose-pass",
        "dockerfile-paths", "prose-and-names", "terraform-no-credential", "terraform-reference",
        "keytool-env", "htpasswd-variable", "echo-variable", "redis-default", "powershell-variable"])
def test_references_names_and_prose_in_those_syntaxes_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("text", "rule"), [
    # Pre-shared keys: wpa_supplicant, NetworkManager, env files, strongSwan/Libreswan.
    (f'network={{\n  ssid="office"\n  psk="{PW}"\n}}\n', "generic-assignment"),
    (f"[wifi-security]\nkey-mgmt=wpa-psk\npsk={PW}\n", "generic-assignment"),
    (f"WIFI_PSK={PW}\npre_shared_key = {PW}\n", "generic-assignment"),
    (f'%any %any : PSK "{PW}"\n', "ipsec-secret"),
    (f"@moon @sun : PSK 0s{AUTH}\n", "ipsec-secret"),
    (f'carol : EAP "{PW}"\n', "ipsec-secret"),
    # An undotted .properties key of several words is a setting, judged as `key=value` is; after
    # a plain word, a lowercase value with digits inside its letters (no word and number).
    ("db_password s3cr3tvalue9\n", "generic-assignment"),
    ("dbPassword hunter2go4it\n", "generic-assignment"),
    ("password s3cr3tvalue9\n", "generic-assignment"),
    # Single-dash parameters, tools' short flags, user and password in one argument.
    (f"nuget sources add -Name acme -Source https://x -Username ci -Password {PW}\n", "parameter-password"),
    (f"Connect-AzAccount -ServicePrincipal -ClientSecret '{PW}'\n", "parameter-password"),
    (f"mongosh mongodb://db -u root -p {PW}\n", "tool-password-flag"),
    (f"sqlcmd -S db -U sa -P {PW} -Q 'select 1'\n", "tool-password-flag"),
    (f'ldapsearch -x -D "cn=admin" -w "{PW}" -b dc=x\n', "tool-password-flag"),
    (f"az login --service-principal -u app -p {PW} --tenant t\n", "command-login-password"),
    (f"smbclient //fs/share -U backup%{PW}\n", "user-password-argument"),
    (f"lftp -u deploy,{PW} ftp.example.com\n", "user-password-argument"),
    (f"xfreerdp /u:admin /p:{PW} /v:host\n", "user-password-argument"),
    (f"rabbitmqctl add_user deploy {PW}\nnet user deploy {PW} /add\n", "positional-password"),
    (f"npm config set //registry.npmjs.org/:_authToken {PW}\n", "config-set-value"),
    (f"gh auth login --with-token <<< {PW}\n", "here-string-password"),
    (f"echo -n 'admin:{PW}' | base64\n", "basic-auth-encode"),
    (f"curl --user deploy:{PW}^x -X POST https://x\n", "http-client-user-password"),
    (f"http -a deploy:{PW} https://x\n", "http-client-user-password"),
    (f"requests.get(url, auth=('admin', '{PW}'))\n", "basic-auth-call"),
    (f'new NetworkCredential("svc", "{PW}")\n', "basic-auth-call"),
    (f'DriverManager.getConnection(url, "app", "{PW}")\n', "basic-auth-call"),
], ids=["wpa-supplicant", "nmconnection", "psk-env", "ipsec-psk", "ipsec-base64", "ipsec-eap",
        "properties-compound", "properties-camel", "properties-digits-inside", "nuget-password",
        "powershell-secret", "mongosh", "sqlcmd", "ldapsearch", "az-login", "smbclient", "lftp", "xfreerdp",
        "positional", "npm-config", "here-string", "echo-base64", "curl-user", "httpie", "python-auth",
        "dotnet-credential", "jdbc-call"])
def test_a_password_in_more_tools_syntaxes_is_redacted(text: str, rule: str) -> None:
    out = redact(text)
    assert PW[:8] not in out and PW[-8:] not in out and AUTH[:12] not in out, out
    assert f"[REDACTED:{rule}]" in out, out


@pytest.mark.parametrize("text", [
    "psk: ${WIFI_PSK}\npsk=$PSK\nwpa_passphrase ssid passphrase\n",
    '%any : RSA server.pem\n: PSK "secret"\n',
    "db_password something\npassword reset123\nPassword v2-rollout\n",
    "New-LocalUser -Name bob -Password $SecurePassword\nnuget push x.nupkg -ApiKey $env:NUGET_KEY\n",
    "mongosh -u admin -p\nsqlcmd -S db -w 200 -P $SA_PASSWORD\nldapsearch -x -W -p 389\n",
    "net user bob /delete\nnet user bob *\nrabbitmqctl add_user admin\n",
    "npm config set registry https://registry.npmjs.org/\ngit config --global credential.helper store\n",
    "echo -n 'content-type:text/plain' | base64\necho -n \"$USER:$PASS\" | base64\n",
    'curl -u admin https://x\ncurl -u "$USER:$PASS" https://x\nHTTPBasicAuth(username, password)\n',
], ids=["psk-references", "ipsec-word-and-file", "prose-and-names", "powershell-variables", "prompts-and-ports",
        "net-user-options", "config-names", "encoded-header", "clients-references"])
def test_references_prompts_and_words_in_more_tools_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    f"Username for 'https://github.com': bob\nPassword for 'https://bob@github.com': \n{PW}\n",
    f"Password for 'https://bob@github.com':\r\n  {PW}  \r\nremote: Enumerating objects: 5, done.",
    f"Password for 'https://bob@github.com': {PW}\n",
])
def test_a_git_prompts_answer_goes_on_its_line_or_the_next(text: str) -> None:
    """An answer echoed after the prompt's newline (an `expect` log) is the line below, alone."""
    out = redact(text)
    assert PW not in out
    assert "[REDACTED:git-password-prompt]" in out and "Password for 'https://bob@github.com':" in out


@pytest.mark.parametrize("text", [
    "Password for 'https://bob@github.com': \nfatal: Authentication failed for 'https://github.com/acme/app/'\n",
    "Password for 'https://bob@github.com': \n$GIT_PASSWORD\n",
    "Password for 'https://bob@github.com': \n\nremote: Invalid username or password.\n",
    "fatal: could not read Password for 'https://github.com': terminal prompts disabled\n",
])
def test_what_follows_a_git_prompt_that_is_no_answer_stays(text: str) -> None:
    assert redact(text) == text
