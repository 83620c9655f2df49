"""The relay: a gRPC service between stations and the teams that evaluate policies on them (no ROS).

- ``proto/``: the wire format (.proto files and their generated modules; protobuf only, no pickle).
- ``store.py``: the store's contract: jobs, owners, the latest snapshot per job and when each station was heard;
  ``sql_store.py`` the SQL both dialects share, ``sqlite_store.py`` / ``postgres_store.py`` the two stores,
  ``store_url.py`` the one a ``--store`` URL names; ``cluster_rows.py``: the relays' addresses and the
  policy-session homes.
- ``auth.py``: bearer tokens from a YAML file, checked on every call.
- ``job_request.py``: a submitted job checked with the station core's rules before it is stored.
- ``sessions.py``: the policy-session broker (station stream <-> client stream).
- ``server.py``: the relay process and ``main(argv)`` (``python -m strands_robots.relay``); ``core.py`` what the
  services share, ``evaluation_service.py`` / ``station_service.py`` the two services, ``handlers.py`` the
  method table, ``session_streams.py`` a policy session's two ends, here or forwarded to the job's home.
- ``cluster.py``: relays sharing a PostgreSQL store: addresses, session homes, forwarding, failover.
- ``config.py``: the relay's settings and limits (``config/relay.yaml``, the same as flags).
- ``rate_limit.py``: a token bucket; the one-line, rate-limited log of refused requests.
- ``text_limits.py``: every free text entering the relay checked against ``station/limits.py``.
- ``station_link.py``: the station's side: reporting with a backlog, jobs, policy sessions.

Several relays share jobs, snapshots and last-heard times through one PostgreSQL store, and a job's policy
session meets on its home relay whichever relays its station and its policy client reached (``cluster.py``).

Importing this package imports nothing heavy; grpc is loaded by the modules that need it.
"""
