"""The browser as a starlette app: routes, refusals, and `serve`.

Routes name a root by index and a path under it; every handler resolves that path through
`Roots.resolve` first, so a path that could leave the root is refused with 403 before any
read. Only GET and HEAD exist (starlette answers 405 to anything else): nothing the app
does writes. Errors become a short page (403, 404, or an error message), never a traceback;
tracebacks go to the server log. Every answer, error pages and the Host check's 421 included, carries
the same security headers (`SecurityHeaders`). `serve` binds 127.0.0.1 unless told otherwise, and binding
anywhere else requires `allow_remote=True` and prints a warning, because these pages show
everything under the roots to whoever can reach the port.

    from marin.browser.app import serve
    serve(["local_store", "gs://bucket/lab"], port=8000)
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from marin.browser.compare import compare_page
from marin.browser.document_pages import duplicates_page
from marin.browser.documents import DocQuery
from marin.browser.hosts import HostCheck, allowed_hosts
from marin.browser.html import error_box, page
from marin.browser.leaderboard import leaderboard_page
from marin.browser.pages import experiment_page, experiments_page
from marin.browser.previews import IMAGE_TYPES
from marin.browser.records import RecordError
from marin.browser.runs_table import runs_page
from marin.browser.step_pages import file_page, step_page, tree_page
from marin.browser.storage import Forbidden, Roots
from marin.browser.summaries import CurveOptions
from marin.provenance.redaction import redact_html, redact_text
from marin.storage.layout import LOGS_DIR
from marin.storage.layout import status_path as layout_status_path

logger = logging.getLogger(__name__)

STATIC = {
    "style.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'",
}
RAW_TYPES = {".json": "application/json", ".txt": "text/plain; charset=utf-8", ".log": "text/plain; charset=utf-8"}


def _int(value: str | None, default: int, lo: int = 0, hi: int = 1 << 62) -> int:
    try:
        return max(lo, min(hi, int(value))) if value is not None else default
    except ValueError:
        return default


class SecurityHeaders:
    """ASGI middleware: every HTTP response carries SECURITY_HEADERS, error pages and refusals included (a
    header the route set itself, such as the sandboxing policy of raw files, is kept)."""

    ENCODED = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in self.ENCODED if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(redact_html(body), status_code=status, headers=SECURITY_HEADERS)


def create_app(roots: list[str], storage_options: dict[str, dict] | None = None) -> Starlette:
    """The browser over `roots` (local folders or fsspec URLs). `storage_options`: per protocol, e.g. {"gs": {...}}."""
    rs = Roots(roots, storage_options)
    static = {name: resources.files("marin.browser").joinpath("static", name).read_bytes() for name in STATIC}

    def root_index(request: Request) -> int:
        try:
            return int(request.path_params["root"])
        except (KeyError, ValueError):
            raise Forbidden("bad root number") from None

    async def experiments(request: Request) -> Response:
        return _html(await _run(experiments_page, rs))

    async def experiment(request: Request) -> Response:
        return _html(await _run(experiment_page, rs, root_index(request), request.path_params["path"]))

    async def step(request: Request) -> Response:
        qp = request.query_params
        curves = CurveOptions.from_query(qp.get("x"), qp.get("smooth"), qp.get("loglog"), qp.get("logy"))
        return _html(await _run(step_page, rs, root_index(request), request.path_params["path"], qp.get("exp"), curves))

    async def tree(request: Request) -> Response:
        return _html(await _run(tree_page, rs, root_index(request), request.path_params.get("path", "")))

    async def file(request: Request) -> Response:
        idx, rel = root_index(request), request.path_params["path"]
        root, rel, full = rs.resolve(idx, rel)
        if await _run(root.fs.isdir, full):
            return _html(await _run(tree_page, rs, idx, rel))
        qp = request.query_params
        offset = _int(qp.get("offset"), 0)
        n = _int(qp.get("n"), 50, 1, 1000)
        sample = qp.get("sample") or (qp.get("n_sample") if qp.get("mode") == "sample" else None)
        try:
            query: DocQuery | str = DocQuery.parse(qp.get("q"), qp.get("where"), sample, qp.get("seed"))
        except ValueError as e:
            query = str(e)
        return _html(await _run(file_page, rs, idx, rel, offset, n, query))

    async def duplicates(request: Request) -> Response:
        qp = request.query_params
        offset = _int(qp.get("offset"), 0)
        n = _int(qp.get("n"), 20, 1, 200)
        return _html(
            await _run(duplicates_page, rs, root_index(request), request.path_params["path"], offset, n, qp.get("id"))
        )

    async def raw(request: Request) -> Response:
        root, rel, full = rs.resolve(root_index(request), request.path_params["path"])
        info = await _run(root.fs.info, full)
        if info.get("type") != "file":
            raise FileNotFoundError(full)
        name = rel.rsplit("/", 1)[-1].lower()
        ctype = next(
            (t for s, t in {**IMAGE_TYPES, **RAW_TYPES}.items() if name.endswith(s)), "application/octet-stream"
        )
        headers = {
            **SECURITY_HEADERS,
            "Content-Length": str(info.get("size") or 0),
            "Content-Security-Policy": "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'",
        }
        if request.method == "HEAD":
            return Response(b"", media_type=ctype, headers=headers)

        def chunks():
            with root.fs.open(full, "rb") as f:
                while chunk := f.read(1 << 20):
                    yield chunk

        return StreamingResponse(chunks(), media_type=ctype, headers=headers)

    async def log_tail(request: Request) -> Response:
        root, rel, full = rs.resolve(root_index(request), request.path_params["path"])
        if f"/{LOGS_DIR}/" not in f"/{rel}":
            raise Forbidden("not a step log")
        offset = _int(request.query_params.get("offset"), 0)

        def read():
            size = root.fs.info(full)["size"]
            start = min(offset, size)
            if size - start > 1 << 20:
                start = size - (1 << 20)
            text = root.fs.cat_file(full, start=start, end=size).decode("utf-8", "replace") if size > start else ""
            status_file = layout_status_path(full.split(f"/{LOGS_DIR}/")[0])
            try:
                state = root.fs.cat_file(status_file).decode("utf-8", "replace").strip()
            except FileNotFoundError:
                state = "NOT_STARTED"
            return {"offset": size, "text": redact_text(text), "state": state, "skipped": start > offset}

        return JSONResponse(await _run(read), headers=SECURITY_HEADERS)

    async def compare(request: Request) -> Response:
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not b and len(request.query_params.getlist("a")) == 2:  # the runs table's form, without JavaScript
            a, b = request.query_params.getlist("a")
        if not a or not b:
            return _html(page("compare", error_box("compare needs two steps: ?a=STEP&b=STEP")), 400)
        return _html(await _run(compare_page, rs, root_index(request), a, b))

    async def leaderboard(request: Request) -> Response:
        qp = request.query_params
        return _html(await _run(leaderboard_page, rs, qp.get("x"), qp.get("metric")))

    async def runs(request: Request) -> Response:
        return _html(await _run(runs_page, rs, request.query_params.get("step")))

    async def static_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            raise FileNotFoundError(name)
        return Response(static[name], media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})

    async def on_forbidden(request: Request, exc: Exception) -> Response:
        logger.warning("refused %s: %s", request.url.path, exc)
        return _html(page("Forbidden", error_box(f"Forbidden: {exc}")), 403)

    async def on_not_found(request: Request, exc: Exception) -> Response:
        return _html(page("Not found", error_box(f"Not found: {request.url.path}")), 404)

    async def on_http(request: Request, exc: HTTPException) -> Response:
        headers = dict(exc.headers or {})
        return HTMLResponse(
            page(str(exc.status_code), error_box(f"{exc.status_code}: {exc.detail}")), exc.status_code, headers=headers
        )

    async def on_error(request: Request, exc: Exception) -> Response:
        logger.exception("error serving %s", request.url.path)
        msg = str(exc).splitlines()[0] if str(exc) else ""
        return _html(page("Error", error_box(f"could not render this page: {type(exc).__name__}: {msg}")), 500)

    get = ["GET", "HEAD"]
    routes = [
        Route("/", experiments, methods=get),
        Route("/exp/{root}/{path:path}", experiment, methods=get),
        Route("/step/{root}/{path:path}", step, methods=get),
        Route("/tree/{root}", tree, methods=get),
        Route("/tree/{root}/{path:path}", tree, methods=get),
        Route("/file/{root}/{path:path}", file, methods=get),
        Route("/raw/{root}/{path:path}", raw, methods=get),
        Route("/api/log/{root}/{path:path}", log_tail, methods=get),
        Route("/compare/{root}", compare, methods=get),
        Route("/leaderboard", leaderboard, methods=get),
        Route("/dups/{root}/{path:path}", duplicates, methods=get),
        Route("/runs", runs, methods=get),
        Route("/static/{name}", static_file, methods=get),
    ]
    handlers = {
        Forbidden: on_forbidden,
        FileNotFoundError: on_not_found,
        NotADirectoryError: on_not_found,
        HTTPException: on_http,
        RecordError: on_error,
        Exception: on_error,
    }
    app = Starlette(routes=routes, exception_handlers=handlers, middleware=[Middleware(SecurityHeaders)])
    app.state.roots = rs
    return app


async def _run(fn, *args):
    """Storage calls block: run them in starlette's thread pool."""
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def browser_app(
    roots: list[str],
    host: str = "127.0.0.1",
    storage_options: dict[str, dict] | None = None,
    extra_hosts: list[str] | None = None,
):
    """The app `serve` runs: `create_app` behind the Host check (marin.browser.hosts), every answer with the
    security headers, the Host check's refusals too."""
    return SecurityHeaders(HostCheck(create_app(roots, storage_options), allowed_hosts(host, extra_hosts or ())))


