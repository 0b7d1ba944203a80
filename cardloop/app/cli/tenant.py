"""`cardloop tenant ...`: the tenant prompt and token operations of the API, for operators,
straight against the store (no API server needed)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cardloop.app.cli.argtypes import file_arg, shown
from cardloop.app.cli.files import read_text
from cardloop.contracts.errors import ConfigError, InputError, RejectedError
from cardloop.contracts.limits import usd
from cardloop.prompts.tenant_id import TENANT_RULE, is_tenant_id

if TYPE_CHECKING:  # the store (SQLAlchemy) and the prompt core load when a command runs
    from cardloop.contracts.config import Config
    from cardloop.prompts.card import TenantPrompt
    from cardloop.store import Store

ACTOR = "cli"
EFFECTIVE_HEADING = "--- effective system prompt (what the tenant's cards get) ---\n"

Command = Callable[[argparse.Namespace, "Config"], int]


def _card_tenant(func: Command) -> Command:
    """`func`, run only for a tenant id a card can carry: the store takes a wider set (any key
    part), so an id like "ACME" would be stored and only fail later, when the effective prompt
    builds a card for it. Refused before the store is opened, nothing stored."""

    def run(args: argparse.Namespace, config: Config) -> int:
        if not is_tenant_id(args.tenant):
            raise InputError(f"tenant {shown(args.tenant)}: {TENANT_RULE}")
        return func(args, config)

    return run


def _version_dict(v: Any) -> dict[str, Any]:
    return v.model_dump(mode="json")


def open_store(config: Config) -> Store:
    from cardloop.app.local import open_store as _open

    return _open(config)


def _effective(config: Config, tenant: str, prompt: TenantPrompt | None) -> str:
    """The system prompt the tenant's cards get, as the API answers it (`effective_prompt`)."""
    from cardloop.app.tenant_prompts import effective_prompt
    from cardloop.prompts.assemble import AssemblyError, PromptAssembler
    from cardloop.prompts.scrub import Scrubber

    assembler = PromptAssembler(config.template_store(), config.token_counter(), Scrubber())
    try:
        return effective_prompt(assembler, config, tenant, prompt)
    except AssemblyError as exc:
        raise ConfigError(f"configuration problem: {exc}") from None


def _print_version(v: Any, config: Config, as_json: bool, extra: dict[str, Any] | None = None,
                   effective: str | None = None) -> None:
    if effective is None and not v.deleted:
        effective = _effective(config, v.tenant, v.prompt)
    if as_json:
        print(json.dumps({**_version_dict(v), "effective_prompt": effective, **(extra or {})}, indent=2,
                         ensure_ascii=False))
        return
    print(f"tenant {v.tenant} · version {v.version} · {v.override_mode} · {v.validation_status} · "
          f"by {v.created_by} at {v.created_at:%Y-%m-%d %H:%M}"
          + (f" · restored from {v.restored_from}" if v.restored_from else ""))
    print("--- custom system prompt ---\n" + v.custom_system_prompt)
    if effective:
        print(EFFECTIVE_HEADING + effective)


def _print_no_prompt(tenant: str, config: Config, as_json: bool, limits: dict[str, Any]) -> None:
    """A tenant without a custom prompt (never set, or deleted) is a normal state: its cards get
    the default layers, which is what is shown."""
    effective = _effective(config, tenant, None)
    if as_json:
        print(json.dumps({"tenant": tenant, "version": None, "effective_prompt": effective, "limits": limits},
                         indent=2, ensure_ascii=False))
        return
    print(f"tenant {tenant} has no custom prompt: its cards get the default layers")
    print(EFFECTIVE_HEADING + effective)


def _tone(pairs: list[str]) -> dict[str, str]:
    tone = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--tone {pair!r}: use KEY=VALUE")
        if key.strip() in tone:  # the later one would silently replace the earlier
            raise InputError(f"--tone {key.strip()!r}: given twice; give each key once")
        tone[key.strip()] = value.strip()
    return tone


