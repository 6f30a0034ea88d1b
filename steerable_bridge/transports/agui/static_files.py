"""The chat page's files: `index.html` at `/` and its scripts and styles under `/static/`.

`StaticFiles.page` answers the page and `StaticFiles.file` one file of the `static/`
package folder (the page's own ES modules, its stylesheet, and the vendored `marked` and
DOMPurify builds with their licences in `static/vendor/`). Only files that exist in that
folder when the server starts are served, each read once into memory with its content
type, `X-Content-Type-Options: nosniff` and a short cache; any other name is a 404 with a
remedy. The page goes with a Content-Security-Policy that lets it load scripts, styles and
connections from its own origin only (no inline script, no CDN, no frames), so markdown a
model writes cannot run code even if it slipped past the sanitiser.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["CSP", "StaticFiles"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: everything from its own origin, nothing inline."""

TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    "": "text/plain; charset=utf-8",  # LICENSE files
}
"""Content types by suffix; files of other kinds in the folder are not served."""

_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


def _walk(folder: Traversable, prefix: str) -> dict[str, Traversable]:
    found: dict[str, Traversable] = {}
    for entry in folder.iterdir():
        name = prefix + entry.name
        if entry.is_dir():
            found.update(_walk(entry, name + "/"))
        elif entry.is_file() and entry.name != "index.html":
            found[name] = entry
    return found


def _suffix(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return "." + base.rsplit(".", 1)[-1] if "." in base else ""


class StaticFiles:
    """The `static/` folder of this package, served from memory."""

    def __init__(self) -> None:
        folder = resources.files(__package__) / "static"
        self._index = folder / "index.html"
        self._files = {n: f for n, f in _walk(folder, "").items() if _suffix(n) in TYPES}
        self._cache: dict[str, Response] = {}
        self._page: bytes | None = None

    def names(self) -> list[str]:
        """The names served under `/static/`."""
        return sorted(self._files)

    async def page(self, request: Request) -> Response:
        """`GET /`: the chat page, under its Content-Security-Policy."""
        if self._page is None:
            self._page = self._index.read_bytes()
        headers = {**_HEADERS, "Content-Security-Policy": CSP, "Referrer-Policy": "no-referrer"}
        return Response(self._page, 200, headers, media_type="text/html; charset=utf-8")

    async def file(self, request: Request) -> Response:
        """`GET /static/{name}`: one of the page's files, or 404."""
        name = str(request.path_params["name"])
        source = self._files.get(name)
        if source is None:
            return JSONResponse(
                {
                    "error": {
                        "code": "not_found",
                        "message": f"the chat page has no file {name!r}; reload the page"
                        " (a server upgrade may have renamed it)",
                    }
                },
                404,
            )
        cached = self._cache.get(name)
        if cached is None:
            cached = Response(source.read_bytes(), 200, _HEADERS, media_type=TYPES[_suffix(name)])
            self._cache[name] = cached
        return cached
