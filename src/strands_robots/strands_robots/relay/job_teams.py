"""A comparison between teams: who serves each slot, the invitation the other teams answer, who may see what.

A comparison job's file may name, per slot, the team that serves it (``compare.slots: [vision, {name: theirs,
team: lab_b}]``; ``Compare.slot_teams`` on the wire). The relay's rules, each pinned by ``test_relay_job_teams.py``:

1. **Invitation.** Every team a job names besides its submitter is invited when the job is stored. The relay
   holds the job (the station is never sent it) until every invited team accepted: held is read from the job's
   own request and the answers, so a job whose invitations were never written is held too, never run. No arm
   moves before every team accepted.
2. **Answers.** An invited team accepts or declines (``RespondInvitation``); the first answer stands. A decline
   ends the job (CANCELLED, naming the team and its reason). An invitation not accepted within the relay's
   ``invitation_timeout_s`` of the submit expires, which ends the job (CANCELLED, naming the teams it waited for).
   An answer and an expiry are each one conditional update of the team's row (``WHERE answer = 'pending'``, the
   answer also ``AND`` before the deadline), so when relays sharing a store race them the database picks the one
   winner: an answer that lost is told the invitation expired, an expiry that lost changes nothing.
3. **Tokens per slot.** Each slot is served only with its own team's token (the submitter's for its own slots);
   another team's token is PERMISSION_DENIED naming the slot's team. An invited team serves only once it accepted.
4. **Visibility.** The submitter knows the job by its own id; an invited team by the relay's id (the one its
   invitation names). Both see its status, the comparison (blind labels until the end, as for every comparison)
   and its place in their listings; a team neither submitting nor invited gets NOT_FOUND, like an unknown job.
   Each team lists and downloads only the recordings of its own slots' episodes, and reads only its own slots'
   declared policy specs in the job's provenance (a spec names its server and carries its metadata).
5. **Ending it.** The submitter cancels the job; an invited team withdraws its slots, which ends the job naming
   the team. A held job ends at once (the relay writes its terminal status: the station never had it); a job
   the station runs is cancelled through the station, as any cancel.

The answers live in the store beside the jobs (its ``job_teams`` table; SQLite or PostgreSQL, ``run_sql``), so
every relay sharing a store applies the same rules. Synchronous: the relay calls these on its store pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from strands_robots.relay.store import TERMINAL_STATES, JobRecord, JobView, Snapshot

__all__ = ["PENDING", "ACCEPTED", "DECLINED", "EXPIRED", "SlotTeams", "slot_teams", "invite", "answers",
           "waiting_for", "respond", "end_held", "settle", "settle_due", "invited_view", "AnswerRefused",
           "DEFAULT_INVITATION_TIMEOUT_S", "Held", "held", "held_message", "scoped_status", "episode_slots"]

PENDING, ACCEPTED, DECLINED, EXPIRED = "pending", "accepted", "declined", "expired"
#: How long an invitation waits for its answer by default (a relay setting: ``invitation_timeout_s``).
DEFAULT_INVITATION_TIMEOUT_S = 7 * 24 * 3600.0

class AnswerRefused(Exception):
    """An answer that cannot be given now (the job ended, the invitation was answered); the message says why."""


@dataclass(frozen=True)
class SlotTeams:
    """A job's owner and the team serving each of its slots (in the slots' order)."""

    owner: str
    slots: Tuple[Tuple[str, str], ...]  # (slot, team)

    @property
    def invited(self) -> Tuple[str, ...]:
        """The teams besides the owner, each once, in the slots' order."""
        return tuple(dict.fromkeys(t for _s, t in self.slots if t != self.owner))

    def team_of(self, slot: str) -> str:
        return dict(self.slots).get(slot, self.owner)

    def slots_of(self, team: str) -> Tuple[str, ...]:
        return tuple(s for s, t in self.slots if t == team)

    def takes_part(self, team: str) -> bool:
        return team == self.owner or team in self.invited


