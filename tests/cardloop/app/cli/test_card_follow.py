"""`cardloop card move --wait/--follow`: the moved-to stage's run is followed until it ends and
the command's exit code is its outcome; run as a user runs it, against a real stack."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from tests.cardloop.app.cli.stack_cli import CLI, cardloop, cli_env
from tests.conftest import ROOT
from tests.stack import Stack, replay_all, small_card

pytestmark = pytest.mark.timeout(180)


@pytest.mark.stack_env(CARDLOOP_RETRY__OVERLOAD_DEADLINE="0",
                       CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_follow_streams_the_run_and_exits_with_its_outcome(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("FOLLOW-1"))
    stack.model.transcript["planning"] = ["Step 1: read the retry policy.\nStep 2: cap it.\n\n"
                                          "<promise>COMPLETE</promise>"]
    stack.model.transcript["coding"] = ["Which cap applies?\n<promise>BLOCKED</promise> 30s or 60s?"]
    out = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--follow")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"card {ref.key} -> planning"
    assert lines[2] == "following planning run 1 until it ends (Ctrl-C stops following, not the stage)"
    assert "    ◆ Step 1: read the retry policy." in lines
    assert lines[-1].startswith("  ✓ planning run 1: completed after 1 turn(s), ")
    # planning auto-advances to coding, which the scripted model leaves blocked: a move back
    # to coding while it is blocked runs it again, and --wait says only the outcome.
    await stack.wait_state(ref, lambda s: s.status == "blocked")
    blocked = await cardloop(env, "card", "move", ref.key, "--to", "coding", "--wait")
    assert blocked.returncode == 3, blocked.stdout + blocked.stderr
    assert blocked.stdout.splitlines()[-1].startswith("  ⏸ coding run 3: blocked after 1 turn(s)")
    assert "◆" not in blocked.stdout
    stack.model.inject(status=529)  # the next model call gives up at once
    failed = await cardloop(env, "card", "move", ref.key, "--to", "testing", "--wait")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "  ✗ testing run 4: failed after 1 turn(s)" in failed.stdout
    assert "gave up: the model is overloaded" in failed.stdout and "Traceback" not in failed.stderr
    shown = await cardloop(env, "card", "show", ref.key)  # as Temporal's CardStatus says: failed, not idle
    assert "  stage testing · failed · stage runs 4" in shown.stdout, shown.stdout
    stack.model.inject(delay=8.0)
    slow = await cardloop(env, "card", "move", ref.key, "--to", "testing", "--follow", "--timeout", "1")
    assert slow.returncode == 124
    assert f"stopped waiting after 1 s: testing run 5 of card {ref.key} goes on" in slow.stderr
    state = await stack.wait_state(ref, lambda s: len(s.history) == 5 and s.status != "running")
    assert state.history[-1].outcome == "completed"
    done = await cardloop(env, "card", "move", ref.key, "--to", "done", "--wait")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == f"  ✓ card {ref.key} is done"
    await stack.wait_state(ref, lambda s: s.status == "done")
    # The card's run has closed: a move opens the next one, which goes on from run 5.
    reopened = await cardloop(env, "card", "move", ref.key, "--to", "testing", "--wait")
    assert reopened.returncode == 0, reopened.stdout + reopened.stderr
    assert reopened.stdout.splitlines()[-1].startswith("  ✓ testing run 6: completed")
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


async def test_bad_follow_options_are_usage_errors(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    for args, said in ((("--timeout", "5"), "--timeout limits --wait or --follow"),
                       (("--wait", "--timeout", "-3"), "-3 is not a positive number of seconds"),
                       (("--follow", "--timeout", "soon"), "'soon' is not a number of seconds")):
        out = await cardloop(env, "card", "move", "acme/github/NOPE-1", "--to", "planning", *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert said in out.stderr and "Traceback" not in out.stderr


@pytest.mark.stack_env(CARDLOOP_RETRY__UNREACHABLE_INITIAL="1s", CARDLOOP_RETRY__UNREACHABLE_MAX_INTERVAL="2s",
                       CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_follow_says_when_a_model_call_waits_for_its_next_attempt(stack: Stack, tmp_path: Path) -> None:
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("FOLLOW-2"))
    stack.model.stop()  # connection refused until it starts again on the same port
    follower = await _Follower.start(env, "card", "move", ref.key, "--to", "testing", "--follow")
    # The model comes back only once the follower has said that the call waits: a fixed pause
    # raced the follower's start (a second or more on a loaded machine).
    await follower.until("⟳ retrying")
    stack.model.start()
    out = await follower.finish()
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"  ⟳ retrying: cannot reach the model \(attempt \d of 8", out.stdout), out.stdout
    assert out.stdout.splitlines()[-1].startswith("  ✓ testing run 1: completed")


@pytest.mark.stack_env(CARDLOOP_CONTEXT__SOURCES__TESTING='["github_tests"]', CARDLOOP_GITHUB_TOKEN="",
                       CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_follow_says_which_context_source_the_run_goes_without(stack: Stack, tmp_path: Path) -> None:
    """No GitHub credentials: the run goes on without the test reports, and --follow says so once,
    before the outcome (the run records it, so a run ending between two polls says it too)."""
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("FOLLOW-3"))
    out = await cardloop(env, "card", "move", ref.key, "--to", "testing", "--follow")
    assert out.returncode == 0, out.stdout + out.stderr
    said = [line for line in out.stdout.splitlines() if line.startswith("  ⚠ ")]
    assert len(said) == 1 and said[0].startswith("  ⚠ going on without github_tests: no GitHub credentials"), out.stdout
    assert out.stdout.splitlines()[-1].startswith("  ✓ testing run 1: completed")
    state = await stack.cards.state(ref)
    assert state is not None and state.history[-1].unavailable == (said[0].removeprefix("  ⚠ going on without "),)
    shown = await cardloop(env, "card", "show", ref.key)
    assert "      1 testing       completed        1 turn(s)  the agent signalled COMPLETE (without github_tests)" \
        in shown.stdout.splitlines(), shown.stdout
    waited = await cardloop(env, "card", "move", ref.key, "--to", "testing", "--wait")
    assert waited.returncode == 0 and "⚠" not in waited.stdout  # --wait says the outcome only
    await replay_all(stack.client, stack.client.get_workflow_handle(ref.workflow_id))


@pytest.mark.stack_env(CARDLOOP_STAGES__PLANNING__AUTO_ADVANCE="false")
async def test_a_delivery_id_given_again_says_so_instead_of_waiting_for_a_run(stack: Stack, tmp_path: Path) -> None:
    # The card applies a delivery id once: a --wait on the repeated move used to wait for a run
    # that never comes.
    env = cli_env(stack, tmp_path)
    ref = stack.cards.import_card(small_card("FOLLOW-DUP"))
    first = await cardloop(env, "card", "move", ref.key, "--to", "planning", "--delivery-id", "dd1", "--wait")
    assert first.returncode == 0, first.stdout + first.stderr
    again = await cardloop(env, "card", "move", ref.key, "--to", "coding", "--delivery-id", "dd1", "--follow",
                           "--timeout", "30")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "delivery 'dd1' was applied already" in again.stdout and "following" not in again.stdout
    said = await cardloop(env, "card", "say", ref.key, "hello", "--delivery-id", "c1")
    said_again = await cardloop(env, "card", "say", ref.key, "hello", "--delivery-id", "c1")
    assert said.returncode == said_again.returncode == 0, said.stderr + said_again.stderr
    assert "comment sent" in said.stdout and "was applied already" in said_again.stdout
    state = await stack.wait_state(ref, lambda s: s.has_seen("c1"))
    assert state.stage == "planning" and len(state.history) == 1
    assert [m.content for m in stack.store.messages(ref.key)].count("hello") == 1


class _Follower:
    """`cardloop card move --follow` as a process whose lines the test reads as they come (the
    command flushes each), so the test acts when the follower has said something, not after a
    pause that a slow start outlasts."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.said = b""

    @classmethod
    async def start(cls, env: dict[str, str], *args: str) -> _Follower:
        return cls(await asyncio.create_subprocess_exec(str(CLI), *args, cwd=ROOT, env=env,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE))

    async def until(self, text: str, timeout: float = 90) -> None:
        assert self.proc.stdout is not None
        while text.encode() not in self.said:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            assert line, f"the follower ended before saying {text!r}: {self.said.decode()}"
            self.said += line

    async def finish(self, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        rest, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        return subprocess.CompletedProcess([str(CLI)], self.proc.returncode or 0, (self.said + rest).decode(),
                                           err.decode())


class _Proxy:
    """A loopback TCP proxy to the stack's Temporal that can be cut: the follower's server going
    away mid-run, while the stack (and its stage) goes on behind it."""

    def __init__(self, target: str) -> None:
        self.host, port = target.rsplit(":", 1)
        self.port = int(port)
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        self.server.close()
        for w in self.writers:
            w.transport.abort()


@pytest.mark.stack_env(CARDLOOP_STAGES__TESTING__AUTO_ADVANCE="false")
async def test_follow_when_temporal_stops_answering_is_one_line_and_exit_2(stack: Stack, tmp_path: Path) -> None:
    # Exit 1 means "the stage failed": a follower that lost its server must not say that.
    proxy = _Proxy(stack.config.temporal.address)
    env = {**cli_env(stack, tmp_path), "CARDLOOP_TEMPORAL__ADDRESS": await proxy.start()}
    ref = stack.cards.import_card(small_card("FOLLOW-GONE"))
    stack.model.inject(delay=20.0)  # the stage's one turn is still waiting for the model when the cut comes
    follower = await _Follower.start(env, "card", "move", ref.key, "--to", "testing", "--follow")
    # Cut only once the follower says it follows: a fixed pause once cut a loaded machine's
    # follower during its describe, which is another error ("did not answer describe").
    await follower.until("following testing run")
    await asyncio.sleep(1.0)  # into its polling
    await proxy.cut()
    out = await follower.finish()
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    # Cut mid-poll: the server "stopped answering"; cut while a describe waits (a loaded machine):
    # it "did not answer describe within 3 s". Either is one line and exit 2, never "failed".
    assert len(lines) == 1, out.stderr
    assert ("stopped answering" in lines[0] and "the stage goes on" in lines[0]) or (
        "did not answer describe" in lines[0]), out.stderr
    assert "\x1b[" not in out.stderr and "Traceback" not in out.stderr  # no raw core log lines
    # The stage went on where Temporal runs, as the line says.
    state = await stack.wait_state(ref, lambda s: bool(s.history), timeout=90)
    assert state.history[-1].stage == "testing" and state.history[-1].outcome == "completed"



async def test_a_followed_run_never_shows_the_next_stages_lines(stack: Stack) -> None:
    """Planning auto-advances to coding; polled slowly, the follower finds coding's reply already
    stored when it sees planning's end. It showed that reply under planning, before planning's
    outcome line; it now stops at the first message of a later run."""
    from cardloop.app.follow import follow

    ref = stack.cards.import_card(small_card("FOLLOW-NEXT"))
    stack.model.transcript["planning"] = ["Plan: cap the delay.\n\n<promise>COMPLETE</promise>"]
    stack.model.transcript["coding"] = ["CODING SAYS: which cap?\n<promise>BLOCKED</promise> 30s or 60s?"]
    await stack.cards.move(ref, "planning", delivery_id="f-1")
    await stack.wait_state(ref, lambda s: s.status == "blocked" and s.stage == "coding")  # coding has written
    lines: list[str] = []
    ended = await follow(stack.cards, ref, "planning", 1, out=lines.append, verbose=True, timeout=30,
                         messages_from=0)
    assert ended.outcome == "completed"
    assert any("Plan: cap the delay." in line for line in lines)
    assert not any("CODING SAYS" in line for line in lines), lines
    assert lines[-1].startswith("  ✓ planning run 1: completed")
