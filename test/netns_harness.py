"""Network namespaces for the system tests: one per host (relay, station, team), veth pairs, assigned addresses.

``NetnsLab`` makes the namespaces and links the relay's to each of the others by a veth pair of its own, with
its own /24 (no route between the station and the team: the relay's namespace does not forward). It raises
:class:`NetnsUnavailable` (the test skips with its reason) where namespaces cannot be made (not root, no ``ip``,
no CAP_SYS_ADMIN), and deletes every namespace it made in :meth:`close` (their veth ends go with them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Dict, List, Tuple


class NetnsUnavailable(Exception):
    """Network namespaces cannot be made here; the message says why."""


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


class NetnsLab:
    """Namespaces ``<prefix>_relay``, ``<prefix>_<peer>`` for each peer, each peer linked to the relay.

    Peer ``i`` (in order) gets the subnet 10.245.<i+1>.0/24: the relay's end is .1, the peer's .2.
    """

    def __init__(self, prefix: str, peers: List[str]) -> None:
        if os.geteuid() != 0:
            raise NetnsUnavailable("network namespaces need root (ip netns add); this test runs as a user")
        if shutil.which("ip") is None:
            raise NetnsUnavailable("the ip command (iproute2) is not installed")
        self.prefix = prefix
        self.made: List[str] = []
        self.addresses: Dict[str, Tuple[str, str]] = {}  # peer -> (relay's address, peer's address)
        try:
            self.relay = self._add("relay")
            for index, peer in enumerate(peers):
                name = self._add(peer)
                relay_end, peer_end = f"r{index}", f"p{index}"
                relay_ip, peer_ip = f"10.245.{index + 1}.1", f"10.245.{index + 1}.2"
                self._run_in(self.relay, "ip", "link", "add", relay_end, "type", "veth", "peer", "name", peer_end,
                             "netns", name)
                self._run_in(self.relay, "ip", "addr", "add", f"{relay_ip}/24", "dev", relay_end)
                self._run_in(self.relay, "ip", "link", "set", relay_end, "up")
                self._run_in(name, "ip", "addr", "add", f"{peer_ip}/24", "dev", peer_end)
                self._run_in(name, "ip", "link", "set", peer_end, "up")
                self.addresses[peer] = (relay_ip, peer_ip)
        except BaseException:
            self.close()
            raise

    def ns(self, peer: str) -> str:
        return f"{self.prefix}_{peer}"

    def _add(self, role: str) -> str:
        name = self.ns(role)
        _ip("netns", "del", name)  # a leftover of a run killed before its clean-up
        done = _ip("netns", "add", name)
        if done.returncode != 0:
            raise NetnsUnavailable(f"ip netns add {name} failed: {done.stderr.strip() or done.returncode}")
        self.made.append(name)
        self._run_in(name, "ip", "link", "set", "lo", "up")
        return name

    @staticmethod
    def _run_in(name: str, *argv: str) -> str:
        done = subprocess.run(["ip", "netns", "exec", name, *argv], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise NetnsUnavailable(f"in namespace {name}: {' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def exec_prefix(self, role: str) -> List[str]:
        """Return the argv prefix running a command in ``role``'s namespace (``ip netns exec``: same PID)."""
        return ["ip", "netns", "exec", self.ns(role)]

    def sockets(self, role: str, *ss_args: str) -> List[Tuple[str, str]]:
        """Return ``(local, peer)`` of the TCP sockets ``ss -tnH <ss_args>`` lists in ``role``'s namespace."""
        out = self._run_in(self.ns(role), "ss", "-tnH", *ss_args)
        rows = []
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 4:
                rows.append((fields[-2], fields[-1]))
        return rows

    def close(self) -> None:
        for name in reversed(self.made):
            _ip("netns", "del", name)
        self.made.clear()


def host_of(endpoint: str) -> str:
    """Return the address of ``ss``'s ``host:port`` (an IPv4-mapped IPv6 address as its IPv4 one)."""
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    return host[len("::ffff:"):] if host.startswith("::ffff:") else host


def is_loopback(endpoint: str) -> bool:
    host = host_of(endpoint)
    return host.startswith("127.") or host == "::1"