def slot_teams(job: JobRecord) -> SlotTeams:
    """Return who serves each slot of ``job`` (a job of one policy: no slots, only its owner)."""
    from google.protobuf.message import DecodeError

    from strands_robots.wire.proto import evaluation_service_pb2 as es

    try:
        request = es.SubmitJobRequest.FromString(job.request)
    except DecodeError:  # not a request the relay stored (it stores only requests it parsed)
        return SlotTeams(job.client_id, ())
    if not request.HasField("suite_job") or not request.suite_job.HasField("compare"):
        return SlotTeams(job.client_id, ())
    compare = request.suite_job.compare
    teams = list(compare.slot_teams) or [""] * len(compare.slots)
    return SlotTeams(job.client_id, tuple((slot, team or job.client_id) for slot, team in zip(compare.slots, teams)))


def invite(store: Any, job: JobRecord) -> Tuple[str, ...]:
    """Write a pending invitation for every team ``job`` names besides its owner (idempotent); return them."""
    invited = slot_teams(job).invited
    for team in invited:
        store.run_sql("INSERT INTO job_teams (job_id, team, answer, answered_unix_ms, reason) VALUES ({p}, {p}, {p}, "
                      "0, '') ON CONFLICT (job_id, team) DO NOTHING", (job.job_id, team, PENDING))
    return invited


def answers(store: Any, job: JobRecord) -> Dict[str, Tuple[str, int, str]]:
    """Return each invited team's ``(answer, answered_unix_ms, reason)``; a team without a row is pending."""
    rows = store.read_sql("SELECT team, answer, answered_unix_ms, reason FROM job_teams WHERE job_id = {p}",
                          (job.job_id,))
    got = {str(r[0]): (str(r[1]), int(r[2]), str(r[3])) for r in rows}
    return {team: got.get(team, (PENDING, 0, "")) for team in slot_teams(job).invited}


def waiting_for(store: Any, job: JobRecord) -> Tuple[str, ...]:
    """Return the invited teams that have not accepted (empty: the job may run)."""
    if not slot_teams(job).invited:
        return ()
    return tuple(team for team, (answer, _ms, _r) in answers(store, job).items() if answer != ACCEPTED)


def expires_unix_ms(job: JobRecord, timeout_s: float) -> int:
    return int(job.submitted_unix_ms + timeout_s * 1000)


def _terminal(store: Any, job_id: str) -> bool:
    snapshot = store.get_snapshot(job_id)
    return snapshot is not None and snapshot.state in TERMINAL_STATES


def end_held(store: Any, job: JobRecord, now_ms: int, message: str, state: str = "CANCELLED") -> bool:
    """End a job the station was never sent: the relay writes its terminal status. False if it had ended."""
    from strands_robots.wire.proto import evaluation_pb2 as ev
    from strands_robots.wire.proto import evaluation_service_pb2 as es

    if _terminal(store, job.job_id):
        return False
    request = es.SubmitJobRequest.FromString(job.request)
    status = ev.JobStatus(job_id=job.job_id, station_id=job.station_id, state=state,
                          episodes_total=request.episodes, updated_unix_ms=now_ms, message=message[:1024], sequence=1)
    store.request_cancel(job.job_id, message[:1024])  # a station that somehow holds it is told to stop
    store.put_snapshot(Snapshot(job_id=job.job_id, updated_unix_ms=now_ms, state=state,
                                payload=status.SerializeToString(deterministic=True), episodes_done=0, sequence=1))
    return True


