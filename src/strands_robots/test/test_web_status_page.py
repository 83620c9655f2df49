"""The web status page over real HTTP, on a real store: sign-in, what each principal sees, live updates, refusals.

The page runs in this process (``WebStatusServer``) on a SQLite store filled the way the relay fills it (jobs
created, snapshots put in the store's order); the browser test (``test_web_browser.py``) drives a relay process.
"""

from __future__ import annotations

import contextlib

import pytest

pytest.importorskip("aiohttp", reason="the web status page needs aiohttp (requirements/python.txt)")
pytest.importorskip("jinja2", reason="the web status page needs Jinja2 (requirements/python.txt)")

from test_relay_harness import CLIENT_TOKENS, STATION_TOKENS, postgres_server, self_signed_cert  # noqa: E402
from web_helpers import Http, camera_recording, csrf_of, episode, read_events, snapshot  # noqa: E402

from strands_robots.client import pb  # noqa: E402
from strands_robots.relay import recording_store  # noqa: E402
from strands_robots.relay.auth import TokenBook  # noqa: E402
from strands_robots.relay.postgres_store import PostgresStore  # noqa: E402
from strands_robots.relay.sqlite_store import SqliteStore  # noqa: E402
from strands_robots.relay.store import JobRecord, Snapshot  # noqa: E402
from strands_robots.relay.web.app import MAX_BODY_BYTES  # noqa: E402
from strands_robots.relay.web.server import WebStatusServer  # noqa: E402

TEAM_A, TEAM_B = CLIENT_TOKENS["team_a"], CLIENT_TOKENS["team_b"]


def _create(store, job_id, client="team_a", station="sim_station", episodes=4, client_job_id="", at=1):
    request = pb.SubmitJobRequest(station_id=station, episodes=episodes, job_id=client_job_id or job_id)
    store.create_job(JobRecord(job_id=job_id, client_id=client, station_id=station,
                               request=request.SerializeToString(), submitted_unix_ms=at, episodes_total=episodes,
                               client_job_id=client_job_id or job_id))


def _put(store, status):
    store.put_snapshot(Snapshot(job_id=status.job_id, updated_unix_ms=status.updated_unix_ms, state=status.state,
                                payload=status.SerializeToString(), episodes_done=len(status.episodes),
                                sequence=status.sequence))


class Tokens:
    """The relay's current token book, replaceable as a token-file reload replaces it."""

    def __init__(self) -> None:
        self.book = TokenBook(CLIENT_TOKENS, STATION_TOKENS)

    def __call__(self) -> TokenBook:
        return self.book


@contextlib.contextmanager
def _page(tmp_path, poll_s=0.05, **kwargs):
    store = SqliteStore(str(tmp_path / "relay.db"))
    tokens = Tokens()
    web = WebStatusServer(store, tokens, "127.0.0.1:0", poll_s=poll_s, **kwargs)
    port = web.start()
    try:
        yield store, tokens, port, web
    finally:
        web.stop()
        store.close()


def test_sign_in_sets_an_httponly_strict_cookie_and_a_bad_token_is_refused_with_401(tmp_path, caplog):
    with _page(tmp_path) as (_, _, port, _):
        http = Http(port)
        with caplog.at_level("WARNING", logger="strands_robots.relay.web"):
            status, _, page = http.sign_in("not-a-token-of-this-relay")
        assert status == 401 and "not a token this relay knows" in page
        assert "sr_session" not in http.cookies
        assert "web sign-in from 127.0.0.1: refused, unknown token" in caplog.text
        assert "not-a-token-of-this-relay" not in caplog.text  # a presented token is never logged
        status, headers, _ = http.sign_in(TEAM_A)
        assert status == 303 and headers["Location"] == "/jobs"
        cookie = [h for h in http.set_cookie_headers if h.startswith("sr_session=")][-1]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert TEAM_A not in cookie  # the cookie holds a random session id, never the token
        status, headers, page = http.get("/jobs")
        assert status == 200 and "Jobs of team_a" in page
        assert "default-src 'self'" in headers["Content-Security-Policy"]
        assert headers["Cache-Control"] == "no-store"


