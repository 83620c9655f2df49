"""The web status page in a real browser: headless Chromium (Debian's) driven by Selenium through chromedriver.

A relay process serves the page (``--web``); a team submits jobs with the Evaluation Client and a station reports
on them through its real relay link (``StationLink``, the station node's own client). The browser signs in,
watches the job's progress change with no reload (a marker variable the test set survives, and the document's
``timeOrigin`` is unchanged), cannot open another team's job by its URL (the same 404 as an unknown job), and is
refused with a bad token. It saves a screenshot (``web_status_page.png`` in the test's directory, and in
``$STRANDS_SCREENSHOT_DIR`` when set).

Skips with the reason where Chromium, chromedriver or Selenium is missing (``scripts/system_deps.sh`` installs
``chromium chromium-driver`` as root; Selenium is in requirements/python.txt).
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the web status page needs aiohttp (requirements/python.txt)")
webdriver = pytest.importorskip("selenium.webdriver", reason="Selenium is not installed (requirements/python.txt)")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402
from test_relay_harness import (  # noqa: E402
    CLIENT_TOKENS,
    STATION_TOKENS,
    free_port,
    start_relay_process,
    stop_process,
    write_tokens,
    yes_no_task,
)
from web_helpers import CHROMEDRIVER, CHROMIUM, camera_recording, episode, headless_chromium, snapshot  # noqa: E402
from comparison_message import comparison_message, seeded_outcomes  # noqa: E402

from strands_robots.client import EvaluationClient, pb  # noqa: E402
from strands_robots.stats.sequential import StopRule  # noqa: E402
from strands_robots.station_link.link import StationLink  # noqa: E402

pytestmark = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                reason="Chromium or chromedriver is missing (apt-get install -y chromium "
                                       "chromium-driver; scripts/system_deps.sh does it as root)")


def _wait_listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def _browser(tmp_path: Path):
    return headless_chromium(tmp_path)


def _text(driver, element_id: str) -> str:
    """Read an element's text in one script call (an update may replace the element between two WebDriver calls)."""
    value = driver.execute_script("var e = document.getElementById(arguments[0]); return e ? e.textContent : '';",
                                  element_id)
    return " ".join(str(value).split())


