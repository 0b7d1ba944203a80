"""card.load_state and card.save_state: the card's state kept in the store between runs."""

from __future__ import annotations

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import card_not_found
from cardloop.contracts import names
from cardloop.contracts.payloads import CardState, SavedState, SaveStateInput


class CardStateActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    @activity.defn(name=names.LOAD_STATE)
    def load(self, card_key: str) -> SavedState:
        saved = self.rt.store.workflow_state(card_key)
        return SavedState(state=CardState.model_validate_json(saved) if saved else None)

    @activity.defn(name=names.SAVE_STATE)
    def save(self, inp: SaveStateInput) -> None:
        if not self.rt.store.save_workflow_state(inp.card_key, inp.state.model_dump_json()):
            raise card_not_found(inp.card_key)