def test_sign_in_without_the_forms_csrf_token_or_from_another_origin_is_refused(tmp_path):
    with _page(tmp_path) as (_, _, port, _):
        http = Http(port)
        _, _, form = http.get("/signin")
        status, _, page = http.post("/signin", {"csrf": "0" * 64, "token": TEAM_A})
        assert status == 403 and "expired" in page and "sr_session" not in http.cookies
        status, _, _ = http.post("/signin", {"csrf": csrf_of(form), "token": TEAM_A},
                                 headers={"Origin": "http://evil.example"})
        assert status == 403 and "sr_session" not in http.cookies


def test_sign_out_needs_the_sessions_csrf_token_and_ends_the_session(tmp_path):
    with _page(tmp_path) as (_, _, port, _):
        http = Http(port)
        http.sign_in(TEAM_A)
        status, _, page = http.get("/jobs")
        token = csrf_of(page)
        status, _, _ = http.post("/signout", {"csrf": "f" * 64})
        assert status == 403
        assert http.get("/jobs")[0] == 200  # still signed in
        session = http.cookies["sr_session"]
        status, headers, _ = http.post("/signout", {"csrf": token})
        assert status == 303 and headers["Location"] == "/signin"
        http.cookies["sr_session"] = session  # the old cookie replayed: the session is gone on the server
        status, headers, _ = http.get("/jobs")
        assert status == 303 and headers["Location"] == "/signin"


def test_a_team_sees_its_own_jobs_and_another_teams_job_is_the_same_404_as_an_unknown_one(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "a-job-1", client="team_a", at=1)
        _create(store, "rel-77", client="team_b", client_job_id="b-secret-job", at=2)
        _put(store, snapshot("a-job-1", 1, [episode(0)], message="a's progress"))
        _put(store, snapshot("rel-77", 1, [episode(0), episode(1)], message="b's private message"))
        a = Http(port)
        a.sign_in(TEAM_A)
        status, _, listing = a.get("/jobs")
        assert status == 200 and "a-job-1" in listing and "1/4" in listing
        assert "b-secret-job" not in listing and "rel-77" not in listing and "b&#39;s private" not in listing
        status_unknown, _, unknown = a.get("/jobs/no-such-job")
        for path in ("/jobs/b-secret-job", "/jobs/rel-77"):
            status, _, other = a.get(path)
            assert (status, other) == (status_unknown, unknown) == (404, unknown)
            status, _, other = a.get(path + "/events")
            assert (status, other) == (404, unknown)
        assert "private" not in unknown
        b = Http(port)
        b.sign_in(TEAM_B)
        status, _, page = b.get("/jobs/b-secret-job")
        assert status == 200 and "b&#39;s private message" in page and "2/4" in page


def test_the_job_page_shows_end_conditions_scores_answers_safety_stops_takeovers_and_ids_not_kept(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "j1", episodes=5)
        eps = [episode(0, count=2), episode(1, success=False, taken_over=True),
               episode(3, end="safety_stop", scored=False, detail="e-stop pressed by the operator at 12.5 s"),
               episode(4, end="infrastructure_fault", scored=False, detail="rollout node died")]
        _put(store, snapshot("j1", 7, eps, total=5, message="waiting for the safety stop to be cleared"))
        http = Http(port)
        http.sign_in(TEAM_A)
        status, _, page = http.get("/jobs/j1")
        assert status == 200
        assert '<span id="progress">4/5</span>' in page and "(80 %)" in page
        assert "stacked: <b>2</b> (2/3)" in page and "placed: <b>yes</b> (1/1) *" in page
        assert "placed: <b>no</b> (0/1)" in page
        assert "0.75" in page  # ep_0000: (1 + 2) / (1 + 3)
        assert 'id="safety-stops"' in page and "e-stop pressed by the operator at 12.5 s" in page
        assert '<dd id="taken-over">1</dd>' in page
        assert "ep_0002 (discarded by the operator or interrupted" in page
        assert "rollout node died" in page and "station fault" in page
        assert "waiting for the safety stop to be cleared" in page
        assert "mean score 0.38" in page  # (0.75 + 0.0) / 2: faults and unscored episodes left out