def respond(store: Any, job: JobRecord, team: str, accept: bool, reason: str, now_ms: int,
            timeout_s: float) -> str:
    """Record ``team``'s answer to its invitation to ``job``; return what happened, in words.

    The answer is one conditional update, taken only while the team's row is pending and the deadline has not
    passed: against an expiry racing it (another relay on the same store) the database decides which one won.

    :raises AnswerRefused: the job ended, the invitation expired, or the team answered already.
    """
    if _terminal(store, job.job_id):
        raise AnswerRefused(f"job {job.job_id!r} has ended; there is nothing to answer")
    answer = ACCEPTED if accept else DECLINED
    invite(store, job)  # the job's own request names the team: its row may not have been written yet
    done = store.run_sql(
        "UPDATE job_teams SET answer = {p}, answered_unix_ms = {p}, reason = {p} WHERE job_id = {p} AND team = {p} "
        "AND answer = {p} AND {p} < (SELECT j.submitted_unix_ms FROM jobs j WHERE j.job_id = job_teams.job_id) + {p} "
        "RETURNING team",
        (answer, int(now_ms), reason[:1024], job.job_id, team, PENDING, int(now_ms), _timeout_ms(timeout_s)))
    if not done:
        given = answers(store, job).get(team, (PENDING, 0, ""))[0]
        if given == PENDING:  # the deadline passed before this answer: the answer expires the invitation
            settle(store, job, now_ms, timeout_s)
            given = answers(store, job).get(team, (PENDING, 0, ""))[0]
        if given == EXPIRED:
            raise AnswerRefused(f"the invitation to job {job.job_id!r} expired unanswered at "
                                f"{Held((), expires_unix_ms(job, timeout_s)).until_text} (the relay's "
                                f"invitation_timeout_s, {timeout_s:g} s); the job has ended")
        raise AnswerRefused(f"team {team!r} already {given} the invitation to job {job.job_id!r}")
    if not accept:
        why = f": {reason}" if reason else ""
        end_held(store, job, now_ms, f"team {team!r} declined the invitation to serve slot(s) "
                                     f"{', '.join(slot_teams(job).slots_of(team))}{why}; the job never ran, no arm "
                                     f"moved")
        return f"declined: job {job.job_id!r} ended"
    left = waiting_for(store, job)
    if left:
        return f"accepted: job {job.job_id!r} still waits for team(s) {', '.join(left)} to accept"
    return f"accepted: every team accepted job {job.job_id!r}; the station may run it"


def _timeout_ms(timeout_s: float) -> int:
    return int(timeout_s * 1000)


def settle(store: Any, job: JobRecord, now_ms: int, timeout_s: float) -> bool:
    """End ``job`` if an invitation of it passed its bound unaccepted; True when this call ended it.

    Every invitation still pending expires in one conditional update (``WHERE answer = 'pending'`` and the deadline
    passed); one a team answered first is left as answered. The job ends when any invitation of it expired, this
    call's or an earlier one's whose relay stopped before writing the end, so an expiry that lost the race to the
    last accept changes nothing.
    """
    if now_ms < expires_unix_ms(job, timeout_s) or not slot_teams(job).invited:
        return False
    given = answers(store, job)
    if any(answer == PENDING for answer, _ms, _r in given.values()):  # a read first: an accepted job writes nothing
        invite(store, job)  # a job whose invitations were never written expires as well
        store.run_sql(
            "UPDATE job_teams SET answer = {p}, answered_unix_ms = {p}, reason = '' WHERE job_id = {p} AND answer = "
            "{p} AND {p} >= (SELECT j.submitted_unix_ms FROM jobs j WHERE j.job_id = job_teams.job_id) + {p}",
            (EXPIRED, int(now_ms), job.job_id, PENDING, int(now_ms), _timeout_ms(timeout_s)))
        given = answers(store, job)
    expired = tuple(team for team, (answer, _ms, _r) in given.items() if answer == EXPIRED)
    if not expired:
        return False
    return end_held(store, job, now_ms, f"the invitation to team(s) {', '.join(expired)} expired unaccepted after "
                                        f"{timeout_s:g} s (the relay's invitation_timeout_s); the job never ran, no "
                                        f"arm moved")


