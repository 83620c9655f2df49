"""Credentials come from private start-time files; free text is bounded where it enters.

A credential file is yours (or root's), 0600, in a directory only you may change, a regular file, bounded.
"""

from __future__ import annotations

import os

import pytest

from strands_robots.client.credential_files import (
    MAX_CERTIFICATE_FILE_BYTES,
    MAX_SECRET_FILE_BYTES,
    MAX_TOKENS_FILE_BYTES,
    CredentialFileError,
    read_trusted_file,
)
from strands_robots.relay.auth import TokenBook, TokenFileError
from strands_robots.wire.credentials import CredentialsError, load_relay_credentials, read_secret
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


# -- who owns a credential file, where it lives, what it is, how large it is ---------------------------------------
NOBODY = 65534  # an account that is neither the test's user nor root


def _needs_root_to_chown():
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root (chown)")


def _station_files(directory, token_mode=0o600):
    _write(directory / "station.token", "s3cret-token\n", token_mode)
    return _write(directory / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken_file: station.token\n")


def test_a_0600_credential_file_owned_by_another_user_is_refused_naming_the_owner(tmp_path):
    _needs_root_to_chown()
    token = _write(tmp_path / "station.token", "s3cret-token\n")
    os.chown(token, NOBODY, NOBODY)
    with pytest.raises(CredentialsError) as err:
        read_secret(token)
    assert str(err.value).startswith(f"token file '{token}' is refused: it is owned by uid {NOBODY}")
    assert "not by you (uid 0" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(CredentialsError, match=f"owned by uid {NOBODY}"):  # named by a credentials file too
        load_relay_credentials(_write(tmp_path / "relay.yaml",
                                      "target: 127.0.0.1:1\nstation_id: s\ntoken_file: station.token\n"))
    os.chown(token, 0, 0)  # root's is as good as yours
    assert read_secret(token) == "s3cret-token"
    tokens = _write(tmp_path / "tokens.yaml", "clients:\n  team_a: tok-team-a-0123456789\n")
    os.chown(tokens, NOBODY, NOBODY)
    with pytest.raises(TokenFileError, match=rf"^tokens file '{tokens}' is refused: it is owned by uid {NOBODY}"):
        TokenBook.from_file(tokens)


def test_a_credential_file_in_a_directory_others_may_write_is_refused_unless_the_sticky_bit_protects_it(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    creds = _station_files(shared)
    for mode in (0o777, 0o775, 0o757):
        os.chmod(shared, mode)
        with pytest.raises(CredentialsError) as err:
            load_relay_credentials(creds)
        assert str(err.value) == (
            f"credentials file '{creds}' is refused: its directory '{shared}' has mode {mode:04o}: group or others "
            f"may write it and it has no sticky bit, so another user could replace the file; chmod go-w "
            f"'{shared}' (or keep the file in a private directory)")
    os.chmod(shared, 0o1777)  # as /tmp: others may add files, not rename or delete this one
    assert load_relay_credentials(creds).token == "s3cret-token"
    # The rule holds for every directory up to /, and for the real place of a symlinked file.
    inner = tmp_path / "open" / "inner"
    inner.mkdir(parents=True)
    creds = _write(inner / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken: s3cret-token\n")
    os.chmod(tmp_path / "open", 0o777)
    link = _write(tmp_path / "elsewhere.yaml", "", 0o600)
    link.unlink()
    link.symlink_to(creds)
    for path in (creds, link):
        with pytest.raises(CredentialsError, match=rf"its directory '{tmp_path / 'open'}' has mode 0777"):
            load_relay_credentials(path)
    os.chmod(tmp_path / "open", 0o755)
    assert load_relay_credentials(link).station_id == "s"


def test_a_credential_directory_owned_by_another_user_is_refused(tmp_path):
    _needs_root_to_chown()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    creds = _station_files(theirs)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(CredentialsError, match=rf"its directory '{theirs}' is owned by uid {NOBODY}"):
        load_relay_credentials(creds)


def test_a_directory_named_as_a_credential_file_is_refused_as_not_a_regular_file(tmp_path):
    # (/dev/zero and a FIFO, which a regression would read for ever, are tested in a limited child process:
    # test_relay_auth.py's test_root_certificates_of_dev_zero_or_a_fifo_are_refused_not_read)
    target = tmp_path / "ca.pem"
    target.mkdir()
    creds = _write(tmp_path / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken: t\nroot_certificates: ca.pem\n")
    with pytest.raises(CredentialsError) as err:
        load_relay_credentials(creds)
    assert str(err.value) == (f"credentials file '{creds}': root_certificates '{target}' is refused: not a regular "
                              f"file (a device, FIFO or directory could never end or change under the reader)")
    with pytest.raises(CredentialFileError, match="not a regular file"):
        read_trusted_file(target)
    with pytest.raises(CredentialsError, match="not a regular file"):
        read_secret(target)


def test_every_credential_file_is_read_only_up_to_its_bound_and_refused_above_it(tmp_path):
    token = _write(tmp_path / "station.token", "t" * MAX_SECRET_FILE_BYTES)
    assert read_secret(token) == "t" * MAX_SECRET_FILE_BYTES  # at the bound: read whole
    _write(token, "t" * (MAX_SECRET_FILE_BYTES + 1))
    with pytest.raises(CredentialsError) as err:
        read_secret(token)
    assert str(err.value) == (f"token file '{token}' is refused: it is {MAX_SECRET_FILE_BYTES + 1} bytes, more than "
                              f"the {MAX_SECRET_FILE_BYTES} a token file may hold")
    tokens = _write(tmp_path / "tokens.yaml", "#" * (MAX_TOKENS_FILE_BYTES + 1))
    with pytest.raises(TokenFileError, match=f"more than the {MAX_TOKENS_FILE_BYTES} a tokens file may hold"):
        TokenBook.from_file(tokens)
    ca = _write(tmp_path / "ca.pem", "-" * (MAX_CERTIFICATE_FILE_BYTES + 1), 0o644)
    with pytest.raises(CredentialFileError, match=f"more than the {MAX_CERTIFICATE_FILE_BYTES} a root_certificates"):
        read_trusted_file(ca)
    creds = _write(tmp_path / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken: t\n" + "#" * 70000)
    with pytest.raises(CredentialsError, match=f"more than the {MAX_SECRET_FILE_BYTES} a credentials file"):
        load_relay_credentials(creds)


def test_root_certificates_others_may_read_are_accepted_but_not_ones_they_may_write(tmp_path):
    ca = _write(tmp_path / "ca.pem", "-----BEGIN CERTIFICATE-----\n", 0o644)
    creds = _write(tmp_path / "relay.yaml", "target: 127.0.0.1:1\nstation_id: s\ntoken: t\nroot_certificates: ca.pem\n")
    assert load_relay_credentials(creds).root_certificates == b"-----BEGIN CERTIFICATE-----\n"
    os.chmod(ca, 0o664)
    with pytest.raises(CredentialsError) as err:
        load_relay_credentials(creds)
    assert str(err.value) == (f"credentials file '{creds}': root_certificates '{ca}' has mode 0664: group or others "
                              f"may write it, and it decides whom this process trusts; chmod go-w it")
