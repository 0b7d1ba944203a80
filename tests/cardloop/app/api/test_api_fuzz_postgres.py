"""The API fuzz (test_api_fuzz.py) on a PostgreSQL store: the same seeded requests, whose answers
depend on the store where it refuses what SQLite takes (NUL characters, integers past 64 bits,
invalid text in JSON columns), enforces tenants by row-level security, and settles concurrent
deliveries of one event by its own locking rather than SQLite's single writer. The field sweep
runs here too; the deeper local pass (CARDLOOP_FUZZ_EXAMPLES) applies to both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from tests.cardloop.app.api.test_api_fuzz import (  # noqa: F401  (collected here, on PostgreSQL)
    api,
    test_a_delivery_sent_many_times_at_once_is_applied_once,
    test_card_routes_refuse_odd_paths_and_queries,
    test_every_field_of_every_request_as_every_json_type,
    test_gateway_routes_answer_bad_input_in_the_callers_error_shape,
    test_ops_docs_and_unknown_paths_never_5xx,
    test_tenant_routes_refuse_bad_input_and_store_nothing,
    test_webhooks_refuse_bad_deliveries_in_their_shape_and_never_apply_twice,
)
from tests.postgres import fresh_schema

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


@pytest.fixture
def stack_db_url(postgres_admin: Engine) -> Iterator[str]:
    with fresh_schema(postgres_admin, "fuzz") as url:
        yield url