def settle_due(store: Any, now_ms: int, timeout_s: float, limit: int = 100) -> int:
    """End every held job whose invitation passed its bound (or expired without its end written); return how many."""
    rows = store.read_sql(
        "SELECT DISTINCT j.job_id FROM job_teams t JOIN jobs j ON j.job_id = t.job_id "
        "LEFT JOIN snapshots s ON s.job_id = j.job_id WHERE (t.answer = {p} AND j.submitted_unix_ms <= {p} "
        "OR t.answer = {p}) AND (s.state IS NULL OR s.state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')) LIMIT {p}",
        (PENDING, int(now_ms - timeout_s * 1000), EXPIRED, int(limit)))
    ended = 0
    for (job_id,) in rows:
        job = store.get_job(str(job_id))
        if job is not None and settle(store, job, now_ms, timeout_s):
            ended += 1
    return ended


def invited_view(store: Any, team: str, job_id: str) -> Optional[JobView]:
    """Return the view of ``job_id`` (the relay's id) when ``team`` is invited to it; None otherwise."""
    rows = store.read_sql("SELECT 1 FROM job_teams WHERE job_id = {p} AND team = {p}", (job_id, team))
    if not rows:
        return None
    view = store.view(job_id)
    if view is None or team not in slot_teams(view.job).invited:
        return None
    return view


@dataclass(frozen=True)
class Held:
    """What a held job waits for: the teams that have not accepted, and until when (None: no bound known)."""

    waiting: Tuple[str, ...]
    until_unix_ms: Optional[int]

    @property
    def until_text(self) -> str:
        """The deadline in UTC, ISO 8601 to the second (``2027-01-15T08:00:00Z``); "" without one."""
        import datetime

        if self.until_unix_ms is None:
            return ""
        at = datetime.datetime.fromtimestamp(self.until_unix_ms / 1000, datetime.timezone.utc)
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def message(self) -> str:
        """The job status's words for it (``JobStatus.message`` of a held job)."""
        until = f" (until {self.until_text})" if self.until_text else ""
        return (f"waiting for team(s) {', '.join(self.waiting)} to accept the invitation{until}; the station is not "
                f"sent the job and no arm moves before every team accepted")


def held(store: Any, job: JobRecord, timeout_s: Optional[float]) -> Optional[Held]:
    """Return what ``job`` waits for when an invited team has not accepted it, else None.

    The one source of a held job's deadline: the gRPC status (:func:`held_message`) and the web page both read it.
    """
    left = waiting_for(store, job)
    if not left:
        return None
    return Held(left, None if timeout_s is None else expires_unix_ms(job, timeout_s))


def held_message(store: Any, job: JobRecord, timeout_s: Optional[float]) -> str:
    """Return what a held job waits for, in words ("" when it is not held; no bound said when it is None)."""
    waits = held(store, job, timeout_s)
    return "" if waits is None else waits.message


def scoped_status(status: Any, teams: SlotTeams, team: str) -> Any:
    """Return ``status`` (``JobStatus``) as ``team`` may read it: only its own slots' declared policy specs.

    A job of one team is returned as it is. In a comparison between teams the provenance keeps the specs of the
    slots ``team`` serves (``slot_specs``; ``policy_spec_json``, the first slot's, only when that slot is its).
    """
    if not teams.invited or not status.HasField("provenance"):
        return status
    from strands_robots.wire.proto import evaluation_pb2 as ev

    scoped = ev.JobStatus()
    scoped.CopyFrom(status)
    provenance = scoped.provenance
    own = [s for s in provenance.slot_specs if teams.team_of(s.slot) == team]
    del provenance.slot_specs[:]
    provenance.slot_specs.extend(own)
    if not teams.slots or teams.slots[0][1] != team:
        provenance.policy_spec_json = ""
    return scoped


def episode_slots(status: Any) -> Dict[str, str]:
    """Return each listed episode's comparison slot (``JobStatus.episodes[].slot``) by episode id."""
    return {e.episode_id: e.slot for e in status.episodes if e.slot}


def visible_episodes(teams: SlotTeams, team: str, status: Any, episode_ids: Sequence[str]) -> List[str]:
    """Return the episodes of ``episode_ids`` whose slot ``team`` serves (every one for a job of one team)."""
    if not teams.invited:
        return list(episode_ids)
    slots = episode_slots(status) if status is not None else {}
    return [e for e in episode_ids if e in slots and teams.team_of(slots[e]) == team]