def test_a_station_token_shows_that_stations_queue_only(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "q1", station="sim_station", at=1)
        _create(store, "q2", station="other_station", at=2)
        _create(store, "done", station="sim_station", at=3)
        _create(store, "q4", station="sim_station", at=4)
        _put(store, snapshot("done", 3, [episode(i) for i in range(4)], state="SUCCEEDED"))
        http = Http(port)
        http.sign_in(STATION_TOKENS["sim_station"])
        status, _, page = http.get("/jobs")
        assert status == 200 and "Queue of station sim_station" in page
        assert "q1" in page and "q2" not in page and "/jobs/done" not in page
        assert page.index("/jobs/q1") < page.index("/jobs/q4")  # the queue in the order it runs: oldest first
        assert http.get("/jobs/q2")[0] == 404


def test_live_updates_arrive_as_server_sent_events_and_end_with_the_job(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "live", episodes=2)
        _put(store, snapshot("live", 1, [], total=2))
        http = Http(port)
        http.sign_in(TEAM_A)
        import threading

        def report_later():
            _put(store, snapshot("live", 2, [episode(0)], total=2))
            _put(store, snapshot("live", 3, [episode(0), episode(1)], state="SUCCEEDED", total=2))

        timer = threading.Timer(0.3, report_later)
        timer.start()
        try:
            events = read_events(port, "/jobs/live/events", http.cookies, until=lambda ev: ev[-1][0] == "end")
        finally:
            timer.cancel()
            timer.join()
        updates = [data for name, data in events if name == "update"]
        assert '<span id="progress">0/2</span>' in updates[0]
        assert '<span id="progress">2/2</span>' in updates[-1] and "SUCCEEDED" in updates[-1]
        assert events[-1] == ("end", "The job has ended: no more updates.")


def test_a_token_taken_out_of_the_token_file_ends_its_sessions(tmp_path):
    with _page(tmp_path) as (_, tokens, port, _):
        http = Http(port)
        http.sign_in(TEAM_A)
        assert http.get("/jobs")[0] == 200
        tokens.book = TokenBook({"team_a": "tok-team-a-rotated-9876543210"}, STATION_TOKENS)
        status, headers, _ = http.get("/jobs")
        assert status == 303 and headers["Location"] == "/signin"
        assert http.sign_in("tok-team-a-rotated-9876543210")[0] == 303


def test_sign_in_is_rate_limited_per_address(tmp_path):
    with _page(tmp_path) as (_, _, port, web):
        http = Http(port)
        answers = [http.sign_in("wrong-token-0123456789")[0] for _ in range(web.page.limiter.burst)]
        assert answers == [401] * web.page.limiter.burst
        status, headers, page = http.sign_in(TEAM_A)  # even the right token waits its turn
        assert status == 429 and int(headers["Retry-After"]) >= 1 and "Too many sign-in attempts" in page
        assert "sr_session" not in http.cookies


def test_a_sign_in_body_over_the_limit_is_refused_with_413(tmp_path):
    with _page(tmp_path) as (_, _, port, _):
        status, _, page = Http(port).post("/signin", {"csrf": "x", "token": "y" * (MAX_BODY_BYTES + 10)})
        assert status == 413 and f"at most {MAX_BODY_BYTES} bytes" in page


def test_an_unknown_address_or_method_answers_without_a_traceback(tmp_path):
    with _page(tmp_path) as (_, _, port, _):
        http = Http(port)
        status, _, page = http.get("/nothing/here")
        assert status == 404 and "Traceback" not in page
        status, _, page = http.request("DELETE", "/jobs")
        assert status == 405 and "Traceback" not in page
        status, headers, _ = http.get("/jobs")
        assert status == 303 and headers["Location"] == "/signin"