def serve(
    roots: list[str],
    host: str = "127.0.0.1",
    port: int = 0,
    allow_remote: bool = False,
    storage_options: dict[str, dict] | None = None,
    extra_hosts: list[str] | None = None,
) -> None:
    """Serve the browser until interrupted. `port=0` picks a free port; the URL is printed either way.
    Only requests whose Host header names the bind address (or one of `extra_hosts`) are answered."""
    import socket

    import uvicorn

    if not is_loopback(host):
        if not allow_remote:
            raise ValueError(
                f"--host {host}: the browser shows every file under its roots; binding beyond 127.0.0.1 "
                "needs --allow-remote"
            )
        print(
            f"WARNING: serving {', '.join(roots)} on {host}: anyone who can reach this port can read every file "
            "under these roots (no authentication).",
            file=sys.stderr,
        )
    app = browser_app(roots, host, storage_options, extra_hosts)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"marin browse: http://{shown}:{bound}/  (roots: {', '.join(roots)}; Ctrl-C to stop)", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    """`python -m marin.browser.app ROOT... [--port N] [--host H] [--allow-remote]` (what `marin browse` wires)."""
    import argparse

    p = argparse.ArgumentParser(prog="marin browse", description="Read-only web browser over experiment outputs.")
    p.add_argument("roots", nargs="+", help="local folders or fsspec URLs (gs://bucket/prefix, s3://...)")
    p.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--allow-remote", action="store_true", help="allow binding to a non-loopback address")
    p.add_argument(
        "--allowed_host", action="append", default=[], metavar="NAME", help="also answer requests for this host name"
    )
    args = p.parse_args(argv)
    try:
        serve(args.roots, host=args.host, port=args.port, allow_remote=args.allow_remote, extra_hosts=args.allowed_host)
    except ValueError as e:
        print(f"marin browse: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()


__all__ = ["browser_app", "create_app", "main", "serve"]
