"""The generic board: an outgoing webhook to the configured URL, signed like the incoming one
(`X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`), one JSON event per write:

    {"event": "comment" | "move" | "label" | "unlabel", "delivery_id", "card_id", "tenant", "marker",
     "text" | "to_column" | "label", "actor": "cardloop", "timestamp"}

There is nothing to read back, so the delivery id (also in `X-Cardloop-Delivery`) is derived
from the marker and what is written: every retry of one write carries the same id, and a
receiver that keeps the ids it has seen applies it once. The activity records what was sent
(activities/once.py), so a retry after a recorded delivery sends nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from cardloop.contracts.secrets import Secret, reveal
from cardloop.integrations.board_clients.base import BoardCard, Http, Written, check_marker, plain_marker, with_line

MAX_TEXT = 65_536


class GenericBoard:
    board = "generic"

    def __init__(self, url: str, secret: Secret | str, *, tenant: str = "default", actor: str = "cardloop",
                 timeout: float = 30.0) -> None:
        self.url = url
        self._secret = reveal(secret) or ""
        self.tenant = tenant
        self.actor = actor or "cardloop"
        self.http = Http("the generic board's webhook", url, {}, secret=self._secret, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _send(self, card: BoardCard, event: str, marker: str, **fields: Any) -> Written:
        delivery = "cardloop-" + hashlib.sha256(f"{marker}\n{event}\n{json.dumps(fields, sort_keys=True)}".encode()
                                                ).hexdigest()[:32]
        body = json.dumps({"event": event, "delivery_id": delivery, "card_id": card.card_id, "tenant": self.tenant,
                           "marker": check_marker(marker), **fields, "actor": self.actor,
                           "timestamp": int(time.time())}, ensure_ascii=False).encode()
        sig = hmac.new(self._secret.encode(), body, hashlib.sha256).hexdigest()
        self.http.call("POST", "", f"sending {event} of {card.card_id}", content=body, headers={
            "Content-Type": "application/json", "X-Hub-Signature-256": f"sha256={sig}",
            "X-Cardloop-Delivery": delivery, "X-Cardloop-Event": event})
        return Written(done=f"sent {event} of {card.card_id} (delivery {delivery})", target=delivery)

    def comment(self, card: BoardCard, *, body: str, marker: str) -> Written:
        return self._send(card, "comment", marker, text=with_line(body, plain_marker(marker), MAX_TEXT))

    def move(self, card: BoardCard, column: str, *, key: str = "") -> Written:
        return self._send(card, "move", key or f"{card.card_id}/move", to_column=column)

    def label(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        return self._send(card, "label", key or f"{card.card_id}/label", label=label)

    def unlabel(self, card: BoardCard, label: str, *, key: str = "") -> Written:
        return self._send(card, "unlabel", key or f"{card.card_id}/unlabel", label=label)
