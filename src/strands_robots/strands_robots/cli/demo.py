"""``strands-robots demo``: the in-process observer lane, ``Simulation.run_policy(..., observer=...)``, no ROS."""

from __future__ import annotations

import argparse

from strands_robots.cli.stream import StreamPrinter


def cmd_demo(args: argparse.Namespace) -> int:
    from strands_robots.simulation import Simulation

    sim = Simulation()
    sim.add_robot("alice")
    printer = StreamPrinter(every_step=args.every_step)
    result = sim.run_policy(
        robot_name="alice",
        policy_provider=args.policy,
        duration=args.duration,
        control_frequency=args.control_frequency,
        observer=printer,
        n_episodes=args.episodes,
    )
    print(f"result: status={result['status']} episodes={len(result['episodes'])} "
          f"observer_failures={result.get('observer_failures', 0)}")
    return 0 if result["status"] == "success" else 1
