"""The relay: a gRPC service between stations and the teams that evaluate policies on them (no ROS).

- ``proto/``: the wire format (.proto files and their generated modules; protobuf only, no pickle).
- ``store.py``: jobs, owners, the latest snapshot per job and when each station was heard (SQLite or
  PostgreSQL).
- ``auth.py``: bearer tokens from a YAML file, checked on every call.
- ``job_request.py``: a submitted job checked with the station core's rules before it is stored.
- ``sessions.py``: the policy-session broker (station stream <-> client stream).
- ``server.py``: the asyncio servicers and ``main(argv)`` (``python -m strands_robots.relay``).
- ``config.py``: the relay's settings and limits (``config/relay.yaml``, the same as flags).
- ``rate_limit.py``: a token bucket; the one-line, rate-limited log of refused requests.
- ``text_limits.py``: every free text entering the relay checked against ``station/limits.py``.
- ``station_link.py``: the station's side: reporting with a backlog, jobs, policy sessions.

Limits: a policy session is brokered inside one relay process, so a job's station and its policy client must
reach the same relay; several relays share jobs, snapshots and last-heard times through one PostgreSQL store.

Importing this package imports nothing heavy; grpc is loaded by the modules that need it.
"""
