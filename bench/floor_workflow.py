"""The engine's floors for bench/orchestration.py, with the SDK's defaults (sandboxed workflow,
pydantic converter).

- `BareWorkflow`: one workflow running one activity that sleeps the model's latency: the bare
  engine, the floor issue 10 names.
- `ShapeCardWorkflow` + `ShapeStageWorkflow`: the same Temporal work a one-turn card makes, with
  no work of ours in it: a card workflow started by a signal, its opening local activities and
  search attribute updates, a stage run as a child workflow beside a board activity, the stage's
  local activity and its one model-latency activity, and the updates after. Every activity and
  local activity is a no-op on a few bytes. Against this floor the bench tells the Temporal
  cost of the card's shape apart from the cost of what cardloop does inside it.

A module of its own because the workflow sandbox re-imports a workflow's module by name,
which a script run as __main__ cannot offer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names

STAGE = SearchAttributeKey.for_keyword(names.SA_CARD_STAGE)
STATUS = SearchAttributeKey.for_keyword(names.SA_CARD_STATUS)
OUTCOME = SearchAttributeKey.for_keyword(names.SA_STAGE_OUTCOME)
TIMEOUT = timedelta(seconds=60)


@activity.defn(name="bench.sleep")
async def bare_sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


@activity.defn(name="bench.noop")
async def noop(value: str) -> str:
    return value


@workflow.defn(name="BenchBare")
class BareWorkflow:
    @workflow.run
    async def run(self, seconds: float) -> str:
        return await workflow.execute_activity(bare_sleep, seconds, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="BenchShapeStage")
class ShapeStageWorkflow:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.execute_local_activity(noop, "assemble", start_to_close_timeout=TIMEOUT)
        reply = await workflow.execute_activity(bare_sleep, seconds, start_to_close_timeout=TIMEOUT)
        for value in ("completed", "done", "idle"):
            workflow.upsert_search_attributes([OUTCOME.value_set(value)])
        return reply


@workflow.defn(name="BenchShapeCard")
class ShapeCardWorkflow:
    """Started by signal-with-start, as a card is by a move; idle after its stage, as the bench's
    cards are (they do not auto-advance)."""

    def __init__(self) -> None:
        self.moves: list[str] = []

    @workflow.signal(name="transition")
    def transition(self, stage: str) -> None:
        self.moves.append(stage)

    @workflow.run
    async def run(self, seconds: float) -> None:
        await workflow.wait_condition(lambda: bool(self.moves))
        stage = self.moves.pop(0)
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        for step in ("load", "settings"):
            await workflow.execute_local_activity(noop, step, start_to_close_timeout=TIMEOUT)
        for value in ("running", "queued", stage):
            workflow.upsert_search_attributes([STATUS.value_set(value)])
        board = workflow.start_activity(noop, "started comment", start_to_close_timeout=TIMEOUT)
        child = await workflow.start_child_workflow(
            ShapeStageWorkflow.run, seconds, id=f"{workflow.info().workflow_id}/1-{stage}")
        await board
        await child
        workflow.upsert_search_attributes([STATUS.value_set("idle")])
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        await workflow.execute_local_activity(noop, "ended comment", start_to_close_timeout=TIMEOUT)
        await workflow.wait_condition(lambda: bool(self.moves))  # idle until the next move
