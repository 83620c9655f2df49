"""A plaintext relay on a non-loopback address says so loudly at start; relay.launch.py takes the CLI's TLS files.

The relay's command runs as its own process. No test listens beyond loopback: the non-loopback case uses an
address of TEST-NET-1 (192.0.2.0/24, never assigned to a host), so the warning is printed and the bind then fails.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from test_relay_harness import free_port, relay_env, self_signed_cert, write_tokens

from strands_robots.relay.server import TlsConfig, is_loopback, plaintext_warning

LAUNCH_FILE = Path(__file__).resolve().parents[1] / "launch" / "relay.launch.py"


def _relay(tmp_path, *args, timeout=60):
    tokens = write_tokens(tmp_path)
    return subprocess.run([sys.executable, "-m", "strands_robots.relay", "--store", f"sqlite:{tmp_path / 'r.db'}",
                           "--tokens", str(tokens), *args], env=relay_env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("listen, loopback", [
    ("127.0.0.1:50051", True), ("127.8.9.10:1", True), ("[::1]:50051", True), ("localhost:50051", True),
    ("0.0.0.0:50051", False), ("[::]:50051", False), ("10.0.0.5:50051", False), ("relay.example.org:443", False),
])
def test_loopback_is_told_from_every_other_address(listen, loopback):
    assert is_loopback(listen) is loopback
    warning = plaintext_warning(listen, tls=None)
    assert (warning == "") is loopback
    if not loopback:
        assert warning.startswith(f"WARNING: the relay serves PLAINTEXT on {listen}, a non-loopback address")
    assert plaintext_warning(listen, tls=TlsConfig(b"cert", b"key")) == ""


def test_the_relay_command_warns_in_one_line_naming_a_non_loopback_plaintext_address(tmp_path):
    listen = f"192.0.2.1:{free_port()}"
    proc = _relay(tmp_path, "--listen", listen)
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, proc.stderr
    assert f"WARNING: the relay serves PLAINTEXT on {listen}, a non-loopback address" in warnings[0]
    assert "give --tls-cert and --tls-key" in warnings[0]
    assert proc.returncode == 2  # nothing there to bind: the address is TEST-NET's
    assert f"relay: cannot listen on {listen}" in proc.stderr


def test_a_loopback_or_tls_relay_starts_without_the_warning(tmp_path):
    import signal

    cert, key = self_signed_cert(tmp_path)
    for extra in ((), ("--tls-cert", str(cert), "--tls-key", str(key))):
        tokens = write_tokens(tmp_path)
        proc = subprocess.Popen([sys.executable, "-m", "strands_robots.relay", "--listen", f"127.0.0.1:{free_port()}",
                                 "--store", f"sqlite:{tmp_path / 'r.db'}", "--tokens", str(tokens), *extra],
                                env=relay_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            first = proc.stdout.readline()  # bounded: the relay prints it at start or exits
            assert first.startswith("relay listening on 127.0.0.1:"), first
            assert ("TLS" if extra else "plain") in first
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate(timeout=15)
        assert "WARNING" not in out
        assert proc.returncode == 0


def _launch_module():
    pytest.importorskip("launch", reason="ROS 2 launch is not importable here")
    pytest.importorskip("launch_ros", reason="ROS 2 launch_ros is not importable here")
    spec = importlib.util.spec_from_file_location("relay_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_relay_launch_passes_the_tls_files_the_cli_takes_and_refuses_one_without_the_other():
    from strands_robots.relay.config import RelaySettings

    module = _launch_module()
    argv = module.relay_argv(RelaySettings(), "0.0.0.0:50051", "sqlite:/r.db", "/t.yaml", "/c.pem", "/k.pem")
    assert argv[argv.index("--tls-cert") + 1] == "/c.pem" and argv[argv.index("--tls-key") + 1] == "/k.pem"
    assert "--tls-cert" not in module.relay_argv(RelaySettings(), "127.0.0.1:1", "sqlite:/r.db", "/t.yaml")
    with pytest.raises(module.BadRelayConfig, match="tls_cert and tls_key go together"):
        module.relay_argv(RelaySettings(), "127.0.0.1:1", "sqlite:/r.db", "/t.yaml", "/c.pem", "")
    names = {a.name for a in module.generate_launch_description().entities if hasattr(a, "name")}
    assert {"tls_cert", "tls_key"} <= names


@pytest.mark.parametrize("home, tls, refused", [
    ("127.0.0.1:50051", False, False), ("[::1]:50051", False, False), ("localhost:7000", False, False),
    ("10.245.1.1:50051", False, True), ("relay-a.internal:50051", False, True), ("[fd00::5]:50051", False, True),
    ("10.245.1.1:50051", True, False), ("relay-a.internal:50051", True, False),
])
def test_a_relay_forwards_a_token_in_plaintext_only_to_a_home_on_its_own_host(home, tls, refused):
    from strands_robots.relay.cluster import plaintext_hop

    reason = plaintext_hop(home, tls)
    assert bool(reason) is refused
    if refused:
        assert reason.startswith(f"the home relay {home} is on another host and this relay has no TLS")
