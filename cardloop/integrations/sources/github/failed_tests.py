"""Failed tests: JUnit XML from the latest run's artifacts, else failure annotations of the
head's check runs (test_result items)."""

from __future__ import annotations

import io
import itertools
import re
import xml.etree.ElementTree as ET
import zipfile
import zlib
from datetime import datetime

from github.CheckRun import CheckRun
from github.PaginatedList import PaginatedList
from github.WorkflowRun import WorkflowRun

from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.integrations.sources.github.client import GitHubClient, Target
from cardloop.integrations.sources.github.common import (
    FAILED_CONCLUSIONS,
    MAX_SOURCE,
    GitHubSource,
    clip,
)
from cardloop.integrations.sources.junit import FailedTest, JUnitReport, parse_junit
from cardloop.integrations.sources.junit_read import MAX_BYTES
from cardloop.prompts.card import ContextItem, ContextKind
from cardloop.prompts.log_errors import error_spans
from cardloop.prompts.logs import Counter, excerpt_log

# Stack frames of the runner, the test framework and the platform: what a failure's first lines
# are mostly made of (jest-circus, node internals, JUnit and reflection), never the bug.
_LIBRARY_FRAME = re.compile(r"^\s+at .*(?:node_modules[/\\]|\(node:|\(<anonymous>\)|java\.base/|\borg\.junit\.|"
                            r"\bjdk\.internal\.|\bsun\.reflect\.|\borg\.apache\.maven\.surefire\.)")


def _fold_frames(lines: list[str]) -> list[str]:
    out: list[str] = []
    run = 0
    for line in [*lines, ""]:
        if _LIBRARY_FRAME.match(line):
            run += 1
            continue
        if run:
            out.append(f"    [... {run} library frame(s) ...]")
            run = 0
        out.append(line)
    return out[:-1]


def _failure_block(n: int, test: FailedTest, first_lines: int, *, fold: bool = True) -> str:
    # Written more than once: reruns that all failed, or pytest's failure and teardown error.
    again = f", reported {test.attempts} times" if test.attempts > 1 else ""
    out = [f"{n}. {test.id} [{test.kind}{again}]"]
    where = test.file + (f":{test.line}" if test.line and test.file else "")
    if where:
        # pytest's xunit1 `line` is where the test is defined; the crash line is where it failed.
        failed = f"; failed at {test.failed_at}" if test.failed_at and test.failed_at != where else ""
        out.append(f"   at {where}{failed}")
    if test.message:
        out.append(f"   message: {clip(' '.join(test.message.split()), 500)}")
    lines = test.text.split("\n") if test.text else []
    if fold:  # the stored report keeps every frame
        lines = _fold_frames(lines)
    shown = lines[:first_lines]
    out += [f"   | {clip(line, 300)}" for line in shown]
    # pytest puts the statement first and the "E ..." lines further down: keep those too.
    later = _later_lines(lines, first_lines)
    pos = first_lines
    for k in later:
        if k > pos:
            out.append(f"   | [... {k - pos} lines cut ...]")
        elif k == first_lines:
            out.append("   |")
        out.append(f"   | {clip(lines[k], 300)}")
        pos = k + 1
    if len(lines) > max(pos, first_lines):
        out.append(f"   | [... {len(lines) - max(pos, first_lines)} more lines ...]")
    return "\n".join(out)


_LATER_LINES = 6  # error lines shown after the first lines of a failure's text


def _later_lines(lines: list[str], first_lines: int) -> list[int]:
    """The error lines worth showing after the first `first_lines`, in order.

    A few are all shown. Of many (pytest's `-vv` diff of two dicts is hundreds of E lines) the
    head says what was compared, and the lines the detector marks in a long block say what
    differs and where (`Differing items:`, the first changed lines, the crash line): those,
    not the last lines of the diff, which say the least."""
    spans = [s for s in error_spans(lines) if s.end >= first_lines]
    keys = [k for s in spans for k in s.keys if k >= first_lines]
    if len(keys) <= _LATER_LINES:
        return keys
    explain = [e for s in spans for e in s.explain if e >= first_lines and e < len(lines)]
    return sorted({*keys[:3], *explain[:10], keys[-1]})


