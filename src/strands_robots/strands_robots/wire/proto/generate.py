"""Regenerate the Python modules of the wire format's .proto files (committed beside them).

    python -m strands_robots.wire.proto.generate            # rewrite the committed modules
    python -m strands_robots.wire.proto.generate --out DIR  # write them under DIR (the drift test compares)

The modules are committed so that the Evaluation Client installs with only grpcio and protobuf (no
grpcio-tools, no build step); ``test_relay_proto.py`` regenerates them and fails on any difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
# The import root: .proto files import each other as "strands_robots/wire/proto/<name>.proto", so the
# generated modules import each other as strands_robots.wire.proto.<name>_pb2.
IMPORT_ROOT = PROTO_DIR.parents[2]
PROTO_FILES = tuple(sorted(p.name for p in PROTO_DIR.glob("*.proto")))
PACKAGE_PATH = PROTO_DIR.relative_to(IMPORT_ROOT)


def generate(out_root: Path) -> list[Path]:
    """Write ``<out_root>/strands_robots/wire/proto/*_pb2{,_grpc}.py{,i}``; returns the files written."""
    import grpc_tools
    from grpc_tools import protoc  # build-time tool only

    out_root.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{IMPORT_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(PACKAGE_PATH / name) for name in PROTO_FILES],
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}: {' '.join(args[1:])}")
    target = out_root / PACKAGE_PATH
    return sorted(p for p in target.iterdir() if p.name.endswith(("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=IMPORT_ROOT, help="import root to write under")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
