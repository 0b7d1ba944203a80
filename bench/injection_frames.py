"""Frames that indirect injection arrives in: a training text set where an agent reads data.

An instruction meant for the agent rarely arrives bare: it sits in a tool's JSON result, an
email, a fetched web page, a code comment, a CI log or an issue thread. A classifier trained on
bare attacks learns the attack's words but also that the data around them means "benign". So
bench/injection_train.py puts short training texts of BOTH classes into these frames: the frame
is then evidence of nothing, and only what sits inside it decides. The frames are ours, written
from the shapes agents read (and the carriers agentprobe and AgentDojo describe), not from any
test corpus; a few hosts are in German, French and Spanish because data arrives in those too.

Alone, framing lowered recall on the validation families (0.72 to 0.67 at 3.7% false rejects):
a frame lengthens a short benign text, and the whole text was all the classifier read then.
With short windows scored and benign texts' short windows trained on as benign
(injection_train.benign_windows), it raised it (0.78 to 0.80); it is on by default.

Deterministic: the i-th text gets frame i modulo len(FRAMES), so training stays byte-identical.
"""

from __future__ import annotations

import json

# {text} is the framed text; {json} is the same text as a JSON string (quoted and escaped).
FRAMES: tuple[str, ...] = (
    '{{"tool": "fetch_url", "status": 200, "result": {{"title": "Release notes", "body": {json}}}}}',
    '{{"type": "tool_result", "tool_use_id": "toolu_01", "content": [{{"type": "text", "text": {json}}}]}}',
    "From: alex@vendor.example\nTo: team@example.com\nSubject: Re: invoice 4471\n\n"
    "Hi all,\n\nthe updated invoice is attached.\n\n{text}\n\nBest,\nAlex",
    "<html><body><h1>Getting started</h1><p>Install the package with pip.</p>\n<p>{text}</p>\n</body></html>",
    "<div class=\"review\">Great product, works as described.</div>\n<!-- {text} -->",
    "def load_config(path):\n    # {text}\n    with open(path) as f:\n        return json.load(f)",
    "## Contributing\n\nRun the tests before opening a pull request.\n\n> {text}\n\nThanks for helping out!",
    "Search results:\n1. Python packaging guide - packaging.python.org\n2. {text}\n3. PEP 621 - peps.python.org",
    "2026-03-02T10:14:07Z ##[group]Run pytest -q\n2026-03-02T10:14:09Z {text}\n2026-03-02T10:14:11Z 12 passed in 1.8s",
    "Issue #812: build fails on Windows\n\ncomment by @mkoch:\n{text}\n\ncomment by @lee: same here on 3.12",
    "Tool output (read_file README.md):\n```\n# project\n\n{text}\n```",
    "Von: lena@firma.example\nBetreff: Protokoll\n\nHallo zusammen, anbei das Protokoll der Sitzung.\n\n{text}"
    "\n\nGruß, Lena",
    "Objet : compte rendu\n\nBonjour, voici le compte rendu de la réunion de lundi.\n\n{text}\n\nCordialement",
    "Documento recuperado (wiki interna):\nLa política de vacaciones se revisa cada año.\n{text}",
)


def frame(text: str, i: int) -> str:
    """`text` inside the i-th frame (modulo their number)."""
    return FRAMES[i % len(FRAMES)].format(text=text, json=json.dumps(text, ensure_ascii=False))
