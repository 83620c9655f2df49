"""An idempotent request asked again until one answer comes (ros/ask_again.py), with futures like rclpy's."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from strands_robots.ros.ask_again import ask_until_answered


class Service:
    """Each request gets a future; the first ``lost`` are never answered, the next ones after ``delay_s``."""

    def __init__(self, lost: int, delay_s: float = 0.01, fail: int = 0) -> None:
        self.lost, self.delay_s, self.fail = lost, delay_s, fail
        self.futures: list = []

    def send(self) -> Future:
        future: Future = Future()
        self.futures.append(future)
        n = len(self.futures)
        if n <= self.fail:
            threading.Timer(self.delay_s, future.set_exception, args=(RuntimeError("refused"),)).start()
        elif n > self.lost:
            threading.Timer(self.delay_s, future.set_result, args=(f"answer {n}",)).start()
        return future


def test_a_lost_request_is_sent_again_and_the_first_answer_is_returned():
    service = Service(lost=2)
    assert ask_until_answered(service.send, timeout_s=5.0, retry_s=0.05) == "answer 3"
    assert len(service.futures) == 3
    assert all(f.cancelled() for f in service.futures[:2])  # the unanswered ones are given up


def test_no_answer_within_the_bound_is_none_and_every_request_is_cancelled():
    service = Service(lost=10**6)
    started = time.monotonic()
    assert ask_until_answered(service.send, timeout_s=0.3, retry_s=0.05) is None
    assert time.monotonic() - started < 1.0
    assert len(service.futures) >= 5 and all(f.cancelled() for f in service.futures)


def test_a_failed_request_is_no_answer_and_is_asked_again():
    service = Service(lost=0, fail=1)
    assert ask_until_answered(service.send, timeout_s=5.0, retry_s=0.05) == "answer 2"


def test_an_answer_at_once_sends_one_request():
    service = Service(lost=0, delay_s=0.0)
    assert ask_until_answered(service.send, timeout_s=5.0, retry_s=1.0) == "answer 1"
    assert len(service.futures) == 1
