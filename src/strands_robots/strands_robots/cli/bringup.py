"""What ``rollout.launch.py`` (and the other launch files) need before any process starts.

* Every config file is checked on load, each refusal one line naming the file, the key and the reason:
  :func:`relay_config_refusal` (``config/relay.yaml``) and :func:`job_file_refusal` (a job file such as
  ``config/demo_job.yaml``); a ROS parameters file is checked by
  :func:`strands_robots.cli.parameters_file.parameters_file_refusal`.
* :func:`make_run_dir`: a private directory (mode 0700) with the relay's tokens made for this launch (files mode
  0600): one client token, one station token. Nothing secret is ever committed or passed on a command line;
  the processes get the paths of these files. The directory goes when the launch process goes, however it ends
  (a SIGKILL included: :mod:`strands_robots.private_dir`), and the station's state and the relay's store of a
  launch that starts its own relay live in it too (``station/state_dir.py``).
* :func:`write_relay_credentials`: the station's relay credentials file (0600, ``wire/credentials.py``'s
  format) naming the relay and the station's token file; the station and rollout nodes both get its path in
  their read-only ``relay_credentials_file`` parameter.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import Optional

from strands_robots.private_dir import PrivateDir
from strands_robots.relay.config import RelayConfigError, RelaySettings, load_relay_settings

__all__ = ["BadConfigFile", "RelaySettings", "RunDir", "relay_config_refusal", "job_file_refusal",
           "launch_state_dir", "load_relay_config", "make_run_dir", "write_relay_credentials", "DEMO_CLIENT"]

DEMO_CLIENT = "demo"
RUN_DIR_PREFIX = "strands_launch_"


class BadConfigFile(ValueError):
    """A config file given to a launch is refused: the file, the key and the reason, in one line."""


# -- the relay's config -----------------------------------------------------------------------------------------
# The relay owns its settings' schema (strands_robots/relay/config.py); a launch reads the same file with it.
def load_relay_config(path: str) -> RelaySettings:
    """Read ``path`` (a top-level ``relay:`` mapping); :class:`BadConfigFile` names the key and the reason."""
    try:
        return load_relay_settings(path)
    except RelayConfigError as exc:
        raise BadConfigFile(str(exc)) from None


def relay_config_refusal(path: str) -> str:
    """Say in one line why ``path`` is not a relay config; "" when it is."""
    try:
        load_relay_config(path)
    except BadConfigFile as exc:
        return str(exc)
    return ""


def job_file_refusal(path: str) -> str:
    """Say in one line why ``path`` is not a job file (the key and the reason); "" when it is.

    A job file is a team's job (``job_model.team_job``): a key a team must never set is refused here, naming it.
    """
    from strands_robots.job_model.team_job import load_team_job

    try:
        load_team_job(path)
    except OSError as exc:
        return f"job file {path}: {exc.strerror or exc}"
    except ValueError as exc:
        return f"job file {path}: {exc}"
    return ""


# -- the run dir ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunDir:
    """A launch's private files: ``path`` (0700), ``tokens`` (the relay's), one token file per side (0600).

    ``state_dir`` is where the station of a launch that starts its own relay keeps its jobs (with the relay's
    ``store``); :meth:`close` removes it all (it also goes by itself when the process that made it ends).
    """

    path: str
    tokens: str
    client_token_file: str
    station_token_file: str
    store: str
    state_dir: str
    owner: PrivateDir = field(repr=False, compare=False)

    def close(self) -> None:
        """Remove the directory (idempotent)."""
        self.owner.close()


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def make_run_dir(station_id: str, *, client_id: str = DEMO_CLIENT, parent: Optional[str] = None) -> RunDir:
    """Make a private run dir with fresh tokens for one client and one station (see the module docstring)."""
    import yaml

    owner = PrivateDir(RUN_DIR_PREFIX, parent)  # mode 0700, removed with this process
    path = owner.path
    client, station = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    tokens = os.path.join(path, "tokens.yaml")
    client_file, station_file = os.path.join(path, "client_token"), os.path.join(path, "station_token")
    try:
        _write_private(tokens, yaml.safe_dump({"clients": {client_id: client}, "stations": {station_id: station}}))
        _write_private(client_file, client)
        _write_private(station_file, station)
    except BaseException:
        owner.close()
        raise
    return RunDir(path=path, tokens=tokens, client_token_file=client_file, station_token_file=station_file,
                  store=f"sqlite:{os.path.join(path, 'relay.sqlite')}", state_dir=os.path.join(path, "station_state"),
                  owner=owner)


def write_relay_credentials(directory: str, target: str, station_id: str, token_file: str,
                            root_certificates: Optional[str] = None) -> str:
    """Write ``relay_credentials.yaml`` (0600) into the private ``directory``; return its path.

    It names the relay, the station and the station's token file (and the relay's CA for TLS), so the station
    and rollout nodes read them once at start and no parameter, goal or command line carries them.
    """
    import yaml

    data = {"target": target, "station_id": station_id, "token_file": os.path.abspath(token_file)}
    if root_certificates:
        data["root_certificates"] = os.path.abspath(root_certificates)
    path = os.path.join(directory, "relay_credentials.yaml")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle)
    os.chmod(path, 0o600)  # an existing file keeps its mode on open: make it private whatever it was
    return path


def launch_state_dir(given: str, run: RunDir, station_id: str, relay: Optional[RelaySettings], listen: str) -> str:
    """Return where a launch's station keeps its jobs (rollout.launch.py; ``station/state_dir.py``'s rule).

    ``given`` (the ``state_dir`` argument) when not empty; else, for a relay whose store the config names (its
    jobs outlive the launch), the state of this station for that relay (keyed by its address ``listen``); else
    (the launch's own relay, its store in the run dir, or no relay) the run dir's: gone with the launch.
    """
    from strands_robots.station.state_dir import station_state_dir

    if given:
        return given
    if relay is not None and relay.store:
        return station_state_dir(station_id, listen)
    return run.state_dir
