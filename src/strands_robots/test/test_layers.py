"""The package's layers, as docs/layout.md draws them, hold: every import runs down or across, never up, and no circle.

The graph is built from the source (every ``import`` of every module, those inside functions too: an import
put off until a call is still a dependency), so it needs neither ROS nor any optional dependency installed.

    launch / CLI   cli/, launch_support, supervisor, the station demo and job commands
         |
    nodes, tools   nodes/<process>/ (one package per process: arm_driver, rollout, station, camera; rclpy
                   shells), ros/ (the plumbing they share), driver_link/ (the driver's client), monitoring/, export/
         |
    conversions    conversions/ (core dataclasses <-> ROS messages)
         |
    core           everything else: simulation, rollout, policies, arm, cameras, station, station_link (the
                   station's side of the relay), relay (the server), wire (what both speak), client, stats, dds,
                   validation, stop_signals (no rclpy, no generated messages)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "strands_robots"

CORE, CONVERSIONS, NODES, LAUNCH = 0, 1, 2, 3
LAYER_NAMES = {CORE: "core", CONVERSIONS: "conversions", NODES: "nodes/tools", LAUNCH: "launch/CLI"}
# The layer of each top-level module or package of strands_robots; one missing here fails the test (place it).
LAYERS = {
    "strands_robots": CORE, "arm": CORE, "cameras": CORE, "client": CORE, "policies": CORE, "relay": CORE,
    "rollout": CORE, "simulation": CORE, "station": CORE, "station_link": CORE, "wire": CORE, "stats": CORE,
    "stop_signals": CORE, "validation": CORE, "dds": CORE, "job_model": CORE,
    "conversions": CONVERSIONS,
    "nodes": NODES, "ros": NODES, "driver_link": NODES, "monitoring": NODES, "export": NODES,
    "cli": LAUNCH, "launch_support": LAUNCH, "supervisor": LAUNCH, "private_dir": LAUNCH, "package_files": CORE,
    "__main__": LAUNCH,
}
# nodes/ holds one package per node process and nothing else (a file's process is in its path).
PROCESSES = ("arm_driver", "rollout", "station", "camera")
# Circles known to be under way to removal (each names its modules); any other circle fails. Empty it as they go.
KNOWN_CIRCLES: tuple = ()
# Imports the core never makes (docs/layout.md: the core never imports rclpy or generated messages).
ROS_ONLY = ("rclpy", "launch", "launch_ros", "rosidl_parser", "rosidl_runtime_py", "builtin_interfaces")


def module_files() -> dict:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "_pb2" in path.name:  # generated protobuf modules
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree except those under ``if TYPE_CHECKING:`` (annotations only, never imported)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imported_names(name: str, path: Path) -> list:
    """Return the absolute names ``path`` imports: ``from a import b`` gives ``a.b`` (a module, or a name in ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            out += [f"{base}.{alias.name}" for alias in node.names]
    return out


def module_graph() -> dict:
    """Return ``{module: {modules it imports}}`` within strands_robots (a name from a package: its ``__init__``)."""
    files = module_files()

    def resolve(target: str) -> "str | None":
        while target and target not in files:
            target = target.rpartition(".")[0]
        return target or None

    graph = {}
    for name, path in files.items():
        targets = set()
        for imported in imported_names(name, path):
            if imported.split(".")[0] == "strands_robots":
                target = resolve(imported)
                if target is not None and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def layer_of(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else parts[0]]


def cycles(graph: dict) -> list:
    """Return the import circles: each strongly connected component of more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found, key=sorted)


def arrows_up(graph: dict) -> list:
    """Every import from a lower layer to a higher one, as ``(importer, imported)``."""
    return sorted((a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


# -- the tests -------------------------------------------------------------------------------------------------
def test_every_module_has_a_layer():
    unplaced = sorted({m.split(".")[1] for m in module_files() if "." in m and m.split(".")[1] not in LAYERS})
    assert not unplaced, f"place these in LAYERS (and in docs/layout.md): {unplaced}"


def test_no_import_runs_back_up():
    graph = module_graph()
    up = arrows_up(graph)
    assert up == [], "imports from a lower layer to a higher one:\n" + "\n".join(
        f"  {a} ({LAYER_NAMES[layer_of(a)]}) -> {b} ({LAYER_NAMES[layer_of(b)]})" for a, b in up)


def test_no_import_circles():
    """No circle but the known ones (a known one may only shrink: its modules still all listed)."""
    found = cycles(module_graph())
    new = [c for c in found if not any(c <= known for known in KNOWN_CIRCLES)]
    assert new == [], "import circles:\n" + "\n".join(f"  {' <-> '.join(sorted(c))}" for c in new)


def test_the_core_never_imports_ros():
    offenders = []
    for name, path in module_files().items():
        if layer_of(name) != CORE:
            continue
        for imported in imported_names(name, path):
            root = imported.split(".")[0]
            if root in ROS_ONLY or root.endswith("_msgs"):
                offenders.append(f"{name}: {imported}")
    assert offenders == []


def test_every_file_under_nodes_is_in_a_process_package():
    """Every file under nodes/ is ``nodes/<process>/...``; only the package's own ``__init__.py`` is beside them."""
    nodes = PACKAGE / "nodes"
    misplaced = sorted(str(path.relative_to(PACKAGE)) for path in nodes.rglob("*")
                       if path.is_file() and "__pycache__" not in path.parts
                       and path.relative_to(nodes).parts[0] not in PROCESSES and path != nodes / "__init__.py")
    assert misplaced == [], f"every file under nodes/ belongs in nodes/<process>/ ({', '.join(PROCESSES)})"
    assert {p.name for p in nodes.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(PROCESSES)
    for process in PROCESSES:
        assert (nodes / process / "node.py").is_file(), f"nodes/{process}/ has no node.py (its process's main)"


def test_the_shared_packages_sit_in_their_layers():
    """The link to the relay and the wire format are core (no rclpy, no messages); the ROS plumbing is not."""
    assert layer_of("strands_robots.station_link.link") == CORE
    assert layer_of("strands_robots.wire.pb_model") == CORE
    assert layer_of("strands_robots.ros.process") == NODES
    assert layer_of("strands_robots.driver_link.client") == NODES
    graph = module_graph()
    assert "strands_robots.wire.pb_model" in graph and "strands_robots.station_link.link" in graph


def test_the_graph_checks_can_fail():
    """The checks find a circle and an arrow up in a graph that has them (so a clean result means something)."""
    graph = {"strands_robots.station.a": {"strands_robots.nodes.b"},
             "strands_robots.nodes.b": {"strands_robots.station.a"}, "strands_robots.cli.c": set()}
    assert cycles(graph) == [frozenset({"strands_robots.station.a", "strands_robots.nodes.b"})]
    assert arrows_up(graph) == [("strands_robots.station.a", "strands_robots.nodes.b")]
    real = module_graph()
    assert len(real) > 150
    assert "strands_robots.conversions.events" in real["strands_robots.nodes.rollout.event_publisher"]
