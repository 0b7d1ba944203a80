"""What bench/chaos.py checks once the faults stop: the store against Temporal's histories.

- duplicated side effects: assistant messages beyond the turns the stage runs made, ledger rows
  that repeat (card, call key, attempt) or keep two results for one call key, stage runs beyond
  one per stage of a finished card;
- replies acted on that differ from the stored ones: each StageWorkflow's completed
  llm.complete results (as the history holds them) against the store's message at message_seq;
- model calls in the ledger (to compare with the calls the model server counted);
- histories that fail replay on today's workflow code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import func, select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from cardloop.app.worker import WORKFLOWS
from cardloop.contracts import names
from cardloop.contracts.payloads import CardRef, CardState, CompleteResult
from cardloop.store import Store
from cardloop.store import schema as s


@dataclass
class Audit:
    duplicated_messages: int = 0
    duplicated_usage_rows: int = 0
    duplicated_stage_runs: int = 0
    replies_compared: int = 0
    replies_differing: int = 0
    ledger_calls: int = 0
    # Rows whose attempt never settled: the worker died between opening the row (before the
    # request leaves) and recording the answer. Such an attempt may or may not have reached the model.
    ledger_unsettled: int = 0
    histories: int = 0
    histories_failing_replay: int = 0
    notes: list[str] = field(default_factory=list)


def acted_on_stored(result: CompleteResult, stored: str) -> bool:
    """The result's excerpt is the stored text, or its head when the excerpt was cut."""
    if result.excerpt == stored:
        return True
    return result.excerpt.endswith(" […]") and stored.startswith(result.excerpt[: -len(" […]")])


def completed_replies(history: WorkflowHistory) -> list[CompleteResult]:
    """The results of the llm.complete activities a StageWorkflow's history completed."""
    scheduled: dict[int, str] = {}
    results = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            if scheduled.get(attrs.scheduled_event_id) == names.COMPLETE:
                results.append(CompleteResult.model_validate_json(attrs.result.payloads[0].data))
    return results


async def audit(client: Client, store: Store, refs: list[CardRef], states: dict[str, CardState | None]) -> Audit:
    out = Audit()
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    for ref in refs:
        state = states.get(ref.key)
        histories = [await client.get_workflow_handle(ref.workflow_id).fetch_history()]
        turns = 0
        if state is not None:
            seen_runs = [r.run for r in state.history]
            out.duplicated_stage_runs += len(seen_runs) - len(set(seen_runs))
            if state.status == "done":
                per_stage = [r.stage for r in state.history if r.outcome == "completed"]
                out.duplicated_stage_runs += len(per_stage) - len(set(per_stage))
            for run in state.history:
                turns += run.iterations
                child = await client.get_workflow_handle(f"{ref.workflow_id}/{run.run}-{run.stage}").fetch_history()
                histories.append(child)
                for result in completed_replies(child):
                    out.replies_compared += 1
                    stored = store.messages(ref.key, result.message_seq, result.message_seq + 1)
                    if not stored or not acted_on_stored(result, stored[0].content):
                        out.replies_differing += 1
                        head = stored[0].content[:40] if stored else "nothing"
                        out.notes.append(f"{child.workflow_id}: acted on {result.excerpt[:40]!r}, store holds {head!r}")
        replies = [m for m in store.messages(ref.key) if m.role == "assistant"]
        out.duplicated_messages += max(0, len(replies) - turns)
        for history in histories:
            out.histories += 1
            try:
                await replayer.replay_workflow(history)
            except Exception as err:
                out.histories_failing_replay += 1
                out.notes.append(f"{history.workflow_id}: replay failed: {str(err)[:200]}")
    u = s.llm_usage.c
    with store.engine.connect() as conn:
        out.ledger_calls = conn.execute(select(func.count()).select_from(s.llm_usage)).scalar_one()
        out.ledger_unsettled = conn.execute(
            select(func.count()).select_from(s.llm_usage).where(u.status == "calling")).scalar_one()
        repeated = select(u.card_key, u.call_key, u.attempt).group_by(u.card_key, u.call_key, u.attempt)
        out.duplicated_usage_rows += conn.execute(
            select(func.count()).select_from(repeated.having(func.count() > 1).subquery())).scalar_one()
        kept_twice = (select(u.card_key, u.call_key).where(u.kept.is_(True), u.status == "done")
                      .group_by(u.card_key, u.call_key).having(func.count() > 1))
        out.duplicated_usage_rows += conn.execute(
            select(func.count()).select_from(kept_twice.subquery())).scalar_one()
    return out


def as_json(audit_: Audit) -> str:
    return json.dumps(audit_.__dict__, indent=1)
