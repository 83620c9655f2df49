"""The relay's protobuf messages and constants, in one namespace: ``from strands_robots.client import pb``.

Messages support attribute access (``status.state``); repeated fields are sequences (``len(status.episodes)``);
``answer_type`` is an enum whose values are ints, compared with the named constants here
(``item.answer_type == pb.ANSWER_TYPE_YES_NO``; ``pb.AnswerType.Name(item.answer_type)`` gives the name);
optional fields answer ``HasField`` (``status.HasField("station_last_heard_unix_ms")``); the scored item's
answer is a ``oneof``: ``item.WhichOneof("answer")`` is ``"yes_no"``, ``"count"``, ``"choice_index"`` or None,
so a present ``False`` or index ``0`` is told from no answer.

Job states and end conditions are strings, as the spec gives them; the constants below spell them.
"""

from strands_robots.wire.proto.evaluation_pb2 import (  # noqa: F401
    ANSWER_TYPE_CHOICE,
    ANSWER_TYPE_COUNT,
    ANSWER_TYPE_UNSPECIFIED,
    ANSWER_TYPE_YES_NO,
    AnswerType,
    EpisodeResult,
    JobStatus,
    ScoredItem,
    ScoringItemDefinition,
    ScoringSheet,
    Task,
)
from strands_robots.wire.proto.evaluation_service_pb2 import (  # noqa: F401
    CancelJobRequest,
    CancelJobResponse,
    GetStatusRequest,
    JobSummary,
    LeaderboardEntry,
    LeaderboardRequest,
    LeaderboardResponse,
    ListJobsRequest,
    ListJobsResponse,
    RespondInvitationRequest,
    RespondInvitationResponse,
    SubmitJobRequest,
    SubmitJobResponse,
)
from strands_robots.wire.proto.recording_pb2 import RecordingInfo  # noqa: F401
from strands_robots.wire.proto.suites_pb2 import (  # noqa: F401
    ChoiceRule,
    ListSuitesRequest,
    ListSuitesResponse,
    OfferedTask,
    StationOffer,
    StationSuites,
    SuiteJob,
    SuiteOffer,
    SuiteTrials,
)
from strands_robots.wire.proto.policy_session_pb2 import (  # noqa: F401
    Ack,
    Action,
    ActionChunk,
    EndEpisode,
    EpisodeEnd,
    EpisodeStart,
    JobEnded,
    Observation,
    PolicyAttached,
    PolicyError,
    PolicyReply,
    PolicyRequest,
    Preflight,
    SessionAttach,
    SessionOpen,
    StationLeft,
    Tensor,
    Value,
)

JOB_CREATED = "CREATED"
JOB_WAITING_POLICY = "WAITING_POLICY"
JOB_RUNNING = "RUNNING"
JOB_FINALIZING = "FINALIZING"
JOB_SUCCEEDED = "SUCCEEDED"
JOB_FAILED = "FAILED"
JOB_CANCELLED = "CANCELLED"
JOB_STATES = (JOB_CREATED, JOB_WAITING_POLICY, JOB_RUNNING, JOB_FINALIZING, JOB_SUCCEEDED, JOB_FAILED,
              JOB_CANCELLED)
TERMINAL_JOB_STATES = frozenset({JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED})

END_TIMEOUT = "timeout"
END_POLICY_COMPLETED = "policy_completed"
END_LEASE_LOST = "lease_lost"
END_AUTHORITY_LOST = "authority_lost"
END_SAFETY_STOP = "safety_stop"
END_START_POSE_UNREACHED = "start_pose_unreached"
END_CONDITIONS = (END_TIMEOUT, END_POLICY_COMPLETED, END_LEASE_LOST, END_AUTHORITY_LOST, END_SAFETY_STOP,
                  END_START_POSE_UNREACHED)
# The station's own two, beyond the spec's six: the policy failed its rollout (scored, never re-run), or the
# station's infrastructure ended it (kept unscored with the reason in end_detail, out of the rates; its task runs
# again as a new episode).
END_POLICY_ERROR = "policy_error"
END_INFRASTRUCTURE_FAULT = "infrastructure_fault"
STATION_END_CONDITIONS = END_CONDITIONS + (END_POLICY_ERROR, END_INFRASTRUCTURE_FAULT)