class GitHubTestResultsSource(GitHubSource):
    """Failed tests of the card's PR head or branch, as test_result items.

    The newest completed run fixes the commit; JUnit XML files (*.xml whose root is testsuites
    or testsuite) in the artifacts of that commit's completed runs (at most `max_runs`) give one
    item per artifact with failures. Without JUnit, failure annotations of the commit's check
    runs give one item per check run. `excerpt_tokens` bounds each item; `first_lines` is how
    much of each failure text is shown; the full report of each artifact goes to blobs. Of one
    artifact at most `max_xml_bytes` of XML (inflated) are read: a 25 MB zip of reports can hold
    gigabytes, and each 64 MB of it is about a second of parsing.
    """

    name = "github_tests"

    def __init__(self, client: GitHubClient, *, max_runs: int = 3, excerpt_tokens: int = 4000,
                 count: Counter | None = None, first_lines: int = 12,
                 max_artifact_bytes: int = 25 * 1024 * 1024, max_artifacts: int = 10,
                 max_xml_bytes: int = 128 * 1024 * 1024) -> None:
        super().__init__(client, count=count)
        self.max_runs = max_runs
        self.excerpt_tokens = excerpt_tokens
        self.first_lines = first_lines
        self.max_artifact_bytes = max_artifact_bytes
        self.max_artifacts = max_artifacts
        self.max_xml_bytes = max_xml_bytes

    def _gather(self, request: SourceRequest) -> SourceResult:
        target = self.client.resolve(request.card)
        if isinstance(target, str):
            return SourceResult(self.name, notes=(target,))
        notes = list(target.notes)
        runs, sha = self._latest_runs(target)
        if sha is None:
            notes.append(f"no completed workflow runs for {target.describe()}")
            return SourceResult(self.name, notes=tuple(notes))
        items: list[ContextItem] = []
        blobs: dict[str, str] = {}
        found_junit = False
        downloaded = 0
        for run in runs:
            with self.client.calling(f"listing artifacts of workflow run {run.id} in {target.name}"):
                artifacts = list(run.get_artifacts())
            for artifact in artifacts:
                if artifact.expired:
                    notes.append(f"artifact {artifact.name} has expired")
                    continue
                if artifact.size_in_bytes > self.max_artifact_bytes:
                    notes.append(f"artifact {artifact.name} ({artifact.size_in_bytes:,} bytes) is too large to read")
                    continue
                if downloaded >= self.max_artifacts:
                    notes.append(f"more than {self.max_artifacts} artifacts: the rest not read")
                    break
                downloaded += 1
                report = self._read_artifact(artifact.archive_download_url, artifact.name, target, notes)
                if report is None:
                    continue
                found_junit = True
                flaky = f" ({report.flaky} passed on a rerun)" if report.flaky else ""
                notes.append(f"artifact {artifact.name}: {report.failed_count} failed of {report.total} "
                             f"in {len(report.files)} JUnit file(s){flaky}")
                notes += [f"artifact {artifact.name}: {note}" for note in report.notes]
                if report.failed:
                    where = f"artifact {artifact.name} of run {run.html_url} (commit {sha[:12]})"
                    # The artifact's page in the UI; the API's archive URL would only download it.
                    source = clip(f"{run.html_url}/artifacts/{artifact.id}", MAX_SOURCE)
                    item, full = self._report_item(report, where, source, artifact.created_at)
                    items.append(item)
                    blobs[f"github_tests/{artifact.id}.txt"] = full
        if not found_junit:
            items += self._annotation_items(target, sha, notes)
        return SourceResult(self.name, items=tuple(items), blobs=blobs, notes=tuple(notes))

    def _latest_runs(self, target: Target) -> tuple[list[WorkflowRun], str | None]:
        with self.client.calling(f"listing workflow runs of {target.describe()}"):
            if target.pr is not None:
                listing = target.repo.get_workflow_runs(head_sha=target.pr.head.sha)
            else:
                listing = target.repo.get_workflow_runs(branch=target.branch)
            sha: str | None = None
            runs: list[WorkflowRun] = []
            for run in itertools.islice(listing, 100):
                if len(runs) >= self.max_runs:
                    break
                if run.status != "completed":
                    continue  # still running: no artifacts yet
                if sha is None:
                    sha = run.head_sha
                if run.head_sha == sha:
                    runs.append(run)
        return runs, sha

    def _read_artifact(self, url: str, name: str, target: Target, notes: list[str]) -> JUnitReport | None:
        data, total = self.client.download(url, f"downloading artifact {name} of {target.name}",
                                           max_bytes=self.max_artifact_bytes, keep="none")
        if not data:
            notes.append(f"artifact {name} ({total:,} bytes) is too large to read")
            return None
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            notes.append(f"artifact {name} is not a zip archive")
            return None
        report = JUnitReport()
        budget = self.max_xml_bytes
        with archive:
            xml_files = [i for i in archive.infolist() if not i.is_dir() and i.filename.lower().endswith(".xml")]
            for n, info in enumerate(xml_files):
                if budget <= 0:
                    notes.append(f"artifact {name}: {len(xml_files) - n} more XML file(s) not read "
                                 f"(the {self.max_xml_bytes:,}-byte read budget is spent)")
                    break
                cap = min(MAX_BYTES, budget)
                budget -= min(info.file_size, cap)
                try:
                    # Streamed out of the zip: a zip bomb or a huge report is read only up to
                    # the cap, never inflated whole into memory.
                    if parse_junit(lambda info=info: archive.open(info), report, name=info.filename, max_bytes=cap):
                        report.files.append(info.filename)
                except (ET.ParseError, zipfile.BadZipFile, ValueError, EOFError, zlib.error) as exc:
                    notes.append(f"artifact {name}: {info.filename} is not readable XML ({type(exc).__name__})")
        return report if report.files else None

    def _report_item(self, report: JUnitReport, where: str, source: str, created: datetime | None
                     ) -> tuple[ContextItem, str]:
        n, m = report.failed_count, report.total
        head = f"Failed tests: {n} of {m} in {where}\nJUnit files: {', '.join(report.files)}\n"
        blocks = [_failure_block(i + 1, t, self.first_lines) for i, t in enumerate(report.failed)]
        if report.more_failed:
            blocks.append(f"[... {report.more_failed} more failed tests, not read ...]")
        full = head + "\n" + "\n\n".join(_failure_block(i + 1, t, 10_000, fold=False)
                                        for i, t in enumerate(report.failed))
        if report.more_failed:
            full += f"\n\n[... {report.more_failed} more failed tests, not read ...]"
        content = self._fit(head, blocks)
        return ContextItem(kind=ContextKind.TEST_RESULT, source=source, title=f"Tests: {n} failed of {m}",
                           content=content, created_at=created), full

    def _fit(self, head: str, blocks: list[str]) -> str:
        """As many whole failure blocks as fit the budget, then how many more there are."""
        text = head
        for k, block in enumerate(blocks):
            more = f"\n[... {len(blocks) - k} more failed tests: see the stored report ...]"
            candidate = f"{text}\n{block}\n"
            if self.count(candidate + more) > self.excerpt_tokens:
                if k == 0:  # not even one block: its first lines are still the most useful thing
                    return excerpt_log(candidate, self.excerpt_tokens - self.count(more) - 4, self.count).text + more
                return text + more
            text = candidate
        return text

    def _annotation_items(self, target: Target, sha: str, notes: list[str]) -> list[ContextItem]:
        items: list[ContextItem] = []
        doing = f"listing check runs of commit {sha[:12]} in {target.name}"
        with self.client.calling(doing):
            # Repository.get_commit would fetch the whole commit first; the list is all we need.
            check_runs: PaginatedList[CheckRun] = PaginatedList(
                CheckRun, self.client.gh.requester, f"{target.repo.url}/commits/{sha}/check-runs",
                {"filter": "latest"}, list_item="check_runs")
            failed = [c for c in check_runs if c.conclusion in FAILED_CONCLUSIONS
                      and c.output is not None and (c.output.annotations_count or 0) > 0]
        for check in failed:
            with self.client.calling(f"listing annotations of check run {check.name} in {target.name}"):
                annotations = [a for a in check.get_annotations() if a.annotation_level == "failure"
                               and not _PROCESS_EXIT.match(a.message or "")]
            if not annotations:
                continue
            tests = [FailedTest(classname="", name=a.title or f"{a.path}:{a.start_line}", kind="failure",
                                message=a.message or "", text=a.raw_details or "", file=a.path or "",
                                line=str(a.start_line or "")) for a in annotations]
            head = (f"Failed tests: {len(tests)} failure annotation(s) of check run '{check.name}' "
                    f"(commit {sha[:12]}, {check.html_url})\n")
            content = self._fit(head, [_failure_block(i + 1, t, self.first_lines) for i, t in enumerate(tests)])
            items.append(ContextItem(kind=ContextKind.TEST_RESULT, source=clip(check.html_url, MAX_SOURCE),
                                     title=f"Tests: {len(tests)} failed (check run '{clip(check.name, 200)}')",
                                     content=content, created_at=check.completed_at))
        notes.append(f"no JUnit XML in the artifacts of commit {sha[:12]}; "
                     f"{len(items)} check run(s) with failure annotations")
        return items


_PROCESS_EXIT = re.compile(r"^Process completed with exit code \d+\.?\n?\Z")  # what "$" allowed, said outright