def test_the_status_page_in_chromium_live_updates_without_reload_and_refuses_other_teams_and_bad_tokens(tmp_path):
    tokens = write_tokens(tmp_path)
    relay_port, web_port = free_port(), free_port()
    relay = driver = link = None
    try:
        relay = start_relay_process(relay_port, f"sqlite:{tmp_path / 'relay.db'}", tokens,
                                    "--web", f"127.0.0.1:{web_port}", "--poll-s", "0.1")
        _wait_listening(web_port)
        target, base = f"127.0.0.1:{relay_port}", f"http://127.0.0.1:{web_port}"
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"]) as team_a, \
                EvaluationClient(target, token=CLIENT_TOKENS["team_b"]) as team_b:
            job = team_a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=5,
                                    job_id="pick-nightly-1")
            team_b.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=2, job_id="b-private-run")
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.5).start()
        link.report(snapshot(job, 1, [], total=5, message="episode ep_0000 running"))
        assert link.flush(15), "the station's first snapshot was not delivered"

        driver = _browser(tmp_path)
        driver.set_page_load_timeout(30)
        wait = WebDriverWait(driver, 20)

        # a bad token: refused, nobody signed in
        driver.get(base + "/signin")
        driver.find_element(By.ID, "token").send_keys("not-a-token-of-this-relay")
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: "not a token this relay knows" in _text(d, "refusal"))
        driver.get(base + "/jobs")
        assert driver.current_url.endswith("/signin"), driver.current_url

        # the team's token: its jobs
        driver.find_element(By.ID, "token").send_keys(CLIENT_TOKENS["team_a"])
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: d.current_url.endswith("/jobs"))
        listing = driver.find_element(By.TAG_NAME, "main").text
        assert "pick-nightly-1" in listing and "b-private-run" not in listing

        # the job's page, then the station reports: the values change in place, the page is not reloaded
        driver.get(f"{base}/jobs/{job}")
        wait.until(lambda d: _text(d, "progress") == "0/5")
        driver.execute_script("window.__strands_marker = 'set-before-the-update';")
        origin = driver.execute_script("return performance.timeOrigin;")
        link.report(snapshot(job, 2, [episode(0, count=2)], total=5, message="episode ep_0001 running"))
        assert link.flush(15)
        wait.until(lambda d: _text(d, "progress") == "1/5")
        assert driver.execute_script("return window.__strands_marker;") == "set-before-the-update"
        assert driver.execute_script("return performance.timeOrigin;") == origin
        assert _text(driver, "state") == "RUNNING" and _text(driver, "message") == "episode ep_0001 running"

        eps = [episode(0, count=2), episode(1, success=False, taken_over=True),
               episode(3, end="safety_stop", scored=False,
                       detail="safety stop: emergency stop pressed on the arm at 12.4 s; cleared by operator alice")]
        link.report(snapshot(job, 3, eps, total=5, message="ep_0002 discarded by the operator; task 'pick' runs "
                                                           "again as ep_0004"))
        assert link.flush(15)
        wait.until(lambda d: _text(d, "progress") == "3/5")
        assert driver.execute_script("return window.__strands_marker;") == "set-before-the-update"
        assert driver.execute_script("return performance.timeOrigin;") == origin
        assert "emergency stop pressed" in _text(driver, "safety-stops")
        assert _text(driver, "taken-over") == "1" and _text(driver, "not-kept").startswith("ep_0002")
        assert int(driver.find_element(By.ID, "live").get_attribute("data-updates")) >= 3

        # the station uploads ep_0000's recording: its link and camera thumbnail appear, still without a reload
        camera_recording(tmp_path / "episode_0000.mcap", frames=5, padding_messages=50)
        link.upload_recording(job, "ep_0000", tmp_path / "episode_0000.mcap")
        thumb = "img.thumb[src$='/recordings/ep_0000/thumbnail']"
        wait.until(lambda d: d.execute_script(f"var i = document.querySelector(\"{thumb}\"); "
                                              "return i !== null && i.complete && i.naturalWidth === 160;"))
        assert driver.execute_script("return document.querySelector('a.recording').getAttribute('href');") == \
            f"/jobs/{job}/recordings/ep_0000"
        assert driver.execute_script("return window.__strands_marker;") == "set-before-the-update"
        assert driver.execute_script("return performance.timeOrigin;") == origin
        shot = tmp_path / "web_status_page.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        out = os.environ.get("STRANDS_SCREENSHOT_DIR")
        if out:
            shutil.copyfile(shot, Path(out) / "web_status_page.png")

        # another team's job by its URL: the same 404 as a job that does not exist
        driver.get(f"{base}/jobs/b-private-run")
        other = driver.find_element(By.TAG_NAME, "main").text
        driver.get(f"{base}/jobs/no-such-job")
        unknown = driver.find_element(By.TAG_NAME, "main").text
        assert other == unknown and "Not found" in other and "b-private-run" not in other
    finally:
        if driver is not None:
            driver.quit()
        if link is not None:
            link.close()
        stop_process(relay)


def _comparison_snapshot(job_id, seq, state, revealed):
    status = pb.JobStatus(job_id=job_id, station_id="sim_station", state=state, episodes_total=120,
                          updated_unix_ms=1_800_000_000_000 + seq, sequence=seq, message=f"{state} #{seq}")
    outcomes = seeded_outcomes(0.9, 0.3, 60, seed=1)
    status.comparison.CopyFrom(comparison_message(outcomes[:8] if not revealed else outcomes, revealed=revealed,
                                                  rule=StopRule(max_blocks=60), slots=("vision", "blind_arm")))
    return status


