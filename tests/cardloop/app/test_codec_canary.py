"""The canary: a secret planted in a card's input, its history (a comment), a context item and a
provider error message never appears in Temporal's raw event histories when payloads are
encrypted; the same histories decode and replay with the codec. With encryption explicitly off
the same scenario does leak it, which shows the canary can find it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload, SearchAttributes
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from cardloop.activities.deps import ActivityDeps
from cardloop.app.cards import CardService
from cardloop.app.codec import AesGcmCodec, KeyRing, encrypting_converter
from cardloop.app.devserver import TemporalDevServer
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.temporal import connect
from cardloop.app.worker import WORKFLOWS, build_worker
from cardloop.contracts.payloads import CardRef, CardState
from cardloop.prompts.card import Card
from cardloop.store import Store
from tests.stack import TRANSCRIPT, make_config

pytestmark = pytest.mark.timeout(180)
RING = KeyRing.generate("canary-key")


def payloads_in(message: ProtoMessage) -> list[Payload]:
    """Every Payload inside a proto message (events, failures, memos, headers), except search
    attributes: the server indexes those, so they stay plain (card key, stage, repo, tenant)."""
    found: list[Payload] = []
    if isinstance(message, Payload):
        return [message]
    if isinstance(message, SearchAttributes):
        return []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = value.values()
        else:
            values = [value] if isinstance(value, ProtoMessage) else list(value)
        for v in values:
            if isinstance(v, ProtoMessage):
                found += payloads_in(v)
    return found


def user_payloads(event: HistoryEvent) -> list[Payload]:
    """The payloads our code writes. The SDK's markers also carry its own bookkeeping in plain
    JSON (a patch id; a local activity's seq, attempt, type and times), never our data."""
    marker = event.marker_recorded_event_attributes
    if not marker.marker_name:
        return payloads_in(event)
    if marker.marker_name == "core_patch":
        return []
    return [p for key, ps in marker.details.items() if key != "data" for p in ps.payloads] + payloads_in(marker.failure)


async def run_canary_card(tmp_path: Path, server: TemporalDevServer, secret: str, *,
                          encrypt: bool) -> tuple[Client, list[WorkflowHistory]]:
    env = {"CARDLOOP_CODEC_KEYS": RING.to_text()} if encrypt else {"CARDLOOP_TEMPORAL__ENCRYPT_PAYLOADS": "false"}
    config = make_config(server.address, f"canary-{uuid.uuid4().hex[:8]}", **env)
    store = Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}")
    model = ScriptedModel(load_transcript(TRANSCRIPT)).start()
    model.inject(status=400, message=f"max_tokens: too large ({secret})")
    runtime = ActivityDeps.build(config, store, base_urls={name: model.url for name in config.profiles})
    client = await connect(config)
    worker = build_worker(client, runtime)
    task = asyncio.create_task(worker.run())
    try:
        cards = CardService(client, store, config)
        card = Card.model_validate({
            "id": f"SEC-{uuid.uuid4().hex[:6]}", "tenant": "acme", "board": "github", "repo": "acme/payments-api",
            "title": f"Rotate keys {secret}", "body": f"The body names {secret}.",
            "history": [{"role": "user", "author": "maria", "content": f"history says {secret}"}],
            "context": [{"kind": "notes", "source": "ops", "content": f"context item {secret}"}],
        })
        ref = cards.import_card(card)
        await cards.move(ref, "planning", delivery_id="p1")
        state = await cards.wait_for(ref, lambda s: bool(s.history), timeout=60)
        assert state.history[0].outcome == "failed" and secret in state.history[0].reason
        await cards.say(ref, f"a comment with {secret}", author="priya", delivery_id="c1")
        await cards.wait_for(ref, lambda s: s.status != "running" and len(s.history) >= 1, timeout=60)
        for _ in range(200):
            if any(secret in m.content and m.author == "priya" for m in store.messages(ref.key)):
                break
            await asyncio.sleep(0.1)
        return client, await histories_of(client, ref)
    finally:
        await worker.shutdown()
        await asyncio.gather(task, return_exceptions=True)
        model.stop()
        store.close()


async def histories_of(client: Client, ref: CardRef) -> list[WorkflowHistory]:
    handle = client.get_workflow_handle(ref.workflow_id)
    state = await handle.query("state", result_type=CardState)
    histories = [await handle.fetch_history()]
    for run in state.history:
        histories.append(await client.get_workflow_handle(f"{ref.workflow_id}/{run.run}-{run.stage}").fetch_history())
    return histories


def raw_count(histories: list[WorkflowHistory], secret: str) -> int:
    """Occurrences in the stored bytes of every event, and in their JSON form (metadata, messages)."""
    needle = secret.encode()
    raw = sum(event.SerializeToString().count(needle) for h in histories for event in h.events)
    return raw + sum(h.to_json().count(secret) for h in histories)


async def test_encrypted_histories_never_hold_the_secret_and_decode_with_the_codec(
        tmp_path: Path, temporal_server: TemporalDevServer) -> None:
    secret = f"CANARY{uuid.uuid4().hex}"
    _, histories = await run_canary_card(tmp_path, temporal_server, secret, encrypt=True)
    assert raw_count(histories, secret) == 0
    payloads = [p for h in histories for e in h.events for p in user_payloads(e)]
    plain_ones = [p for p in payloads if p.metadata.get("encoding") != b"binary/encrypted"]
    assert payloads and not plain_ones, plain_ones[:3]
    decoded = await AesGcmCodec(RING).decode(payloads)
    plain = b"".join(p.SerializeToString() for p in decoded)
    for where in ("a comment with", "max_tokens: too large"):
        assert f"{where} {secret}".encode() in plain or f"{where} ({secret})".encode() in plain, where
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=encrypting_converter(RING))
    for history in histories:
        await replayer.replay_workflow(history)


async def test_with_encryption_explicitly_off_the_canary_finds_the_secret(
        tmp_path: Path, temporal_server: TemporalDevServer) -> None:
    secret = f"CANARY{uuid.uuid4().hex}"
    _, histories = await run_canary_card(tmp_path, temporal_server, secret, encrypt=False)
    assert raw_count(histories, secret) > 0
