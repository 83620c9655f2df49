"""The relay's settings: config/relay.yaml and the same values as flags; the rate-limited log of refusals."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_relay_harness import write_tokens

from strands_robots.relay import server as relay_server
from strands_robots.relay.config import (
    RelayConfigError,
    RelaySettings,
    limit_argv,
    load_relay_settings,
)
from strands_robots.relay.rate_limit import RateLimitedLog, TokenBucket

CONFIG = Path(__file__).resolve().parents[1] / "config" / "relay.yaml"


def test_the_packages_relay_config_holds_every_limit_and_round_trips_through_the_relays_flags():
    settings = load_relay_settings(str(CONFIG))
    assert settings.first_message_deadline_s > 0 and settings.max_streams_per_token >= 1
    args = relay_server.build_parser(RelaySettings()).parse_args(["--tokens", "t.yaml", *limit_argv(settings)])
    again, reason = relay_server._settings_from_args(args, RelaySettings())
    assert reason == ""
    assert again == settings


@pytest.mark.parametrize("body, reason", [
    ("relay:\n  max_streams_per_token: 0\n", "relay: max_streams_per_token: must be >= 1, got 0"),
    ("relay:\n  first_message_deadline_s: -1\n", "relay: first_message_deadline_s: must be greater than 0"),
    ("relay:\n  keepalive_time_s: .inf\n", "relay: keepalive_time_s: expected a float, got a float inf"),
    ("relay:\n  max_open_jobs: 3\n", "relay: unknown key 'max_open_jobs' (known: host, port"),
])
def test_a_bad_limit_is_refused_naming_the_key_and_the_reason(tmp_path, body, reason):
    path = tmp_path / "relay.yaml"
    path.write_text(body)
    with pytest.raises(RelayConfigError) as err:
        load_relay_settings(str(path))
    assert reason in str(err.value)
    assert str(path) in str(err.value)


def test_relay_command_reads_its_config_and_a_flag_beside_it_wins(tmp_path, capsys):
    tokens = write_tokens(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("relay:\n  max_streams_per_token: 0\n")
    assert relay_server.main(["--config", str(bad), "--tokens", str(tokens)]) == 2
    assert "max_streams_per_token: must be >= 1, got 0" in capsys.readouterr().err
    good = tmp_path / "good.yaml"
    good.write_text("relay:\n  max_streams_per_token: 7\n  first_message_deadline_s: 2.5\n")
    base = load_relay_settings(str(good))
    args = relay_server.build_parser(base).parse_args(["--tokens", str(tokens), "--max-streams-per-token", "9"])
    settings, reason = relay_server._settings_from_args(args, base)
    assert (reason, settings.max_streams_per_token, settings.first_message_deadline_s) == ("", 9, 2.5)
    assert relay_server.main(["--tokens", str(tokens), "--max-streams-per-token", "0",
                              "--store", f"sqlite:{tmp_path / 'r.db'}"]) == 2
    assert "--max-streams-per-token: must be >= 1, got 0" in capsys.readouterr().err


def test_token_bucket_allows_its_burst_then_its_rate():
    now = [0.0]
    bucket = TokenBucket(rate_per_s=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] = 0.5  # one token back
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] = 100.0  # never more than the burst saved up
    assert sum(bucket.take() for _ in range(10)) == 3


def test_rate_limited_log_writes_one_line_each_until_the_bucket_is_empty_and_then_counts(caplog):
    now = [0.0]
    log = RateLimitedLog(logging.getLogger("test.relay.refusals"), rate_per_s=1.0, burst=2, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.relay.refusals"):
        written = [log.warning(f"refused call {i}\nsecond line") for i in range(5)]
        now[0] = 1.0
        log.warning("refused call 5")
        log.warning("refused call 6")
        log.flush()
    assert written == [True, True, False, False, False]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused call 0 second line", "refused call 1 second line",
                     "refused call 5 (3 similar line(s) dropped by the log's rate limit)",
                     "1 similar line(s) dropped by the log's rate limit"]
    assert log.dropped_total == 4
