"""``submit_job`` retried after a lost answer never makes a second job (the client chooses the job id).

The relay runs as a process of its own; the client reaches it through a TCP proxy on loopback that, on its first
connection, passes the relay's HTTP/2 connection frames (SETTINGS, PING, WINDOW_UPDATE) but withholds the
answer (HEADERS, DATA). The relay has stored the job; the client never hears so. Either the connection is cut
(the call fails UNAVAILABLE, as when the network drops) or the call runs out of time (DEADLINE_EXCEEDED; the
proxy then cuts the connection when the client resets the call, so the retry finds a working one). Either way
the client sends the same job again and gets the one job back.
"""

from __future__ import annotations

import logging
import re
import socket
import threading

import pytest

pytest.importorskip("grpc", reason="grpcio is not installed")

from test_relay_harness import (  # noqa: E402
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    start_relay_process,
    stop_process,
    wait_until,
    write_tokens,
    yes_no_task,
)

from strands_robots.client import EvaluationClient  # noqa: E402
from strands_robots.client.evaluation_client import new_job_id  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402

_CONNECTION_FRAMES = {0x4, 0x6, 0x8}  # SETTINGS, PING, WINDOW_UPDATE: not an answer to any call
_RST_STREAM = 0x3
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frames(sock: socket.socket, skip: bytes = b""):
    """Yield the HTTP/2 frames read from ``sock`` (after ``skip``, the client's connection preface)."""
    buffer = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return
        buffer += data
        if skip:
            if len(buffer) < len(skip):
                continue
            yield buffer[:len(skip)]
            buffer, skip = buffer[len(skip):], b""
        while len(buffer) >= 9:
            length = int.from_bytes(buffer[:3], "big")
            if len(buffer) < 9 + length:
                break
            frame, buffer = buffer[:9 + length], buffer[9 + length:]
            yield frame


class AnswerDroppingProxy:
    """Forward loopback TCP to ``upstream``; on the first connection withhold the relay's answers until cut."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self.client_resets = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self.withheld_frames = 0
        self.connections = 0
        self._first: list = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                down, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            up = socket.create_connection(self._upstream, timeout=10)
            first = self.connections == 0
            self.connections += 1
            if first:
                self._first = [down, up]
            pipes = ((self._requests, (down, up)), (self._answers, (up, down))) if first else (
                (self._pipe, (down, up)), (self._pipe, (up, down)))
            for target, args in pipes:
                t = threading.Thread(target=target, args=args, daemon=True)
                t.start()
                self._threads.append(t)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _answers(self, up: socket.socket, down: socket.socket) -> None:
        """Pass the relay's connection frames, withhold every frame of a call (its answer)."""
        try:
            for frame in _frames(up):
                if frame[3] in _CONNECTION_FRAMES:
                    down.sendall(frame)
                else:
                    self.withheld_frames += 1
        except OSError:
            pass

    def _requests(self, down: socket.socket, up: socket.socket) -> None:
        """Pass the client's frames; once it resets a call (its deadline passed), cut the connection."""
        try:
            for frame in _frames(down, skip=_PREFACE):
                up.sendall(frame)
                if frame[3:4] == bytes([_RST_STREAM]) and frame != _PREFACE:
                    self.client_resets += 1
                    self.cut_first()
                    return
        except OSError:
            pass

    def cut_first(self) -> None:
        """Cut the first connection (the client sees it drop without an answer)."""
        for s in self._first:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._stop.set()
        self.cut_first()
        self._sock.close()
        for t in self._threads:
            t.join(5.0)


@pytest.mark.parametrize("lost", ["connection_cut", "deadline_passed"])
def test_a_submit_whose_answer_is_lost_is_retried_with_the_same_id_and_makes_one_job(tmp_path, caplog, lost):
    caplog.set_level(logging.WARNING, logger="strands_robots.client")
    port = free_port()
    relay = start_relay_process(port, f"sqlite:{tmp_path / 'relay.db'}", write_tokens(tmp_path))
    proxy = AnswerDroppingProxy(port)
    seen: list = []
    link = StationLink(f"127.0.0.1:{port}", "sim_station", STATION_TOKENS["sim_station"], on_job=seen.append,
                       heartbeat_s=0.2).start()
    client = EvaluationClient(f"127.0.0.1:{proxy.port}", token=CLIENT_TOKENS["team_a"],
                              timeout_s=60 if lost == "connection_cut" else 3)
    out: dict = {}
    try:
        def submit() -> None:
            try:
                out["job_id"] = client.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
            except Exception as exc:
                out["error"] = exc

        thread = threading.Thread(target=submit, daemon=True)
        thread.start()
        wait_until(lambda: seen, timeout_s=30, what="the relay to store the job")
        if lost == "connection_cut":
            assert proxy.withheld_frames > 0 and "job_id" not in out  # the client has not had its answer
            proxy.cut_first()
        thread.join(60)
        assert not thread.is_alive() and "error" not in out, out
        # One more job, submitted after: the station sees it right behind the first, and nothing between.
        with EvaluationClient(f"127.0.0.1:{port}", token=CLIENT_TOKENS["team_a"]) as direct:
            sentinel = direct.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=1)
        wait_until(lambda: len(seen) >= 2, timeout_s=30, what="the sentinel job")
    finally:
        client.close()
        link.close()
        proxy.close()
        stop_process(relay)
    assert re.fullmatch(r"job-[0-9a-f]{16}", out["job_id"])
    assert [job.job_id for job in seen] == [out["job_id"], sentinel]
    assert proxy.connections >= 2  # the retry went over a new connection
    retries = [r.getMessage() for r in caplog.records if "sending the same job again" in r.getMessage()]
    expected = "Unavailable" if lost == "connection_cut" else "DeadlineExceeded"
    assert len(retries) == 1 and out["job_id"] in retries[0] and expected in retries[0], retries


def test_the_client_chooses_a_fresh_job_id_in_the_relays_form():
    ids = {new_job_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(re.fullmatch(r"job-[0-9a-f]{16}", i) for i in ids)
