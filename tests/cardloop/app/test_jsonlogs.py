"""The logs of `cardloop worker` and `cardloop api`: JSON lines off a terminal, text on one, and
never a secret of any family the redactor knows, in the message, its arguments, an exception's
traceback or an extra field."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from cardloop.app.jsonlogs import card_of, configure_logging
from cardloop.app.startup import load_config
from cardloop.contracts.config import REPO_CONFIG, Config
from tests.prompts.secret_corpus import leaked, samples

SAMPLES = samples(seed=23)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def config(log_format: str = "auto") -> Config:
    return load_config(REPO_CONFIG, env={"CARDLOOP_OBSERVABILITY__LOG_FORMAT": log_format,
                                         "CARDLOOP_PATHS__PROMPT_OVERRIDES": "/nonexistent"})


@pytest.fixture
def logged() -> Iterator[list[logging.Handler]]:
    installed: list[logging.Handler] = []
    level = logging.getLogger().level
    yield installed
    for handler in installed:
        logging.getLogger().removeHandler(handler)
    logging.getLogger().setLevel(level)


def leaks_of_each(out: io.StringIO, log: logging.Logger) -> list[tuple[str, str, str]]:
    """Logs each sample (as an argument and, once per family, as the message with an extra and
    inside an exception's traceback) and checks what that sample's lines say."""
    found, families = [], set()
    for s in SAMPLES:
        start = out.tell()
        log.warning("the call failed: %s", s.text)
        if s.family not in families:
            families.add(s.family)
            log.error(s.text, extra={"card_key": "acme/github/PAY-1", "stage": "coding"})
            try:
                raise RuntimeError(f"upstream answered 401 for {s.text}")
            except RuntimeError:
                log.exception("git push failed")
        written = out.getvalue()[start:]
        assert "[REDACTED:" in written, s.family
        if written.startswith("{"):  # and as the JSON's reader sees it (a PEM block's newlines are \n in JSON)
            written += "\n".join(str(v) for line in written.splitlines() for v in json.loads(line).values())
        found += [(s.family, s.syntax, run) for part in s.parts if (run := leaked(written, part))]
    return found


@pytest.mark.parametrize("fmt,stream", [("auto", io.StringIO), ("auto", Terminal)])
def test_no_secret_of_any_family_reaches_the_log(fmt: str, stream: type[io.StringIO],
                                                  logged: list[logging.Handler]) -> None:
    out = stream()
    logged.append(configure_logging(config(fmt), stream=out))
    assert leaks_of_each(out, logging.getLogger("cardloop.test.secrets")) == []


def test_off_a_terminal_each_line_is_a_json_object_with_the_card_and_stage(logged: list[logging.Handler]) -> None:
    out = io.StringIO()
    logged.append(configure_logging(config(), stream=out))
    logging.getLogger("cardloop.test").error("push refused\nsecond line", extra={"card_key": "acme/linear/ENG-7",
                                                                                  "stage": "coding"})
    lines = out.getvalue().splitlines()
    assert len(lines) == 1  # a newline in a message stays inside its JSON string
    record = json.loads(lines[0])
    assert record["message"] == "push refused\nsecond line" and record["level"] == "error"
    assert record["card_key"] == "acme/linear/ENG-7" and record["stage"] == "coding"
    assert record["logger"] == "cardloop.test" and record["ts"].endswith("+00:00")


def test_on_a_terminal_lines_are_text(logged: list[logging.Handler]) -> None:
    out = Terminal()
    logged.append(configure_logging(config(), stream=out))
    logging.getLogger("cardloop.test").warning("hello %s", "there")
    assert out.getvalue().rstrip().endswith("WARNING cardloop.test: hello there")


def test_card_and_stage_come_from_the_workflow_id() -> None:
    assert card_of("card/acme/github/owner:repo#12") == ("acme/github/owner:repo#12", "")
    assert card_of("card/acme/generic/a/b/3-error_fixing") == ("acme/generic/a/b", "error_fixing")
    assert card_of("card/acme/generic/a/3-notastage") == ("acme/generic/a/3-notastage", "")
    assert card_of("something-else") == ("", "")


def test_the_dev_stacks_log_file_and_console_lines_hold_no_secret(tmp_path, logged: list[logging.Handler],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import threading

    from cardloop.app import logs

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # log_to_data_dir sets both
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    console = io.StringIO()
    path = logs.log_to_data_dir(tmp_path, console=console)
    logged.extend(logs._HANDLERS)
    one_each = list({s.family: s for s in SAMPLES}.values())
    log = logging.getLogger("cardloop.test.devlog")
    leaks, redacted, in_file, on_console = [], 0, 0, 0
    for s in one_each:
        try:
            raise RuntimeError(f"push refused: {s.text}")
        except RuntimeError:
            log.warning("the call failed: %s", s.text, exc_info=True)
        for handler in logs._HANDLERS:
            handler.flush()
        file_text, console_text = path.read_text(), console.getvalue()
        new = file_text[in_file:] + "\n" + console_text[on_console:]  # this sample's lines only
        in_file, on_console = len(file_text), len(console_text)
        redacted += new.count("[REDACTED:")
        leaks += [(s.family, run) for part in s.parts if (run := leaked(new, part))]
    for handler in logs._HANDLERS:
        handler.close()
    assert redacted >= 2 * len(one_each)
    assert leaks == []


def test_the_dev_stacks_console_leaves_deliberate_activity_failures_and_cores_benign_races_to_the_file(
        tmp_path, logged: list[logging.Handler], monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: `cardloop dev` printed the SDK's "Completing activity as failed" for a
    failure cardloop raised on purpose (no API key: the card's run and the stage's line say why)
    and core's warnings about races it resolves itself. They stay in cardloop.log; any other
    warning, an activity's unexpected exception included, still reaches the terminal."""
    import sys
    import threading

    from temporalio.exceptions import ApplicationError

    from cardloop.app import logs

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    console = io.StringIO()
    path = logs.log_to_data_dir(tmp_path, console=console)
    logged.extend(logs._HANDLERS)
    activity_log = logging.getLogger("temporalio.activity")
    for err in (ApplicationError("ProviderRejected: profile 'claude': no API key", type="ProviderRejected"),
                KeyError("an unexpected bug")):
        try:
            raise err
        except Exception:
            activity_log.warning("Completing activity as failed", exc_info=True)
    core = logging.getLogger("temporalio.bridge.runtime")
    core.warning("[sdk_core::temporalio_sdk_core::worker::activities] Activity not found on completion. This may "
                 "happen if the activity has already been cancelled but completed anyway. {'task_token': 'x'}")
    core.warning("[sdk_core::temporalio_sdk_core::worker::workflow] Query not found when attempting to respond to it")
    core.warning("[sdk_core::temporalio_sdk_core::worker] Worker heartbeat failed: connection refused")
    for handler in logs._HANDLERS:
        handler.flush()
    shown, kept = console.getvalue(), path.read_text()
    assert "no API key" not in shown and "Activity not found" not in shown and "Query not found" not in shown
    assert "KeyError: 'an unexpected bug'" in shown and "Worker heartbeat failed" in shown
    assert all(text in kept for text in ("no API key", "Activity not found", "Query not found", "an unexpected bug"))
    for handler in logs._HANDLERS:
        handler.close()
