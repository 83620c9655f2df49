"""Relay credentials come from a private start-time file; free text is bounded where it enters."""

from __future__ import annotations

import os

import pytest

from strands_robots.relay.credentials import CredentialsError, load_relay_credentials, read_secret
from strands_robots.station.limits import TextTooLong, check_text, cut


def _write(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_credentials_file_readable_by_others_is_refused_naming_file_and_mode(tmp_path):
    f = _write(tmp_path / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken: t\n", 0o644)
    with pytest.raises(CredentialsError) as err:
        load_relay_credentials(f)
    assert "0644" in str(err.value) and str(f) in str(err.value)
    assert "\n" not in str(err.value)


def test_credentials_read_token_from_private_token_file_and_hide_it_in_repr(tmp_path):
    _write(tmp_path / "station.token", "s3cret-token\n")
    f = _write(tmp_path / "relay.yaml",
               "target: [127.0.0.1:1, 127.0.0.1:2]\nstation_id: s\ntoken_file: station.token\n")
    creds = load_relay_credentials(f)
    assert creds.token == "s3cret-token"
    assert creds.targets == ("127.0.0.1:1", "127.0.0.1:2") and creds.target == "127.0.0.1:1"
    assert "s3cret" not in repr(creds)


def test_token_file_readable_by_group_is_refused(tmp_path):
    _write(tmp_path / "station.token", "s3cret\n", 0o640)
    f = _write(tmp_path / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken_file: station.token\n")
    with pytest.raises(CredentialsError, match="0640"):
        load_relay_credentials(f)
    with pytest.raises(CredentialsError, match="0640"):
        read_secret(tmp_path / "station.token")


@pytest.mark.parametrize("text, reason", [
    ("target: 127.0.0.1:1\nstation_id: s\n", "exactly one of token and token_file"),
    ("target: nohostport\nstation_id: s\ntoken: t\n", "host:port"),
    ("target: 127.0.0.1:1\nstation_id: s\ntoken: t\nrelay_token_path: /etc/hostname\n", "unknown key"),
    ("- a\n- b\n", "expected a mapping"),
])
def test_malformed_credentials_are_one_line_errors(tmp_path, text, reason):
    f = _write(tmp_path / "relay.yaml", text)
    with pytest.raises(CredentialsError, match=reason) as err:
        load_relay_credentials(f)
    assert "\n" not in str(err.value)


def test_text_over_its_limit_is_refused_with_its_length_and_limit():
    assert check_text("x" * 10, 10, "reason") == "x" * 10
    with pytest.raises(TextTooLong, match="reason is 11 characters long; at most 10"):
        check_text("x" * 11, 10, "reason")


def test_cut_text_fits_its_limit_and_says_how_much_was_cut():
    long = "y" * (16 * 1024 * 1024)
    out = cut(long, 2048)
    assert len(out) <= 2048
    assert out.startswith("y" * 1000)
    kept = len(out) - len(out[out.index(" [..."):])
    assert f"{len(long) - kept} characters cut" in out
    assert cut("short", 2048) == "short"
