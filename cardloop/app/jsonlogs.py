"""The logs of `cardloop worker` and `cardloop api`: JSON lines for the platform to collect,
never a secret.

`[observability] log_format`: "json" (one object per line), "text", or "auto" (the default:
JSON when stderr is not a terminal, as under Kubernetes or systemd; text on a terminal). Each
JSON line has `ts` (UTC, ISO 8601), `level`, `logger`, `message`, and, when the record comes
from a workflow or an activity, `workflow_id`, `run_id`, `workflow_type`, `task_queue`,
`attempt`, `activity_type` and `activity_id` (from the Temporal SDK's logger extras), and the
card's `card_key` and `stage` (read from the workflow id: `card/<tenant>/<board>/<card>` and its
stage runs' `.../<run>-<stage>`; a log call may also pass them with `extra=`); `exception` holds
the traceback.

Every line, text or JSON, passes the secret redactor (prompts/redact.py, the rules that keep
secrets out of prompts) as a whole: the message with its arguments, the traceback and the
extras, so a token inside an error from a provider, a git remote URL or a board's answer is
`[REDACTED:<rule>]` in the log."""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from cardloop.prompts.scrub import redact_text
from cardloop.prompts.stages import STAGE_NAMES

if TYPE_CHECKING:  # the dev stack's file log (app/logs.py) uses the formatters without loading config
    from cardloop.contracts.config import Config

# The Temporal SDK appends its context to the message too: "... ({'activity_id': ...})".
_SDK_CONTEXT = re.compile(r"\s*\(\{'(?:activity_id|attempt)'.*\}\)\s*\Z", re.DOTALL)
_STAGE_RUN = re.compile(r"^(?P<card>.+)/(?P<run>\d+)-(?P<stage>[a-z_]+)\Z")
_HANDLERS: list[logging.Handler] = []
_FIELDS = ("workflow_id", "run_id", "workflow_type", "task_queue", "attempt", "activity_type", "activity_id")


def card_of(workflow_id: str) -> tuple[str, str]:
    """(card key, stage) of a card's or a stage run's workflow id; ("", "") for another one."""
    if not workflow_id.startswith("card/"):
        return "", ""
    rest = workflow_id.removeprefix("card/")
    found = _STAGE_RUN.match(rest)
    if found and found["stage"] in STAGE_NAMES:
        return found["card"], found["stage"]
    return rest, ""


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name,
            "message": _SDK_CONTEXT.sub("", record.getMessage()),
        }
        temporal = {**getattr(record, "temporal_workflow", {}), **getattr(record, "temporal_activity", {})}
        if "workflow_run_id" in temporal:
            temporal["run_id"] = temporal.pop("workflow_run_id")
        out.update({k: temporal[k] for k in _FIELDS if temporal.get(k) not in (None, "")})
        card, stage = card_of(str(temporal.get("workflow_id", "")))
        for key, value in (("card_key", getattr(record, "card_key", "") or card),
                           ("stage", getattr(record, "stage", "") or stage)):
            if value:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        # Each value on its own, before JSON escapes a PEM block's newlines out of the redactor's sight.
        clean = {k: redact_text(v) if isinstance(v, str) else v for k, v in out.items()}
        return json.dumps(clean, ensure_ascii=False, default=str)


class RedactedText(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def log_format(config: Config, stream: TextIO) -> str:
    wanted = config.observability.log_format
    if wanted != "auto":
        return wanted
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def configure_logging(config: Config, stream: TextIO | None = None) -> logging.Handler:
    """The root logger writes to `stream` (stderr) as [observability] says; returns the handler.
    Called again, it replaces the handler it installed before."""
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    if log_format(config, stream) == "json":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(RedactedText("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    top = logging.getLogger()
    for old in _HANDLERS:
        top.removeHandler(old)
    _HANDLERS[:] = [handler]
    top.addHandler(handler)
    top.setLevel(config.observability.log_level)
    return handler


__all__ = ["JsonLines", "RedactedText", "card_of", "configure_logging", "log_format"]
