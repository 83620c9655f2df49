"""A team's evaluation job, as a job file states it, and what a station offers: the rules both sides check.

Pure Python (the standard library; PyYAML only to read a file): no rclpy, no MuJoCo, no station runtime, so the
Evaluation Client can ship it and check a job file before it is sent. Each concept in its own module:

- :mod:`~strands_robots.job_model.team_keys`: the one rule that refuses every key that would let a team score
  itself, inject faults or drive the scripted operator (the job file, the relay's ``SubmitJob`` and the station
  node's ``submit_job`` all call it);
- :mod:`~strands_robots.job_model.offer`: the suites a station offers (what the relay lists and checks against);
- :mod:`~strands_robots.job_model.team_job`: a team's job (suite tasks and trials, choices, free-form tasks,
  policy), read from a mapping or a YAML file and checked against an offer.
"""
