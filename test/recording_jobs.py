"""What the station-recording system tests share: a short yes/no task and a bounded wait that shows the log."""

from __future__ import annotations

import time

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def recording_task(task_id: str) -> dict:
    """Return a one-second 50 Hz task scored by one yes/no item, as a job's task mapping."""
    return {"task_id": task_id, "instruction": f"instruction of {task_id}",
            "parameters": {"duration_s": "1", "control_frequency": "50"},
            "scoring": [{"name": "done", "question": "Done?", "answer_type": "yes_no", "max_points": 1,
                         "success_answer": "yes"}]}


def wait_for(predicate, timeout_s: float, what: str, lines: list):
    """Return the first truthy ``predicate()`` within ``timeout_s``; otherwise fail with the last log lines."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n" + "\n".join(lines[-60:]))
