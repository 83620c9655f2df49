"""Where one openpi round trip through the relay spends its time: per-stage means and page faults per process.

Not a pass/fail test: it prints figures. It runs ``openpi_bench.py``'s ``relay`` way (the station's
``PolicySession.act`` in this process -> a relay process -> ``strands-robots job serve --openpi`` -> the openpi
server, and back) with a tracer in each of the three processes: a ``sitecustomize`` module on ``PYTHONPATH`` (the
relay and the client inherit it) that wraps the codec, the ``PolicyRequest``/``PolicyReply`` (de)serialisers, the
broker, the bridge's mapping and msgpack and the websocket calls, and records ``CLOCK_MONOTONIC`` (one clock for
every process) and ``getrusage`` minor page faults at each. The stages of each call are cut from those events.

Usage::

    source scripts/env.sh --no-install; export PYTHONPATH=$PWD/src/strands_robots:$PYTHONPATH
    python bench/openpi_trace.py --calls 300          # about 10 s (the first run also builds the openpi venv)

The wrappers cost a few microseconds per event (about 40 per call): the stages' sum is a little above the bench's
round trip.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

_TRACER = r'''
import os, sys, time, atexit, threading, resource, importlib
_OUT = os.environ.get("SR_TRACE_DIR")
if _OUT:
    _events = []
    def _ev(name, _ns=time.monotonic_ns, _ru=resource.getrusage, _self=resource.RUSAGE_SELF):
        _events.append((_ns(), name, _ru(_self).ru_minflt))
    def _flush(*_):
        cmd = open("/proc/self/cmdline").read().replace("\0", " ")
        with open(os.path.join(_OUT, f"{os.getpid()}.tsv"), "w") as f:
            f.write(cmd[:300] + "\n")
            f.writelines(f"{t}\t{n}\t{x}\n" for t, n, x in _events)
    atexit.register(_flush)

    def _wrap(modname, qual, tag):
        mod = importlib.import_module(modname)
        owner, parts = mod, qual.split(".")
        for p in parts[:-1]:
            owner = getattr(owner, p)
        fn = getattr(owner, parts[-1])
        def wrapped(*a, _fn=fn, **k):
            _ev(tag + "0")
            try:
                return _fn(*a, **k)
            finally:
                _ev(tag + "1")
        setattr(owner, parts[-1], wrapped)

    def _install():
        from strands_robots.wire.proto import policy_session_pb2 as ps
        for cls in (ps.PolicyRequest, ps.PolicyReply):
            ser, frm, n = cls.SerializeToString, cls.FromString, cls.__name__
            def s(self, *a, _ser=ser, _n=n, **k):
                _ev(f"ser0_{_n}"); out = _ser(self, *a, **k); _ev(f"ser1_{_n}"); return out
            def f(data, _frm=frm, _n=n):
                _ev(f"de0_{_n}"); out = _frm(data); _ev(f"de1_{_n}"); return out
            cls.SerializeToString, cls.FromString = s, staticmethod(f)
        for modname, qual, tag in (
                ("strands_robots.client.codec", "observation_to_pb", "obs2pb"),
                ("strands_robots.client.codec", "observation_from_pb", "pb2obs"),
                ("strands_robots.client.codec", "action_chunk_to_pb", "chunk2pb"),
                ("strands_robots.client.codec", "action_chunk_from_pb", "pb2chunk"),
                ("strands_robots.station_link.session", "PolicySession.act", "act"),
                ("strands_robots.relay.sessions", "Broker.from_station", "brk_st"),
                ("strands_robots.relay.sessions", "Broker.from_client", "brk_cl"),
                ("strands_robots.client.openpi", "pack", "pack"),
                ("strands_robots.client.openpi", "unpack", "unpack"),
                ("websockets.sync.connection", "Connection.send", "wssend"),
                ("websockets.sync.connection", "Connection.recv", "wsrecv")):
            try:
                _wrap(modname, qual, tag)
            except (ImportError, AttributeError) as exc:  # e.g. the relay has no websockets: nothing to time there
                sys.stderr.write(f"trace: {modname}.{qual} not wrapped ({exc})\n")
    _install()
'''

#: (stage, from event, to event): the n-th occurrence of each within one call (every event here occurs once).
STAGES = [
    ("station: observation -> protobuf, to gRPC's thread", "S:act0", "S:ser0_PolicyRequest"),
    ("station -> relay (gRPC, parsed at the relay)", "S:ser0_PolicyRequest", "R:de1_PolicyRequest"),
    ("relay: broker, serialise (request)", "R:de1_PolicyRequest", "R:ser1_PolicyRequest"),
    ("relay -> client (gRPC, parsed at the client)", "R:ser1_PolicyRequest", "C:de1_PolicyRequest"),
    ("client: decode, obs map, msgpack", "C:de1_PolicyRequest", "C:wssend0"),
    ("client <-> openpi server (websocket)", "C:wssend0", "C:wsrecv1"),
    ("client: unpack, chunk, protobuf, to gRPC", "C:wsrecv1", "C:ser0_PolicyReply"),
    ("client -> relay (gRPC)", "C:ser0_PolicyReply", "R:de1_PolicyReply"),
    ("relay: broker, serialise (reply)", "R:de1_PolicyReply", "R:ser1_PolicyReply"),
    ("relay -> station (gRPC)", "R:ser1_PolicyReply", "S:de1_PolicyReply"),
    ("station: to the calling thread, decode", "S:de1_PolicyReply", "S:act1"),
]


def _role(cmdline: str) -> str:
    if "strands_robots.relay " in cmdline:
        return "R"
    if "strands_robots.client.cli.job" in cmdline:
        return "C"
    return "S"


def analyse(trace_dir: Path, warmup: int) -> str:
    events, faults = [], {}
    for path in trace_dir.glob("*.tsv"):
        lines = path.read_text().splitlines()
        role = _role(lines[0])
        rows = [ln.split("\t") for ln in lines[1:]]
        events += [(int(t), f"{role}:{n}") for t, n, _ in rows]
        faults[role] = [(int(t), int(x)) for t, _, x in rows]
    events.sort()
    times = [t for t, _ in events]
    starts = [t for t, n in events if n == "S:act0"][warmup:]
    ends = [t for t, n in events if n == "S:act1"][warmup:]
    per_stage = collections.defaultdict(list)
    for a, b in zip(starts, ends):
        first = {}
        for t, n in events[bisect.bisect_left(times, a):bisect.bisect_right(times, b)]:
            first.setdefault(n, (t - a) / 1e6)
        for stage, frm, to in STAGES:
            if frm in first and to in first:
                per_stage[stage].append(first[to] - first[frm])
    out = [f"{len(starts)} calls; mean (median) ms per stage"]
    total = 0.0
    for stage, _, _ in STAGES:
        v = per_stage.get(stage)
        if v:
            total += statistics.fmean(v)
            out.append(f"  {stage:<52} {statistics.fmean(v):6.3f} ({statistics.median(v):.3f})")
    out.append(f"  {'sum of the stage means':<52} {total:6.3f}")
    if starts:
        out.append("minor page faults per call, over the timed calls")
        for role, name in (("S", "station (this process)"), ("R", "relay"), ("C", "client (job serve --openpi)")):
            marks = [x for t, x in faults.get(role, []) if starts[0] <= t <= ends[-1]]
            if marks:
                out.append(f"  {name:<52} {(marks[-1] - marks[0]) / len(starts):6.1f}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    if "SR_TRACE_DIR" not in os.environ:  # start again with the tracer on PYTHONPATH (this process traced too)
        with tempfile.TemporaryDirectory(prefix="openpi_trace_") as tmp:
            site, traces = Path(tmp) / "site", Path(tmp) / "traces"
            site.mkdir()
            traces.mkdir()
            (site / "sitecustomize.py").write_text(_TRACER)
            env = {**os.environ, "SR_TRACE_DIR": str(traces),
                   "PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}
            done = subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env, timeout=900)
            if done.returncode != 0:
                return done.returncode
            print(analyse(traces, args.warmup))
        return 0
    sys.path.insert(0, str(HERE))
    import openpi_bench as bench

    bench.openpi_venv()
    with tempfile.TemporaryDirectory(prefix="openpi_trace_run_") as tmp:
        work = Path(tmp)
        port = bench.free_port()
        server = bench.start_openpi_server(work, port)
        try:
            samples = bench.run_relay(work, f"ws://127.0.0.1:{port}", args.calls, args.warmup)
        finally:
            bench.stop_server(server)
    s = bench.stats(samples)
    print(f"relay round trip (traced), {args.calls} calls: mean {s['mean']:.2f} ms, p50 {s['p50']:.2f}, "
          f"p99 {s['p99']:.2f}; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
