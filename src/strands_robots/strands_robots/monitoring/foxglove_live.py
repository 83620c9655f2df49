"""``--foxglove``: the live strands topics over the Foxglove WebSocket protocol (foxglove-sdk).

One channel per live topic (each camera's ``image_raw/compressed`` and ``camera_info`` among them, so Foxglove's
Image panel shows the cameras), under its live name, with the message type's complete ``ros2msg`` definition as its
schema and the CDR bytes as published (the same schemas ``record`` writes), so Foxglove decodes them as it decodes
a ROS 2 bag. The server listens on 127.0.0.1 unless told otherwise: it has no authentication.

Latched topics: a Foxglove client that subscribes after the state was published would never see it, so the latest
sample of each latched topic is logged again whenever a client subscribes to its channel.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, Sequence

from strands_robots.monitoring.topics import StrandsTopic
from strands_robots.rollout.msg_schema import MsgDefinitions, canonical_type_name

from strands_robots.monitoring.serve import add_topic_arguments, chosen_topics, run_live

__all__ = ["FoxgloveLive", "build_parser", "main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


class FoxgloveLive:
    """A Foxglove WebSocket server publishing raw CDR messages of the given topics (no rclpy here).

    :param topics: ``(live name, topic)`` pairs.
    :param host: listen address; loopback by default.
    :param port: TCP port; 0 picks a free one (:attr:`port` says which).
    """

    def __init__(self, topics: Sequence[tuple[str, StrandsTopic]], *, host: str = DEFAULT_HOST,
                 port: int = DEFAULT_PORT, name: str = "strands_robots",
                 msg_search_path: "Sequence[str] | None" = None) -> None:
        import foxglove
        from foxglove import Channel, Schema

        self._context = foxglove.Context()
        definitions = MsgDefinitions(msg_search_path)
        self._channels: dict[str, Any] = {}
        self._topics: dict[str, StrandsTopic] = {}
        self._by_id: dict[int, str] = {}
        for live_name, topic in topics:
            type_name = canonical_type_name(topic.type_name)
            schema = Schema(name=type_name, encoding="ros2msg",
                            data=definitions.full_text(type_name).encode("utf-8"))
            channel = Channel(live_name, schema=schema, message_encoding="cdr", context=self._context)
            self._channels[live_name] = channel
            self._topics[live_name] = topic
            self._by_id[channel.id()] = live_name
        self._lock = threading.Lock()
        self._latest_latched: dict[str, tuple[bytes, int]] = {}
        self.sent: dict[str, int] = {n: 0 for n in self._channels}
        self._server = foxglove.start_server(name=name, host=host, port=port, context=self._context,
                                             server_listener=_Listener(self))

    @property
    def port(self) -> int:
        port = self._server.port
        return int(port() if callable(port) else port)

    def offer(self, name: str, data: bytes, recv_ns: int) -> None:
        """Publish one message as received on live topic ``name`` (any thread)."""
        channel = self._channels.get(name)
        if channel is None:
            return
        if self._topics[name].latched:
            with self._lock:
                self._latest_latched[name] = (bytes(data), int(recv_ns))
        channel.log(bytes(data), log_time=int(recv_ns))
        self.sent[name] += 1

    def _resend_latched(self, channel_id: int) -> None:
        name = self._by_id.get(channel_id)
        if name is None:
            return
        with self._lock:
            latest = self._latest_latched.get(name)
        if latest is not None:
            self._channels[name].log(latest[0], log_time=latest[1])

    def close(self) -> None:
        self._server.stop()
        for channel in self._channels.values():
            channel.close()


class _Listener:
    """foxglove ServerListener: a new subscriber of a latched channel gets its latest state."""

    def __init__(self, live: FoxgloveLive) -> None:
        self._live = live

    def on_subscribe(self, client: Any, channel: Any) -> None:
        self._live._resend_latched(int(channel.id))

    def on_unsubscribe(self, client: Any, channel: Any) -> None:
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strands-robots foxglove",
                                     description="Serve the live strands topics to Foxglove over its WebSocket "
                                                 "protocol (no recording).")
    add_topic_arguments(parser)
    parser.add_argument("--host", default=DEFAULT_HOST, help="the address to listen on (default %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="the port to listen on (default %(default)s)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="stop after this many seconds (default 0: at Ctrl-C or SIGTERM)")
    return parser


def main(argv: "Sequence[str] | None" = None) -> int:
    """Serve until Ctrl-C / SIGTERM or ``--duration``; 2 when the topics or the server are refused."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from strands_robots.ros.tools import ros_env_check

    ros_env_check("foxglove")
    try:
        topics = chosen_topics(args)
    except ValueError as exc:
        print(f"strands-robots foxglove: {exc}", file=sys.stderr, flush=True)
        return 2
    try:
        live = FoxgloveLive(topics, host=args.host, port=args.port)
    except Exception as exc:  # the port is taken, the SDK missing: say so
        print(f"strands-robots foxglove: cannot serve Foxglove: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"foxglove: ws://{args.host}:{live.port}", flush=True)
    return run_live(topics, namespace=args.namespace, recorder=None, live=live, duration_s=args.duration,
                    program="foxglove")


if __name__ == "__main__":
    sys.exit(main())