def test_a_comparison_page_reveals_its_verdict_live_and_the_leaderboard_ranks_the_teams_policies(tmp_path):
    tokens = write_tokens(tmp_path)
    relay_port, web_port = free_port(), free_port()
    relay = driver = link = None
    try:
        relay = start_relay_process(relay_port, f"sqlite:{tmp_path / 'relay.db'}", tokens,
                                    "--web", f"127.0.0.1:{web_port}", "--poll-s", "0.1")
        _wait_listening(web_port)
        target, base = f"127.0.0.1:{relay_port}", f"http://127.0.0.1:{web_port}"
        with EvaluationClient(target, token=CLIENT_TOKENS["team_a"]) as team_a:
            job = team_a.submit_job(station_id="sim_station", tasks=[yes_no_task()], episodes=120, job_id="ab-demo")
        link = StationLink(target, "sim_station", STATION_TOKENS["sim_station"], heartbeat_s=0.5).start()
        link.report(_comparison_snapshot(job, 1, "RUNNING", revealed=False))
        assert link.flush(15), "the station's first snapshot was not delivered"

        driver = _browser(tmp_path)
        driver.set_page_load_timeout(30)
        wait = WebDriverWait(driver, 20)
        driver.get(base + "/signin")
        driver.find_element(By.ID, "token").send_keys(CLIENT_TOKENS["team_a"])
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: d.current_url.endswith("/jobs"))

        driver.get(f"{base}/jobs/{job}")
        wait.until(lambda d: _text(d, "comparison-blocks") == "8")
        assert "labels are blind" in _text(driver, "comparison-head")
        assert "vision" not in _text(driver, "comparison")
        assert _text(driver, "comparison-verdict").startswith("undecided")
        driver.execute_script("window.__strands_marker = 'set-before-the-end';")

        link.report(_comparison_snapshot(job, 2, "SUCCEEDED", revealed=True))
        assert link.flush(15)
        wait.until(lambda d: _text(d, "comparison-verdict").startswith("a_better"))
        assert driver.execute_script("return window.__strands_marker;") == "set-before-the-end"
        assert "vision" in _text(driver, "comparison-slots") and "Newcombe" in _text(driver, "comparison-pairs")
        assert driver.execute_script("return document.querySelectorAll('#comparison-slots svg.bar line').length;") == 6
        shot = tmp_path / "web_comparison_page.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000

        driver.find_element(By.ID, "nav-leaderboard").click()
        wait.until(lambda d: "demo" in _text(d, "leaderboard-suites"))
        driver.find_element(By.LINK_TEXT, "demo").click()
        wait.until(lambda d: _text(d, "leaderboard-suite") == "demo")
        ranked = driver.execute_script("return Array.from(document.querySelectorAll('#leaderboard tbody tr'))"
                                       ".map(r => r.id);")
        assert ranked == ["policy-vision", "policy-blind_arm"]
        shot = tmp_path / "web_leaderboard_page.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 5_000
        out = os.environ.get("STRANDS_SCREENSHOT_DIR")
        if out:
            for name in ("web_comparison_page.png", "web_leaderboard_page.png"):
                shutil.copyfile(tmp_path / name, Path(out) / name)

        driver.find_element(By.ID, "signout").click()
        wait.until(lambda d: d.current_url.endswith("/signin"))
        driver.find_element(By.ID, "token").send_keys(CLIENT_TOKENS["team_b"])
        driver.find_element(By.ID, "signin").click()
        wait.until(lambda d: d.current_url.endswith("/jobs"))
        driver.get(base + "/leaderboard/demo")
        wait.until(lambda d: _text(d, "leaderboard-suite") == "demo")
        assert "vision" not in driver.find_element(By.TAG_NAME, "main").text  # team a's policies stay hidden
    finally:
        if driver is not None:
            driver.quit()
        if link is not None:
            link.close()
        stop_process(relay)