SECURITY_HEADERS = ("Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy",
                    "Cache-Control")


def _headers_of(port, path, cookies):
    """Return the status and headers of ``path`` (its body is not read: an event stream never ends)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())})
        response = conn.getresponse()
        return response.status, {k: response.headers[k] for k in SECURITY_HEADERS}, response.headers["Content-Type"]
    finally:
        conn.close()


def test_event_streams_downloads_and_redirects_carry_the_pages_security_headers(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "job-h")
        _put(store, snapshot("job-h", 1, [episode(0)]))
        camera_recording(tmp_path / "ep0.mcap", frames=2)
        _store_recording(store, "job-h", "ep_0000", tmp_path / "ep0.mcap")
        http = Http(port)
        http.sign_in(TEAM_A)
        status, page, _ = _headers_of(port, "/jobs", http.cookies)
        assert status == 200 and all(page.values()), page
        assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
        assert (page["X-Content-Type-Options"], page["X-Frame-Options"], page["Cache-Control"]) == (
            "nosniff", "DENY", "no-store")
        for path, kind in (("/events", "text/event-stream"), ("/jobs/job-h/events", "text/event-stream"),
                           ("/jobs/job-h/recordings/ep_0000", "application/octet-stream")):
            status, headers, content_type = _headers_of(port, path, http.cookies)
            assert status == 200 and content_type.startswith(kind), (path, content_type)
            assert headers == page, path  # the same headers as the pages, on the streams a handler starts itself
        status, headers, _ = _headers_of(port, "/jobs/job-h/recordings/ep_0000/thumbnail", http.cookies)
        assert status == 200 and headers == {**page, "Cache-Control": "private, max-age=3600"}  # its own choice
        status, headers, _ = _headers_of(port, "/jobs", {})  # a redirect to the sign-in page
        assert status == 303 and headers == page


def _until_closed(sock, timeout_s):
    """Read what the server sends until it closes the connection; None when it is still open after timeout_s."""
    import socket
    import time

    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    received = b""
    try:
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
    except (socket.timeout, TimeoutError):
        return None


@pytest.mark.parametrize("half", ["request line and part of the headers", "headers and part of the body",
                                  "nothing at all"])
def test_a_half_sent_request_is_closed_within_the_read_timeout(tmp_path, half):
    import socket
    import time

    read_timeout_s = 1.0
    with _page(tmp_path, read_timeout_s=read_timeout_s) as (_, _, port, _):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sent = time.monotonic()
            if half == "request line and part of the headers":
                sock.sendall(b"GET /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/ht")
            elif half == "headers and part of the body":
                sock.sendall(b"POST /signin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\n"
                             b"csrf=0.0.0&token=")
            # the bound: the read timeout, plus as much again for a loaded machine's scheduling
            received = _until_closed(sock, 2 * read_timeout_s + 1.0)
            waited = time.monotonic() - sent
        assert received is not None, f"still open {waited:.1f} s after {half} (read timeout {read_timeout_s} s)"
        if half == "headers and part of the body":
            assert received.startswith(b"HTTP/1.1 408 "), received[:200]
            assert b"did not arrive within 1 s" in received
        else:
            assert received == b""  # closed without an answer: no request ever arrived


def test_a_flood_of_sign_in_forms_expires_no_form_opened_before_it(tmp_path):
    import http.client
    import threading

    with _page(tmp_path) as (_, _, port, web):
        http_a = Http(port)
        _, _, form = http_a.get("/signin")  # a team opens the form, then 4 200 anonymous GET /signin arrive
        errors: list = []

        def flood(n):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                for _ in range(n):
                    conn.request("GET", "/signin")
                    response = conn.getresponse()
                    response.read()
                    if response.status != 200:
                        errors.append(response.status)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))
            finally:
                conn.close()

        threads = [threading.Thread(target=flood, args=(1050,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert errors == [] and not any(t.is_alive() for t in threads)
        status, headers, _ = http_a.post("/signin", {"csrf": csrf_of(form), "token": TEAM_A})
        assert status == 303 and headers["Location"] == "/jobs"
        assert http_a.get("/jobs")[0] == 200
        assert len(web.page.forms) == 1  # nothing was stored for the 4 201 forms; one was sent back
        # and that form served its one attempt
        http_b = Http(port)
        http_b.cookies["sr_signin"] = http_a.set_cookie_headers[0].split(";", 1)[0].split("=", 1)[1]
        status, _, page = http_b.post("/signin", {"csrf": csrf_of(form), "token": TEAM_A})
        assert status == 403 and "expired" in page


def _store_recording(store, job_id, episode_id, path, chunk_bytes=4096):
    """Put a file in the store as the relay's upload does: its row, its chunks in order, then complete."""
    import hashlib

    data = path.read_bytes()
    recording_store.begin(store, job_id, episode_id, len(data), hashlib.sha256(data).hexdigest(), path.name)
    pieces = [data[i:i + chunk_bytes] for i in range(0, len(data), chunk_bytes)]
    for seq, piece in enumerate(pieces):
        recording_store.put_chunk(store, job_id, episode_id, seq, piece)
    recording_store.finish(store, job_id, episode_id, len(pieces))
    return data