def cmd_set_prompt(args: argparse.Namespace, config: Config) -> int:
    from pydantic import ValidationError

    from cardloop.app.tenant_prompts import PromptIn, check_prompt

    text = read_text(args.file)
    try:
        body = PromptIn(custom_system_prompt=text, override_mode=args.mode, language_preference=args.language,
                        tone_profile=_tone(args.tone or []))
    except ValidationError as exc:
        # Named as the user gave each value: the file, --language, --tone (not the API's field names).
        given = {"custom_system_prompt": args.file, "language_preference": "--language", "tone_profile": "--tone",
                 "override_mode": "--mode"}
        raise InputError("; ".join(f"{given.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else args.file}: "
                                   f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())) from None
    prompt, verdict, issues = check_prompt(body)
    if issues and verdict.status.value == "REJECTED":
        if args.json:  # a --json reader gets the verdict as JSON too, not the text lines
            print(json.dumps({"tenant": args.tenant, "status": verdict.status.value, "stored": False,
                              "issues": [issue.model_dump(mode="json") for issue in issues]}, indent=2,
                             ensure_ascii=False))
        else:
            for issue in issues:
                print(f"  {issue.field}: {issue.category} [{issue.start}:{issue.end}] {issue.message}")
        raise RejectedError(f"tenant prompt for {args.tenant} rejected ({len(issues)} issue(s)); nothing was stored")
    # Before it is stored: a prompt the assembly cannot build (a template that does not load) was
    # stored first, then reported as an error, and stored again by the retry that followed.
    effective = _effective(config, args.tenant, prompt)
    with open_store(config) as store:
        version = store.for_tenant(args.tenant).put_tenant_prompt(args.tenant, prompt, verdict, ACTOR)
        _print_version(version, config, args.json, effective=effective)
    return 0


def cmd_delete_prompt(args: argparse.Namespace, config: Config) -> int:
    """DELETE /tenants/{tenant}/prompt from the command line: the tenant's cards get the default
    layers again; the versions stay (a version marked deleted records it, `tenant rollback` undoes it)."""
    with open_store(config) as store:
        if not store.for_tenant(args.tenant).delete_tenant_prompt(args.tenant, ACTOR):
            raise InputError(f"tenant {args.tenant} has no prompt to delete")
        versions = store.for_tenant(args.tenant).tenant_prompt_versions(args.tenant)
    print(f"tenant {args.tenant}'s prompt deleted (version {versions[-1].version} records it; "
          f"`cardloop tenant rollback {args.tenant} N` restores an earlier one)")
    return 0


def cmd_show(args: argparse.Namespace, config: Config) -> int:
    from datetime import UTC, datetime

    from cardloop.app.tenant_prompts import limits_report

    with open_store(config) as store:
        current = store.for_tenant(args.tenant).current_tenant_prompt(args.tenant)
        limits = limits_report(config, store, args.tenant, datetime.now(UTC))
    if current is not None:
        _print_version(current, config, args.json, extra={"limits": limits})
    else:
        _print_no_prompt(args.tenant, config, args.json, limits)
    if not args.json:
        _print_limits(limits)
    return 0


