"""`cardloop temporal-setup`: the namespace and cardloop's search attributes on a self-hosted
Temporal cluster, idempotently (what deploy/temporal/setup runs as a Kubernetes Job).

Temporal Cloud namespaces and their search attributes are created in the Cloud UI or with
`tcld` instead (deploy/temporal/README.md); this command then only checks them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from cardloop.app.temporal import tls_config, unreachable
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.names import SEARCH_ATTRIBUTE_TYPES

_RETENTION_UNITS = {"h": 3600, "m": 60, "s": 1, "d": 86400}


def retention_said(retention: timedelta) -> str:
    """720h as "30 days", 36h as "36 hours" (str(timedelta) says "30 days, 0:00:00")."""
    seconds = int(retention.total_seconds())
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400} day{'s' if seconds != 86_400 else ''}"
    if seconds % 3_600 == 0:
        return f"{seconds // 3_600} hours"
    return f"{seconds:,} seconds"


def parse_retention(text: str) -> timedelta:
    unit = text[-1:]
    if unit not in _RETENTION_UNITS or not text[:-1].isdigit():
        raise ConfigError(f"retention {text!r}: expected a number and a unit (d, h, m, s), e.g. 720h")
    return timedelta(seconds=int(text[:-1]) * _RETENTION_UNITS[unit])


async def _plain_client(config: Config) -> Client:
    # Setup moves no payloads: no codec keys needed here.
    t = config.temporal
    api_key = config.temporal_api_key()
    try:
        return await Client.connect(t.address, namespace=t.namespace, tls=tls_config(config),
                                    api_key=api_key.reveal() if api_key else None)
    except RuntimeError as exc:
        raise unreachable(t.address, t.namespace, exc) from None


async def missing_setup(config: Config) -> list[str]:
    """What `setup_temporal` would have to do on this server: the namespace, or search attributes
    missing or of another type (`cardloop doctor`). Changes nothing."""
    client = await _plain_client(config)
    ns = config.temporal.namespace
    try:
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=ns))
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=ns))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return ["the namespace does not exist"]
        raise
    existing = dict(listed.custom_attributes)
    problems = []
    for name, kind in SEARCH_ATTRIBUTE_TYPES.items():
        wanted = IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
        if name not in existing:
            problems.append(f"search attribute {name} ({kind}) is missing")
        elif existing[name] != wanted:
            problems.append(f"search attribute {name} is {IndexedValueType.Name(existing[name])}, not {kind}")
    return problems


async def setup_temporal(config: Config, *, retention: timedelta, out: Callable[[str], None],
                         attempts: int = 60) -> None:
    client = await _plain_client(config)
    ns = config.temporal.namespace
    svc = client.workflow_service
    try:
        await svc.describe_namespace(DescribeNamespaceRequest(namespace=ns))
        out(f"namespace {ns}: exists")
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise ConfigError(f"describing namespace {ns}: {exc.message}") from None
        await svc.register_namespace(RegisterNamespaceRequest(
            namespace=ns, workflow_execution_retention_period=Duration(seconds=int(retention.total_seconds())),
            description="cardloop cards"))
        out(f"namespace {ns}: created (retention {retention_said(retention)})")
    # A new namespace reaches the frontends' caches after a few seconds: retry until it is known.
    for attempt in range(attempts):
        try:
            listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=ns))
            break
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND or attempt == attempts - 1:
                raise ConfigError(f"listing search attributes of {ns}: {exc.message}") from None
            await asyncio.sleep(0.5)
    existing = dict(listed.custom_attributes)
    wanted = {name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
              for name, kind in SEARCH_ATTRIBUTE_TYPES.items()}
    wrong = [f"{n} is {IndexedValueType.Name(existing[n])}" for n, v in wanted.items() if n in existing
             and existing[n] != v]
    if wrong:
        raise ConfigError(f"namespace {ns}: search attributes with other types: {', '.join(wrong)}")
    missing = {n: v for n, v in wanted.items() if n not in existing}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=ns, search_attributes=missing))
    for name, kind in SEARCH_ATTRIBUTE_TYPES.items():
        out(f"search attribute {name} ({kind}): {'added' if name in missing else 'exists'}")
