"""The tenant routes' app, as test_tenants.py and test_tenant_guard.py build it: the router alone
on a real store, with the operator's admin token set."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from cardloop.activities.deps import ActivityDeps
from cardloop.app.api.app import bad_request
from cardloop.app.api.services import Services
from cardloop.app.api.tenants import router
from cardloop.contracts.config import REPO_CONFIG, Config, load_config
from cardloop.store import Store

ADMIN = "admin-" + "s3cret-0123456789"


def build_app(tmp_path: Path, store: Store, *, admin: bool = True,
              env: dict[str, str] | None = None) -> tuple[FastAPI, Config, ActivityDeps]:
    env = {"CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path / "no-overrides"), **(env or {})}
    if admin:
        env["CARDLOOP_ADMIN_TOKEN"] = ADMIN
    config = load_config(REPO_CONFIG, env=env)
    runtime = ActivityDeps.build(config, store)
    app = FastAPI()
    app.state.services = Services(config=config, store=store, runtime=runtime, cards=None, http=httpx.AsyncClient())
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, bad_request)  # as create_app does
    return app, config, runtime


def close_app(app: FastAPI) -> None:
    svc: Services = app.state.services
    asyncio.run(svc.http.aclose())
    svc.store.close()