def _print_limits(report: dict[str, Any]) -> None:
    """Each limit beside what was used in its window (`[limits]`, `[tenants.<t>.limits]`)."""
    lim, per, used = report["limits"], report["per_token_limits"], report["usage"]

    rpm, tpd, cap = lim["requests_per_minute"], lim["tokens_per_day"], lim["cost_usd_per_month"]
    print(f"--- limits (tenant {report['tenant']}; the day resets {report['day_resets_at']}, "
          f"the month {report['month_resets_at']}) ---")
    print(f"  requests in the last minute  {used['requests_last_minute']} of "
          + ("no limit" if rpm is None else f"{rpm} per minute"))
    print(f"  tokens today (UTC)           {used['tokens_today']:,} of "
          + ("no limit" if tpd is None else f"{tpd:,} per day") + _reserved(used, "tokens"))
    print(f"  cost this month (UTC)        ${used['cost_usd_this_month']:.4f} of "
          + ("no limit" if cap is None else f"{usd(cap)} per month") + _reserved(used, "cost"))
    print(f"  refused today                {used['refused_today']}")
    if any(v is not None for v in per.values()):
        print("  each API token: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in per.items() if v is not None))
    for token_id, u in report["tokens"].items():
        print(f"  token {token_id}: {u['requests_last_minute']} requests in the last minute, "
              f"{u['tokens_today']:,} tokens today{_reserved(u, 'tokens')}, "
              f"${u['cost_usd_this_month']:.4f} this month{_reserved(u, 'cost')}, {u['refused_today']} refused today")


def _reserved(used: dict[str, Any], what: str) -> str:
    """The part of a total that running calls hold (their prompt and max output), not yet used."""
    if what == "tokens":
        held = used.get("reserved_tokens_today") or 0
        return f" (incl. {held:,} reserved by running calls)" if held else ""
    held_usd = used.get("reserved_cost_usd_this_month") or 0
    return f" (incl. ${held_usd:.4f} reserved by running calls)" if held_usd else ""


def cmd_versions(args: argparse.Namespace, config: Config) -> int:
    with open_store(config) as store:
        versions = store.for_tenant(args.tenant).tenant_prompt_versions(args.tenant)
    if args.json:
        print(json.dumps([_version_dict(v) for v in versions], indent=2, ensure_ascii=False))
        return 0
    if not versions:
        print(f"tenant {args.tenant} has no prompt versions")
    for v in versions:
        what = "deleted" if v.deleted else f"{v.override_mode}, {len(v.custom_system_prompt):,} chars"
        print(f"  v{v.version:<4} {v.created_at:%Y-%m-%d %H:%M}  {v.created_by:<14} {what}"
              + (f" (restored from v{v.restored_from})" if v.restored_from else ""))
    return 0


def cmd_rollback(args: argparse.Namespace, config: Config) -> int:
    from cardloop.store import NotFoundError, StoreError

    _effective(config, args.tenant, None)  # the templates load: known before the store changes (see set-prompt)
    with open_store(config) as store:
        try:
            version = store.for_tenant(args.tenant).rollback_tenant_prompt(args.tenant, args.version, ACTOR)
        except NotFoundError:
            raise InputError(f"tenant {args.tenant} has no version {args.version}") from None
        except StoreError as exc:
            raise InputError(str(exc)) from None
        _print_version(version, config, args.json)
    return 0


def cmd_token_create(args: argparse.Namespace, config: Config) -> int:
    with open_store(config) as store:
        issued = store.for_tenant(args.tenant).create_api_token(args.tenant, args.name)
    print(f"token {issued.id} for tenant {args.tenant} (shown once, store it now):\n{issued.token}")
    return 0


def cmd_token_revoke(args: argparse.Namespace, config: Config) -> int:
    with open_store(config) as store:
        if not store.for_tenant(args.tenant).revoke_api_token(args.tenant, args.token_id):
            raise InputError(f"tenant {args.tenant} has no token {args.token_id}")
    print(f"token {args.token_id} revoked")
    return 0


def add_tenant_commands(sub: argparse._SubParsersAction) -> None:
    tenant = sub.add_parser("tenant", help="tenant prompts and API tokens (straight against the store)")
    tsub = tenant.add_subparsers(dest="tenant_command", required=True, metavar="SUBCOMMAND")

    def common(p: argparse.ArgumentParser, func: Command, json_flag: bool = True) -> None:
        p.add_argument("tenant", help="tenant id: lower-case letters, digits, '_' and '-', as a card's tenant")
        if json_flag:
            p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=_card_tenant(func))

    p = tsub.add_parser("set-prompt", help="validate and store a new version of the tenant's prompt")
    common(p, cmd_set_prompt)
    p.add_argument("file", type=file_arg, help="text file with the custom system prompt")
    p.add_argument("--mode", choices=("append", "replace_behavior"), default="append",
                   help="append: added after the configured behaviour prompts (default); replace_behavior: "
                        "replaces them (the core guardrails always stay first)")
    p.add_argument("--language", default="auto",
                   help="language the agent answers in, e.g. German (default auto: no language instruction)")
    p.add_argument("--tone", action="append", metavar="KEY=VALUE", help="tone profile entry (repeatable)")
    p = tsub.add_parser("delete-prompt", help="remove the tenant's prompt (its versions stay; rollback restores one)")
    common(p, cmd_delete_prompt, json_flag=False)
    p = tsub.add_parser("show", help="the current prompt, the effective system prompt, the spend limits and usage")
    common(p, cmd_show)
    p = tsub.add_parser("versions", help="every version, oldest first")
    common(p, cmd_versions)
    p = tsub.add_parser("rollback", help="make a copy of VERSION the current version")
    common(p, cmd_rollback)
    p.add_argument("version", type=int, help="the version number to restore (see `tenant versions`)")
    p = tsub.add_parser("token-create", help="issue an API token for the tenant (shown once)")
    common(p, cmd_token_create, json_flag=False)
    p.add_argument("name", help="a label for the token (who or what uses it), shown in `tenant show`")
    p = tsub.add_parser("token-revoke", help="revoke one of the tenant's API tokens")
    common(p, cmd_token_revoke, json_flag=False)
    p.add_argument("token_id", help="the token's id (from token-create or `tenant show`), not the token")
