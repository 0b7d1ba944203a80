"""The API's documentation pages (/docs: Swagger UI, /redoc) served from assets in an installed
package (`fastapi-offline`'s static files), never from a CDN: the pages work on a machine with
no network and load nothing from third parties."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"


def assets_dir() -> Path:
    import fastapi_offline  # its static/ holds swagger-ui-bundle.js, swagger-ui.css, redoc, favicon

    return Path(fastapi_offline.__file__).parent / "static"


def add_docs(app: FastAPI) -> None:
    """For an app made with docs_url=None and redoc_url=None."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"
    favicon = f"{ASSETS_URL}/favicon.png"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{app.title} - Swagger UI",
                                   oauth2_redirect_url=oauth2_redirect,
                                   swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS_URL}/swagger-ui.css", swagger_favicon_url=favicon)

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi_url, title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js", redoc_favicon_url=favicon,
                              with_google_fonts=False)
