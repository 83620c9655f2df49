"""What produced a job's scores: the station's software, its configuration files, the job and the policy.

:class:`StationFacts` is what a station is, read once at start: its driver configuration (``config/arms.yaml``:
the actuators and their command ranges), its cameras (``config/cameras.yaml``, the ones its rollouts observe),
those files' SHA-256, its software version and git revision. From it come the station's side of the
compatibility gate (:meth:`StationFacts.station_spec`) and a job's :class:`~strands_robots.station.model.Provenance`
(:meth:`StationFacts.provenance`): version, revision, the hashes of arms.yaml, cameras.yaml and the job (the
canonical JSON of its job-file form, :func:`job_sha256`), and the policy's declared spec with an openpi server's
metadata. :func:`file_sha256` also hashes each episode's recording. No ROS here.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from strands_robots.station.compatibility import StationSpec, station_spec
from strands_robots.station.model import ConfigHash, Provenance, SlotPolicySpec

__all__ = ["StationFacts", "load_station_facts", "file_sha256", "job_sha256", "software_version", "git_revision",
           "JOB_FILE_NAME"]

#: The name the job's hash goes under in ``Provenance.config_files``.
JOB_FILE_NAME = "job"
_CHUNK = 1 << 20


def file_sha256(path: str) -> str:
    """Return the SHA-256 (hex) of the file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def job_sha256(spec: Any) -> str:
    """Return the SHA-256 of the job: its job-file form (``job_file.job_spec_to_mapping``) as canonical JSON."""
    from strands_robots.station.job_file import job_spec_to_mapping

    text = json.dumps(job_spec_to_mapping(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def software_version() -> str:
    """Return the station's strands_robots version."""
    from strands_robots import __version__

    return str(__version__)


def git_revision(directory: Optional[str] = None) -> str:
    """Return the git commit of the checkout ``directory`` is in (``-dirty`` appended when files differ).

    ``directory`` None: the checkout these modules run from. Empty when there is none (an installed copy) or git
    is not there.
    """
    if directory is None:
        from strands_robots.package_files import checkout_dir

        checkout = checkout_dir()
        if checkout is None:
            return ""
        directory = str(checkout)
    try:
        head = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5.0)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", directory, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10.0)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    revision = head.stdout.strip()
    return revision + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


@dataclass(frozen=True)
class StationFacts:
    """What a station is (see the module docstring).

    :param driver_config: its :class:`~strands_robots.arm.config.DriverConfig`.
    :param camera_set: its :class:`~strands_robots.cameras.config.CameraSet` (None: no cameras).
    :param cameras: the cameras its rollouts observe (a subset of the set).
    :param files: ``ConfigHash`` of arms.yaml and cameras.yaml as read.
    :param relay_max_message_bytes: the largest message its relay takes (its link's; the relay's default).
    """

    driver_config: Any
    camera_set: Any = None
    cameras: Tuple[str, ...] = ()
    files: Tuple[ConfigHash, ...] = ()
    software_version: str = ""
    git_revision: str = ""
    relay_max_message_bytes: int = 16 * 1024 * 1024

    def camera_sizes(self) -> Dict[str, Tuple[int, int]]:
        """Return the cameras a job may ask for with the ``(width, height)`` each renders.

        The cameras the rollouts observe; when those are not configured here (empty), every camera of the file.
        """
        if self.camera_set is None:
            return {}
        names = self.cameras or self.camera_set.names
        return {name: (self.camera_set.camera(name).width, self.camera_set.camera(name).height) for name in names}

    def job_refusal(self, job: Any) -> str:
        """Say why this station can never run ``job`` as asked; "" when it can.

        Every camera its tasks ask for (their ``cameras`` parameter) that this station does not have, all of them
        named at once (``station.preflight.camera_refusals``, the gate's own check); then its image requests
        (``cameras.image_budget``) against these cameras and the relay's message size.
        """
        from strands_robots.station.job import JobSpecError, check_job_images
        from strands_robots.station.preflight import camera_refusals

        unknown = camera_refusals(job.tasks, self.camera_sizes())
        if unknown:
            listed = "; ".join(f"{n}. {reason}" for n, reason in enumerate(unknown, 1))
            return (f"the job asks for cameras this station does not have ({len(unknown)} request(s); no arm "
                    f"moved): {listed}")
        try:
            check_job_images(job, self.camera_sizes(), self.relay_max_message_bytes, self.cameras or None)
        except JobSpecError as exc:
            return str(exc)
        return ""

    def station_spec(self, job: Any, cameras: Optional[Iterable[str]] = None) -> StationSpec:
        """Return the station's side of the gate for ``job`` (its tasks' control rates).

        :param cameras: the cameras the rollouts observe, when the robot side knows them (None: :attr:`cameras`).
        """
        from strands_robots.station.job import PARAM_CONTROL_FREQUENCY

        rates = {task.task_id: float(task.parameters.get(PARAM_CONTROL_FREQUENCY, job.control_frequency))
                 for task in job.tasks}
        return station_spec(self.driver_config, self.camera_set, self.cameras if cameras is None else cameras,
                            rates)

    def provenance(self, job: Any, policy_spec: Any = None,
                   slot_specs: Optional[Mapping[str, Any]] = None) -> Provenance:
        """Return the provenance of ``job`` run here with a policy that declared ``policy_spec`` (or None).

        :param slot_specs: a comparison's declared spec of each slot (``{slot: PolicySpec or None}``, in the job's
            slot order), each recorded by slot name; ``policy_spec`` is then the first slot's.
        """
        def as_json(spec: Any) -> str:
            return "" if spec is None else json.dumps(spec.to_dict(), sort_keys=True)

        return Provenance(software_version=self.software_version, git_revision=self.git_revision,
                          config_files=self.files + (ConfigHash(JOB_FILE_NAME, "", job_sha256(job)),),
                          policy_spec_json=as_json(policy_spec),
                          slot_specs=tuple(SlotPolicySpec(slot, as_json(spec))
                                           for slot, spec in (slot_specs or {}).items()))


def load_station_facts(arms_file: Optional[str] = None, cameras_file: Optional[str] = None,
                       cameras: Optional[Iterable[str]] = None) -> StationFacts:
    """Read the station's configuration files (None or empty: the package's ``config/``) and hash them.

    :param cameras: the cameras the rollouts observe (None: every camera of the file; empty: none).
    :raises ValueError: a file that does not load, or a camera the file does not name.
    """
    from strands_robots.arm.config import DriverConfig
    from strands_robots.cameras.config import default_config_path, load_camera_set
    from strands_robots.package_files import PackageFileNotFound, config_path

    try:
        arms_path = arms_file or config_path("arms.yaml")
    except PackageFileNotFound as exc:
        raise ValueError(str(exc)) from None
    cameras_path = cameras_file or default_config_path()
    driver = DriverConfig.from_yaml(arms_path)
    camera_set = load_camera_set(cameras_path)
    names = camera_set.names if cameras is None else tuple(n for n in cameras if n)
    for name in names:
        camera_set.camera(name)  # an unknown name raises, naming the file's cameras
    files = (ConfigHash("arms.yaml", os.path.abspath(arms_path), file_sha256(arms_path)),
             ConfigHash("cameras.yaml", os.path.abspath(cameras_path), file_sha256(cameras_path)))
    return StationFacts(driver_config=driver, camera_set=camera_set, cameras=names, files=files,
                        software_version=software_version(), git_revision=git_revision())
