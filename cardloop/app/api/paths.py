"""A path with a trailing slash is the same route: `/webhooks/github/` is `/webhooks/github`.

Starlette answers such a path with a 307 to the path without it. Browsers and most SDKs follow
it, but GitHub's webhook deliveries do not (a redirect is a failed delivery there), and a webhook
URL pasted with a slash at its end is a common slip. No route of ours ends with a slash, so the
slash is dropped before routing instead, and no request is ever redirected.
"""

from __future__ import annotations

from typing import Any


class TrailingSlash:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/"):
            trimmed = path.rstrip("/") or "/"
            raw = scope.get("raw_path")
            scope = {**scope, "path": trimmed,
                     **({"raw_path": raw.rstrip(b"/") or b"/"} if isinstance(raw, bytes) else {})}
        await self.app(scope, receive, send)
