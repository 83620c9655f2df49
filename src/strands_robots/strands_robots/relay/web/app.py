"""The status page's HTTP side (aiohttp): sign-in, the job pages, their live updates, and every refusal.

Routes::

    GET  /signin             the sign-in form (a pre-session carries its CSRF token)
    POST /signin             token -> session cookie (HttpOnly, SameSite=Strict; Secure over TLS)
    POST /signout            ends the session (CSRF token required)
    GET  /jobs               a team's jobs, newest first; a station's queue
    GET  /jobs/{job_id}      one job: state, progress, every episode (end condition, score, sheet, flags)
    GET  /events             server-sent events: the re-rendered list whenever it changes
    GET  /jobs/{job_id}/events   the same for one job; ends when the job does
    GET  /jobs/{job_id}/recordings/{episode_id}   an episode's recording (MCAP) the station uploaded
    GET  /jobs/{job_id}/recordings/{episode_id}/thumbnail   its first camera frame (JPEG/PNG as recorded)
    GET  /leaderboard        a team's suites with ranked policies
    GET  /leaderboard/{suite}   the team's own policies on the suite, ranked (Bradley-Terry, with intervals)
    GET  /static/...         the stylesheet and the one script (no inline script: the CSP forbids it)

What no request gets: another team's job, or another team's policies on a leaderboard. A job the signed-in principal
may not see answers exactly as a job that does not exist (404, the same page), on every route. Every POST carries
its session's CSRF token (the sign-in form a signed one, :class:`~strands_robots.relay.web.sessions.SignInForms`, so
a flood of ``GET /signin`` stores nothing and expires no open form) and, when the browser sends an Origin, must come
from this page's own origin. Sign-in is rate-limited per address and overall
(:class:`~strands_robots.relay.web.sessions.SignInLimiter`); request bodies are capped at :data:`MAX_BODY_BYTES`;
the token is compared in constant time by the relay's token book, and re-checked on every request, so a token taken
out of the token file ends its sessions.

Every answer, the live event streams and downloads included, carries the same security headers (CSP with
``frame-ancestors 'none'``, ``X-Frame-Options``, ``nosniff``, ``Referrer-Policy``, ``Cache-Control: no-store``
but for the static files): they are set as each answer's headers are sent (``on_response_prepare``). A request
must arrive whole within :data:`READ_TIMEOUT_S`: its line and headers (the connection is closed, see
``WebStatusServer``) and its body (408, then closed).

Store reads run on the server's thread pool, never on its event loop (the handlers only await them).
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
from concurrent import futures
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import jinja2
from aiohttp import web

from strands_robots.relay.rate_limit import RateLimitedLog

from strands_robots.relay.auth import KIND_CLIENT, Principal, TokenBook
from strands_robots.relay.web.sessions import Session, SessionTable, SignInForms, SignInLimiter
from strands_robots.relay.web.source import JobSource

_log = logging.getLogger("strands_robots.relay.web")
HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "sr_session"
SIGNIN_COOKIE = "sr_signin"
#: how long a sign-in form may be filled in
SIGNIN_FORM_S = 600
#: the largest request body accepted (the sign-in form is a token and a CSRF token)
MAX_BODY_BYTES = 8 * 1024
#: a longer token is refused before it is compared (the token file's are far shorter)
MAX_TOKEN_CHARS = 1024
#: event streams open at once, per session and over all sessions (past either: 503 naming the limit)
MAX_STREAMS_PER_SESSION = 8
MAX_STREAMS = 256
#: a comment line on an idle event stream this often, so proxies and the browser keep it open
KEEPALIVE_S = 15.0
#: how long a request's line and headers, and then its body, may take to arrive (a half-sent one is closed)
READ_TIMEOUT_S = 10.0

_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")


def _utc(unix_ms: Optional[int]) -> str:
    if not unix_ms:
        return "–"
    return datetime.datetime.fromtimestamp(unix_ms / 1000.0, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(unix_ms: int) -> str:
    """Return a ``<time datetime>`` value: ISO 8601 in UTC, to the second."""
    return datetime.datetime.fromtimestamp(unix_ms / 1000.0, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GiB"


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
    env.filters["utc"] = _utc
    env.filters["size"] = _size
    env.filters["iso"] = _iso
    return env


def sse_event(event: str, data: str) -> bytes:
    """One server-sent event: every line of ``data`` as its own ``data:`` line (the browser joins them)."""
    lines = "".join(f"data: {line}\n" for line in data.replace("\r", "").split("\n"))
    return f"event: {event}\n{lines}\n".encode("utf-8")


class StatusPage:
    """The handlers and what they share: the job source, the relay's current tokens, sessions, limits."""

    def __init__(self, source: JobSource, tokens: Callable[[], TokenBook], executor: futures.Executor, *,
                 secure_cookies: bool = False, poll_s: float = 0.5, sessions: Optional[SessionTable] = None,
                 limiter: Optional[SignInLimiter] = None, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.source = source
        self.tokens = tokens
        self.executor = executor
        self.secure_cookies = secure_cookies
        self.poll_s = poll_s
        self.read_timeout_s = read_timeout_s
        self.sessions = sessions or SessionTable()
        # Anyone may open the sign-in form: its token is signed, not stored, so no number of them ends another
        # form or a signed-in session.
        self.forms = SignInForms(max_age_s=SIGNIN_FORM_S)
        self.limiter = limiter or SignInLimiter()
        self.env = templates()
        self.refusals = RateLimitedLog(_log)  # refused sign-ins and forms, one line each, at a bounded rate
        self._streams: Dict[str, int] = {}

    # -- plumbing ---------------------------------------------------------------------------------------------
    async def run(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def render(self, name: str, status: int = 200, session: Optional[Session] = None, **values: Any) -> web.Response:
        """Render a page; ``session`` gives the header's principal and the forms' CSRF token."""
        who = session.principal if session is not None else None
        html = self.env.get_template(name).render(who=who, csrf=session.csrf if session else "", **values)
        return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")

    def error(self, status: int, title: str, detail: str, session: Optional[Session] = None) -> web.Response:
        return self.render("error.html", status=status, session=session, code=status, title=title, detail=detail)

    def not_found(self, session: Optional[Session]) -> web.Response:
        """Answer a job that is missing and one that is not the viewer's alike (nothing tells the two apart)."""
        return self.error(404, "Not found", "There is no such job for you.", session)

    def _cookie(self, response: web.StreamResponse, name: str, value: str, max_age: Optional[int] = None) -> None:
        response.set_cookie(name, value, path="/", httponly=True, samesite="Strict", secure=self.secure_cookies,
                            max_age=max_age)

    def signed_in(self, request: web.Request) -> Optional[Session]:
        """Return the request's live session whose token is still the relay's for the same principal; else None."""
        session = self.sessions.get(request.cookies.get(SESSION_COOKIE))
        if session is None or session.principal is None:
            return None
        if self.tokens().identify(session.token) != session.principal:  # removed or rotated: the session ends
            self.sessions.end(session.session_id)
            return None
        return session

    @staticmethod
    def same_origin(request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        return origin is None or origin == f"{request.scheme}://{request.host}"

    # -- sign-in and sign-out ---------------------------------------------------------------------------------
    async def signin_form(self, request: web.Request, refusal: str = "", status: int = 200) -> web.Response:
        form = self.forms.issue()  # signed, not stored: nobody is signed in yet
        html = self.env.get_template("signin.html").render(who=None, csrf=form.csrf, refusal=refusal,
                                                           max_token=MAX_TOKEN_CHARS)
        response = web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
        self._cookie(response, SIGNIN_COOKIE, form.cookie, max_age=SIGNIN_FORM_S)
        return response

    async def read_form(self, request: web.Request) -> Any:
        """Read a POST's form; a body that does not arrive within ``read_timeout_s`` is answered 408 and closed."""
        try:
            return await asyncio.wait_for(request.post(), self.read_timeout_s)
        except asyncio.TimeoutError:
            self.refusals.warning(f"web request from {request.remote}: its body did not arrive within "
                                  f"{self.read_timeout_s:g} s; closed")
            response = self.error(408, "Request timeout", f"The request did not arrive within "
                                                          f"{self.read_timeout_s:g} s.")
            response.force_close()
            await response.prepare(request)
            await response.write_eof()
            if request.transport is not None:  # sent: close now, not after lingering for the rest of the body
                request.transport.close()
            raise _Answer(response) from None

    async def get_signin(self, request: web.Request) -> web.StreamResponse:
        if self.signed_in(request) is not None:
            raise web.HTTPSeeOther("/jobs")
        return await self.signin_form(request)

    async def post_signin(self, request: web.Request) -> web.StreamResponse:
        allowed, wait_s = self.limiter.allow(request.remote or "?")
        if not allowed:
            self.refusals.warning(f"web sign-in from {request.remote}: rate limited ({wait_s:.0f} s to the next)")
            response = await self.signin_form(request, f"Too many sign-in attempts: try again in {wait_s:.0f} s.",
                                               status=429)
            response.headers["Retry-After"] = str(max(1, int(wait_s + 0.999)))
            return response
        if not self.same_origin(request):
            self.refusals.warning(f"web sign-in from {request.remote}: refused, Origin {request.headers['Origin']!r}")
            return self.error(403, "Forbidden", "This form was sent from another site.")
        form = await self.read_form(request)
        if not self.forms.redeem(str(form.get("csrf", "")), request.cookies.get(SIGNIN_COOKIE)):  # one attempt each
            return await self.signin_form(request, "The sign-in form expired: sign in again.", status=403)
        token = str(form.get("token", "")).strip()
        if not token or len(token) > MAX_TOKEN_CHARS:
            return await self.signin_form(request, "Give your token.", status=400)
        principal = self.tokens().identify(token)
        if principal is None:
            self.refusals.warning(f"web sign-in from {request.remote}: refused, unknown token")
            return await self.signin_form(request, "Sign-in refused: that is not a token this relay knows.",
                                          status=401)
        session = self.sessions.sign_in(principal, token, replacing=request.cookies.get(SESSION_COOKIE))
        response = web.HTTPSeeOther("/jobs")
        self._cookie(response, SESSION_COOKIE, session.session_id)
        response.del_cookie(SIGNIN_COOKIE, path="/")
        raise response

    async def post_signout(self, request: web.Request) -> web.StreamResponse:
        session = self.signed_in(request)
        if session is None:
            raise web.HTTPSeeOther("/signin")
        form = await self.read_form(request)
        if not self.same_origin(request) or not session.csrf_matches(str(form.get("csrf", ""))):
            return self.error(403, "Forbidden", "Sign-out needs the form's token: use the page's button.", session)
        self.sessions.end(session.session_id)
        response = web.HTTPSeeOther("/signin")
        response.del_cookie(SESSION_COOKIE, path="/")
        raise response

    # -- pages ------------------------------------------------------------------------------------------------
    def _require(self, request: web.Request) -> Session:
        session = self.signed_in(request)
        if session is None:
            raise web.HTTPSeeOther("/signin")
        return session

    def _list_values(self, principal: Principal, pages: list) -> dict:
        if principal.kind == KIND_CLIENT:
            return {"pages": pages, "heading": f"Jobs of {principal.name}",
                    "empty": "No jobs yet: submit one with the Evaluation Client."}
        return {"pages": pages, "heading": f"Queue of station {principal.name}",
                "empty": "No job is waiting or running at this station."}

    async def get_root(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther("/jobs" if self.signed_in(request) else "/signin")

    async def get_jobs(self, request: web.Request) -> web.StreamResponse:
        session = self._require(request)
        pages = await self.run(self.source.pages, session.principal)
        return self.render("jobs.html", session=session, **self._list_values(session.principal, pages))

    async def get_job(self, request: web.Request) -> web.StreamResponse:
        session = self._require(request)
        principal, job_id = session.principal, request.match_info["job_id"]
        page = await self.run(self.source.page, principal, job_id)
        if page is None:
            return self.not_found(session)
        recordings, thumbnails = await self.run(self._recordings, principal, job_id)
        return self.render("job.html", session=session, page=page, recordings=recordings, thumbnails=thumbnails)

    async def get_leaderboards(self, request: web.Request) -> web.StreamResponse:
        session = self._require(request)
        if session.principal.kind != KIND_CLIENT:
            return self.not_found(session)
        suites = await self.run(self.source.leaderboard_suites, session.principal)
        return self.render("leaderboards.html", session=session, suites=suites)

    async def get_leaderboard(self, request: web.Request) -> web.StreamResponse:
        session = self._require(request)
        suite = request.match_info["suite"]
        from strands_robots.relay.leaderboard import SUITE_ID

        if session.principal.kind != KIND_CLIENT or not SUITE_ID.fullmatch(suite):
            return self.not_found(session)
        board = await self.run(self.source.leaderboard, session.principal, suite)
        return self.render("leaderboard.html", session=session, board=board)

    def _recordings(self, principal: Principal, job_id: str) -> tuple:
        """Return the job's complete recordings by episode, and the episodes whose recording has a camera frame."""
        recordings = self.source.recordings(principal, job_id)
        return recordings, frozenset(e for e, row in recordings.items() if self.source.thumbnail_of(row))

    async def get_thumbnail(self, request: web.Request) -> web.StreamResponse:
        """Send the first camera frame of an episode's recording, as the camera encoded it (JPEG or PNG)."""
        session = self._require(request)
        principal, job_id = session.principal, request.match_info["job_id"]
        row = await self.run(self.source.recording, principal, job_id, request.match_info["episode_id"])
        frame = await self.run(self.source.thumbnail_of, row) if row is not None else None
        if frame is None:
            return self.not_found(session)
        return web.Response(body=frame[1], content_type=frame[0], headers={"Cache-Control": "private, max-age=3600"})

    async def get_recording(self, request: web.Request) -> web.StreamResponse:
        """Send one episode's recording (MCAP) from the store, chunk by chunk, checked against its SHA-256.

        The relay checked the bytes on upload; they are hashed again on the way out, and a download whose bytes
        do not match (a chunk lost in the store) is cut off, so the browser reports it failed instead of saving
        a damaged file.
        """
        session = self._require(request)
        job_id, episode_id = request.match_info["job_id"], request.match_info["episode_id"]
        row = await self.run(self.source.recording, session.principal, job_id, episode_id)
        if row is None:
            return self.not_found(session)
        name = "".join(c for c in (row.file_name or f"{episode_id}.mcap") if c.isalnum() or c in "._-")[:128]
        response = web.StreamResponse(headers={
            "Content-Type": "application/octet-stream", "Content-Length": str(row.size_bytes),
            "Content-Disposition": f'attachment; filename="{name or "recording.mcap"}"', "Cache-Control": "no-store",
            "X-Content-SHA256": row.sha256})
        await response.prepare(request)
        digest, sent = hashlib.sha256(), 0
        for seq in range(row.chunks):
            data = await self.run(self.source.chunk, row, seq)
            if data is None:
                break
            digest.update(data)
            sent += len(data)
            await response.write(data)
        if sent != row.size_bytes or digest.hexdigest() != row.sha256:
            request.transport.close()  # cut short: never a complete-looking damaged file
            return response
        await response.write_eof()
        return response

    # -- live updates -----------------------------------------------------------------------------------------
    async def get_job_events(self, request: web.Request) -> web.StreamResponse:
        session = self._require(request)
        principal, job_id = session.principal, request.match_info["job_id"]
        if await self.run(self.source.page, principal, job_id) is None:
            return self.not_found(session)

        def read() -> Optional[tuple]:
            page = self.source.page(principal, job_id)
            if page is None:
                return None
            recordings, thumbnails = self._recordings(principal, job_id)
            return ((page.version, tuple(sorted(recordings))),
                    lambda: self.env.get_template("_job.html").render(page=page, recordings=recordings,
                                                                      thumbnails=thumbnails),
                    page.terminal)

        return await self._stream(request, session, read)

    async def get_list_events(self, request: web.Request) -> web.StreamResponse:
        session = self._require(request)
        principal = session.principal

        def render() -> str:  # only when the fingerprint moved: the list reads every listed job
            pages = self.source.pages(principal)
            return self.env.get_template("_jobs_table.html").render(**self._list_values(principal, pages))

        def read() -> tuple:
            return self.source.fingerprint(principal), render, False

        return await self._stream(request, session, read)

    async def _stream(self, request: web.Request, session: Session, read: Callable[[], Optional[tuple]]
                      ) -> web.StreamResponse:
        """Serve one live view: every ``poll_s``, ``read()`` (on the pool) -> (version, render, final) or None.

        ``render()`` (on the pool too) makes the fragment, only when the version moved; the stream ends when the
        view is final, gone (None) or its session ended.
        """
        held = self._streams.get(session.session_id, 0)
        if held >= MAX_STREAMS_PER_SESSION or sum(self._streams.values()) >= MAX_STREAMS:
            return self.error(503, "Too many live views",
                              f"At most {MAX_STREAMS_PER_SESSION} live views per session and {MAX_STREAMS} in all "
                              f"are served at once; close one.", session)
        self._streams[session.session_id] = held + 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        try:
            await response.prepare(request)
            await response.write(b"retry: 2000\n\n")
            loop = asyncio.get_running_loop()
            last_version, last_write = None, loop.time()
            while True:
                if self.signed_in(request) is None:
                    await response.write(sse_event("end", "Signed out: sign in again to see updates."))
                    break
                got = await self.run(read)
                if got is None:
                    await response.write(sse_event("end", "This job is no longer shown."))
                    break
                version, render, final = got
                if version != last_version:
                    await response.write(sse_event("update", await self.run(render)))
                    last_version, last_write = version, loop.time()
                if final:
                    await response.write(sse_event("end", "The job has ended: no more updates."))
                    break
                if loop.time() - last_write > KEEPALIVE_S:
                    await response.write(b": keepalive\n\n")
                    last_write = loop.time()
                await asyncio.sleep(self.poll_s)  # the poll period: the store is re-read this often
        except ConnectionResetError:  # the browser went away between two updates
            pass
        finally:
            left = self._streams.get(session.session_id, 1) - 1
            if left > 0:
                self._streams[session.session_id] = left
            else:
                self._streams.pop(session.session_id, None)
        return response


class _Answer(Exception):
    """Raised by a handler's helper to answer the request with ``response`` at once."""

    def __init__(self, response: web.StreamResponse) -> None:
        super().__init__(response.status)
        self.response = response


PAGE_KEY = web.AppKey("page", StatusPage)


@web.middleware
async def _errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Answer every refusal with a page, never a traceback; an unknown route is the 404 of a job one may not see."""
    page: StatusPage = request.app[PAGE_KEY]
    try:
        return await handler(request)
    except _Answer as answer:
        return answer.response
    except web.HTTPNotFound:
        return page.not_found(page.signed_in(request))
    except web.HTTPMethodNotAllowed:
        return page.error(405, "Method not allowed", "This address does not take that request.")
    except web.HTTPRequestEntityTooLarge:
        return page.error(413, "Too large", f"A request body may be at most {MAX_BODY_BYTES} bytes.")


def security_headers(path: str, headers: Any) -> None:
    """Set the security headers an answer to ``path`` carries (those it set itself stay)."""
    headers.setdefault("Content-Security-Policy", _CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with the forms' POSTs,
    # and the origin check needs the real one; another site still gets no referrer
    headers.setdefault("Referrer-Policy", "same-origin")
    if not path.startswith("/static/"):
        headers.setdefault("Cache-Control", "no-store")


async def _on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    # every answer passes here just before its headers are sent: pages, redirects, refusals, and the streams
    # (events, downloads) a handler prepares itself, which no middleware sees before they start
    security_headers(request.path, response.headers)


def make_app(page: StatusPage) -> web.Application:
    """Return the aiohttp application of ``page`` (bodies capped at :data:`MAX_BODY_BYTES`)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_errors])
    app.on_response_prepare.append(_on_prepare)
    app[PAGE_KEY] = page
    app.router.add_get("/", page.get_root)
    app.router.add_get("/signin", page.get_signin)
    app.router.add_post("/signin", page.post_signin)
    app.router.add_post("/signout", page.post_signout)
    app.router.add_get("/jobs", page.get_jobs)
    app.router.add_get("/events", page.get_list_events)
    app.router.add_get("/jobs/{job_id}", page.get_job)
    app.router.add_get("/jobs/{job_id}/events", page.get_job_events)
    app.router.add_get("/jobs/{job_id}/recordings/{episode_id}", page.get_recording)
    app.router.add_get("/jobs/{job_id}/recordings/{episode_id}/thumbnail", page.get_thumbnail)
    app.router.add_get("/leaderboard", page.get_leaderboards)
    app.router.add_get("/leaderboard/{suite}", page.get_leaderboard)
    app.router.add_static("/static/", HERE / "static", show_index=False, follow_symlinks=False)
    return app
