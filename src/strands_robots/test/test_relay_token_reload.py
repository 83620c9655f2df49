"""ReloadingTokenBook: the tokens file re-read on request and on change; a bad file keeps the tokens in use."""

from __future__ import annotations

import os

import pytest

from strands_robots.relay.auth import KIND_CLIENT, ReloadingTokenBook, TokenFileError
from test_relay_harness import wait_until

A1, A2, S = "tok-a-first-0123456789", "tok-a-second-0123456789", "tok-station-0123456789"


def _write(path, token):
    new = path.with_name("next.yaml")
    new.write_text(f"clients:\n  team_a: {token}\nstations:\n  st: {S}\n")
    new.chmod(0o600)
    os.replace(new, path)


def _who(book, token):
    result = book.authenticate([("authorization", f"Bearer {token}")], KIND_CLIENT)
    return result.principal.name if result.principal else result.reason


def test_reload_on_request_swaps_the_tokens_and_a_bad_file_keeps_them(tmp_path):
    path = tmp_path / "tokens.yaml"
    _write(path, A1)
    logged = []
    book = ReloadingTokenBook(path, check_s=0, log=logged.append)
    try:
        assert _who(book, A1) == "team_a" and book.clients == {"team_a"} and book.stations == {"st"}
        _write(path, A2)
        assert _who(book, A1) == "team_a"  # nothing re-read yet (no watch, no request)
        assert book.reload() == ""
        assert (_who(book, A2), _who(book, A1), book.reloads) == ("team_a", "unknown token", 1)
        path.write_text("clients: [1, 2]\n")
        reason = book.reload()
        assert "tokens file not reloaded, the previous tokens stay in use" in reason and str(path) in reason
        assert logged == [reason] and book.refused == 1 and _who(book, A2) == "team_a"
        path.chmod(0o644)
        _write(path, A1)
        path.chmod(0o644)
        assert "mode" in book.reload() and _who(book, A2) == "team_a"  # a readable file is refused too
    finally:
        book.close()


def test_the_watch_sees_a_file_renamed_over_the_old_one(tmp_path):
    path = tmp_path / "tokens.yaml"
    _write(path, A1)
    book = ReloadingTokenBook(path, check_s=0.05)
    try:
        _write(path, A2)
        wait_until(lambda: _who(book, A2) == "team_a", timeout_s=10, what="the watch's reload")
        assert _who(book, A1) == "unknown token" and book.reloads == 1
    finally:
        book.close()


def test_a_bad_file_at_start_is_refused_as_before(tmp_path):
    path = tmp_path / "tokens.yaml"
    path.write_text("clients: {}\n")
    path.chmod(0o600)
    with pytest.raises(TokenFileError, match="names no clients and no stations"):
        ReloadingTokenBook(path, check_s=0)
