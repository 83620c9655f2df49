"""The station core: evaluation jobs on the arms, with no ROS (spec/evaluation-status.txt, DESIGN.md §5, §9).

One concept per module:

- ``model``: the data model shared with the relay and the client (JobStatus, EpisodeResult, Task, ...);
- ``score_sheet``: sheet and answer validation, score and success;
- ``job``: JobSpec validation, the job state machine, per-episode plans;
- ``record``: the station's whole state of one job (episode ids, running, discarded, interrupted);
- ``episodes``: the episode procedure (JobRunner) over a RobotPort and an OperatorPort;
- ``operator``: the operator console (takeover, resume, claim, discard, score sheet);
- ``scripted_operator``: ScriptedOperator, the simulated station's operator driven by task parameters;
- ``status``: JobStatus snapshots and the job's aggregates;
- ``persistence``: atomic job files + episode log, restart recovery;
- ``station``: a station's jobs, run one at a time (what the station node drives);
- ``job_file``: YAML / mappings <-> JobSpec;
- ``inprocess``: a RobotPort on an in-process Simulation with a real lease.

Nothing is imported here, so ``import strands_robots.station.model`` stays light for the relay and the client.
"""
