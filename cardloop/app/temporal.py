"""Connecting to Temporal: a local dev server, a self-hosted cluster (TLS, mTLS) or Temporal
Cloud (API key), all from config.toml + the environment. Payloads are pydantic models,
encrypted by the payload codec (app/codec.py) unless temporal.encrypt_payloads is off."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.service import TLSConfig

from cardloop.app.codec import data_converter
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ConfigError(f"temporal.{key}: cannot read {path}: {exc.strerror}") from None


def tls_config(config: Config) -> TLSConfig | bool:
    t = config.temporal
    api_key = config.temporal_api_key()
    if not (t.tls or api_key or t.tls_client_cert or t.tls_ca_cert):
        return False
    if bool(t.tls_client_cert) != bool(t.tls_client_key):
        raise ConfigError("temporal.tls_client_cert and temporal.tls_client_key go together")
    return TLSConfig(
        server_root_ca_cert=_read(t.tls_ca_cert, "tls_ca_cert") if t.tls_ca_cert else None,
        domain=t.tls_server_name or None,
        client_cert=_read(t.tls_client_cert, "tls_client_cert") if t.tls_client_cert else None,
        client_private_key=_read(t.tls_client_key, "tls_client_key") if t.tls_client_key else None,
    )


async def connect(config: Config, *, address: str | None = None) -> Client:
    t = config.temporal
    api_key = config.temporal_api_key()
    try:
        return await Client.connect(
            address or t.address, namespace=t.namespace, tls=tls_config(config),
            api_key=api_key.reveal() if api_key else None,
            data_converter=data_converter(config, address=address or t.address),
        )
    except RuntimeError as exc:
        raise ConfigError(f"cannot reach Temporal at {address or t.address} (namespace {t.namespace}): {exc}. "
                          "Is the server up? `cardloop dev` starts a local one.") from None
