"""How the relay starts its web status page: the ``--web`` flag, the config key, the launch argument, refusals."""

from __future__ import annotations

import dataclasses
import importlib.util
import socket
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the web status page needs aiohttp (requirements/python.txt)")

from test_relay_harness import write_tokens  # noqa: E402

from strands_robots.relay import server as relay_server  # noqa: E402
from strands_robots.relay.config import RelaySettings, settings_refusal  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[1] / "launch" / "relay.launch.py"


def _launch_module():
    pytest.importorskip("launch", reason="ROS 2 launch is not importable here")
    pytest.importorskip("launch_ros", reason="ROS 2 launch_ros is not importable here")
    spec = importlib.util.spec_from_file_location("relay_launch_web", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("value, ok", [("", True), ("127.0.0.1:8080", True), ("[::1]:0", True), ("8080", False),
                                       ("host:", False), ("host:99999", False), (":80", False)])
def test_the_web_setting_is_host_port_or_empty(value, ok):
    reason = settings_refusal("web", value)
    assert (reason == "") is ok, reason
    if not ok:
        assert reason.startswith("web: ") and "host:port" in reason


def test_relay_launch_passes_the_web_address_from_its_argument_or_the_config_file():
    module = _launch_module()
    args = ("127.0.0.1:1", "sqlite:/r.db", "/t.yaml")
    assert "--web" not in module.relay_argv(RelaySettings(), *args)
    argv = module.relay_argv(RelaySettings(), *args, web="127.0.0.1:8080")
    assert argv[argv.index("--web") + 1] == "127.0.0.1:8080"
    argv = module.relay_argv(dataclasses.replace(RelaySettings(), web="127.0.0.1:9000"), *args)
    assert argv[argv.index("--web") + 1] == "127.0.0.1:9000"
    with pytest.raises(module.BadRelayConfig, match="web: 'nonsense' is not host:port"):
        module.relay_argv(RelaySettings(), *args, web="nonsense")
    names = {a.name for a in module.generate_launch_description().entities if hasattr(a, "name")}
    assert "web" in names


def test_the_relay_refuses_a_bad_web_address_and_a_web_port_in_use_with_the_reason(tmp_path, capsys):
    tokens = write_tokens(tmp_path)
    base = ["--listen", "127.0.0.1:0", "--store", f"sqlite:{tmp_path / 'r.db'}", "--tokens", str(tokens)]
    assert relay_server.main([*base, "--web", "no-port"]) == 2
    assert "--web: 'no-port' is not host:port" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert relay_server.main([*base, "--web", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert f"cannot serve the web status page on 127.0.0.1:{port}" in err