def test_a_recording_downloads_whole_with_its_first_camera_frame_as_thumbnail_and_never_for_another_team(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "rec", client="team_a")
        _create(store, "rel-9", client="team_b", client_job_id="b-rec")
        _put(store, snapshot("rec", 1, [episode(0), episode(1)]))
        _put(store, snapshot("rel-9", 1, [episode(0)]))
        first = camera_recording(tmp_path / "ep0.mcap", frames=3, padding_messages=200)
        data = _store_recording(store, "rec", "ep_0000", tmp_path / "ep0.mcap")
        _store_recording(store, "rel-9", "ep_0000", tmp_path / "ep0.mcap")
        a = Http(port)
        a.sign_in(TEAM_A)
        status, _, page = a.get("/jobs/rec")
        assert status == 200
        assert 'href="/jobs/rec/recordings/ep_0000"' in page and 'src="/jobs/rec/recordings/ep_0000/thumbnail"' in page
        assert "/recordings/ep_0001" not in page  # no recording of ep_0001: no link
        conn_status, headers, _ = a.get("/jobs/rec/recordings/ep_0000")
        assert conn_status == 200 and int(headers["Content-Length"]) == len(data)
        assert headers["Content-Disposition"] == 'attachment; filename="ep0.mcap"'
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/jobs/rec/recordings/ep_0000/thumbnail",
                     headers={"Cookie": f"sr_session={a.cookies['sr_session']}"})
        thumb = conn.getresponse()
        body = thumb.read()
        conn.close()
        assert thumb.status == 200 and thumb.headers["Content-Type"] == "image/jpeg" and body == first
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/jobs/rec/recordings/ep_0000", headers={"Cookie": f"sr_session={a.cookies['sr_session']}"})
        assert conn.getresponse().read() == data  # the bytes, whole
        conn.close()
        _, _, unknown = a.get("/jobs/nothing")
        for path in ("/jobs/b-rec/recordings/ep_0000", "/jobs/rel-9/recordings/ep_0000",
                     "/jobs/b-rec/recordings/ep_0000/thumbnail", "/jobs/rec/recordings/ep_0001"):
            assert a.get(path)[::2] == (404, unknown), path


def test_a_recording_whose_chunk_the_store_lost_is_cut_off_not_served_complete(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "lost")
        _put(store, snapshot("lost", 1, [episode(0)]))
        camera_recording(tmp_path / "ep0.mcap", frames=20)
        data = _store_recording(store, "lost", "ep_0000", tmp_path / "ep0.mcap", chunk_bytes=1024)
        store.run_sql("DELETE FROM recording_chunks WHERE job_id = {p} AND seq = {p}", ("lost", 2))
        http_client = Http(port)
        http_client.sign_in(TEAM_A)
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/jobs/lost/recordings/ep_0000",
                     headers={"Cookie": f"sr_session={http_client.cookies['sr_session']}"})
        response = conn.getresponse()
        assert response.status == 200 and int(response.headers["Content-Length"]) == len(data)
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
        assert len(cut.value.partial) == 2 * 1024  # the two chunks before the lost one, then the connection closed
        conn.close()


