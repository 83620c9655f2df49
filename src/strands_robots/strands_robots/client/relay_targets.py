"""Several relay addresses as one gRPC channel target: a station or a client of a relay cluster fails over.

``"relay-a:50051,relay-b:50051"`` (or a list of ``host:port``) becomes one channel over every address with
gRPC's ``pick_first`` policy: calls go to the first address that answers; when its connection breaks (the relay
died), the channel connects to the next one that answers, and the caller's next call (or retry) goes there. One
address is used as it is (DNS may still give several).

Host names are resolved here, once, when the channel is made (gRPC's ``ipv4:``/``ipv6:`` targets hold
addresses only); with TLS the certificate is checked against the first host name given (a relay cluster's
certificate names the name every relay is reached by). No ROS and nothing of the relay here.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import List, Sequence, Tuple, Union

Targets = Union[str, Sequence[str]]


class RelayTargetError(ValueError):
    """A relay address list that cannot be used; the message says which entry and why."""


def split_targets(targets: Targets) -> List[str]:
    """Return the ``host:port`` entries of ``targets`` (a comma-separated string or a sequence), in order."""
    items = targets.split(",") if isinstance(targets, str) else list(targets)
    out = [str(item).strip() for item in items if str(item).strip()]
    if not out:
        raise RelayTargetError("no relay address given (host:port, or several separated by commas)")
    for item in out:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RelayTargetError(f"relay address {item!r} is not host:port")
    return out


def _literal(host: str) -> "ipaddress.IPv4Address | ipaddress.IPv6Address | None":
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_loopback(address: str) -> bool:
    """Return True when ``host:port`` (or a bare host) names a loopback address.

    ``127.0.0.0/8``, ``::1`` and ``localhost`` are; any other host name may resolve anywhere, so it is not.
    """
    if address.startswith("["):  # [::1]:50051
        host = address[1:].partition("]")[0]
    elif address.count(":") == 1:  # host:port
        host = address.partition(":")[0]
    else:  # a bare host or IPv6 literal
        host = address
    if host.lower() == "localhost":
        return True
    literal = _literal(host)
    return literal is not None and literal.is_loopback


def channel_target(targets: Targets) -> Tuple[str, list]:
    """Return ``(target, options)`` for ``grpc.*_channel`` reaching any of ``targets`` (see the module doc)."""
    items = split_targets(targets)
    if len(items) == 1:
        return items[0], []
    addresses: List[str] = []
    names: List[str] = []
    families = set()
    for item in items:
        host, _, port = item.rpartition(":")
        literal = _literal(host)
        if literal is not None:
            found = [literal]
        else:
            names.append(host)
            try:
                infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise RelayTargetError(f"relay address {item!r}: cannot resolve {host!r}: {exc}") from None
            found = [ipaddress.ip_address(info[4][0]) for info in infos]
        for address in found:
            families.add(address.version)
            text = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
            if text not in addresses:
                addresses.append(text)
    if len(families) > 1:  # one target holds one family: keep IPv4 (every relay of a cluster has one)
        addresses = [a for a in addresses if not a.startswith("[")]
        families = {4}
    scheme = "ipv6" if families == {6} else "ipv4"
    options: list = [("grpc.lb_policy_name", "pick_first")]
    if names:
        options.append(("grpc.ssl_target_name_override", names[0]))
        options.append(("grpc.default_authority", names[0]))
    return f"{scheme}:{','.join(addresses)}", options