def test_the_job_list_updates_live_when_a_snapshot_or_a_new_job_arrives(tmp_path):
    with _page(tmp_path) as (store, _, port, _):
        _create(store, "first", at=1)
        http = Http(port)
        http.sign_in(TEAM_A)
        import threading

        def later():
            _put(store, snapshot("first", 1, [episode(0), episode(1)]))
            _create(store, "second", at=2)

        timer = threading.Timer(0.3, later)
        timer.start()
        try:
            events = read_events(port, "/events", http.cookies,
                                 until=lambda ev: "second" in ev[-1][1] and "2/4" in ev[-1][1])
        finally:
            timer.cancel()
            timer.join()
        assert 'class="count">0/4</span>' in events[0][1] and "second" not in events[0][1]
        assert all(name == "update" for name, _ in events)


def test_two_pages_on_one_postgresql_store_show_the_same_jobs_live_and_keep_teams_apart(tmp_path):
    with postgres_server() as url:
        writer, store_a, store_b = PostgresStore(url), PostgresStore(url), PostgresStore(url)
        web_a = WebStatusServer(store_a, Tokens(), "127.0.0.1:0", poll_s=0.05)
        web_b = WebStatusServer(store_b, Tokens(), "127.0.0.1:0", poll_s=0.05)
        try:
            port_a, port_b = web_a.start(), web_b.start()
            _create(writer, "shared", client="team_a", episodes=3, at=1)
            _create(writer, "rel-b", client="team_b", client_job_id="b-only", at=2)
            _put(writer, snapshot("shared", 1, [episode(0)], total=3))
            a, b = Http(port_a), Http(port_b)
            a.sign_in(TEAM_A)
            b.sign_in(TEAM_A)
            for http in (a, b):
                status, _, page = http.get("/jobs/shared")
                assert status == 200 and '<span id="progress">1/3</span>' in page
                status, _, listing = http.get("/jobs")
                assert "shared" in listing and "b-only" not in listing
                assert http.get("/jobs/b-only")[0] == 404
            import threading

            timer = threading.Timer(0.3, lambda: _put(writer, snapshot("shared", 2, [episode(0), episode(1)], total=3)))
            timer.start()
            try:
                events = read_events(port_b, "/jobs/shared/events", b.cookies,
                                     until=lambda ev: '<span id="progress">2/3</span>' in ev[-1][1])
            finally:
                timer.cancel()
                timer.join()
            assert '<span id="progress">1/3</span>' in events[0][1]
            stranger = Http(port_a)  # page B's session cookie means nothing to page A (sessions are per process)
            stranger.cookies = dict(b.cookies)
            assert stranger.get("/jobs/shared")[0] == 303
        finally:
            web_a.stop()
            web_b.stop()
            for store in (writer, store_a, store_b):
                store.close()


def test_with_the_relays_certificate_the_page_is_https_and_its_cookies_are_secure(tmp_path):
    import http.client
    import ssl

    cert, key = self_signed_cert(tmp_path)
    store = SqliteStore(str(tmp_path / "relay.db"))
    web = WebStatusServer(store, Tokens(), "127.0.0.1:0", tls=(str(cert), str(key)))
    try:
        port = web.start()
        assert web.url == f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(cert))
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        conn.request("GET", "/signin")
        response = conn.getresponse()
        response.read()
        conn.close()
        cookie = response.headers["Set-Cookie"]
        assert response.status == 200 and "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # no plaintext beside it
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            plain.request("GET", "/signin")
            plain.getresponse().read()
        plain.close()
    finally:
        web.stop()
        store.close()
