"""What the verifier's parent and its workers say to each other, as typed records.

A frame on the channel (``forge.verifier.protocol.channel``) is a codec-encoded mapping; the worker turns
each one into a request (``parse_request``) and the parent each one into a reply
(``parse_reply``), once, where it arrives. A frame that is none of them, or holds a field of the
wrong type, is a protocol breach (code in a candidate's worker can write into its channel), and
past the channel nothing reads a message by key.

Requests (``*Request``, parent to worker) carry their ``kind`` on the wire, which decides the
record a frame is parsed into; a worker side answers each by its type (``answer``). Replies
(``*Reply``) are what its handlers return, or ``ErrorReply`` / ``ProblemErrorReply`` when they
raise. ``records`` holds what messages carry: models to build,
case descriptors, the timing plan, the facts the candidate's worker saw around a call.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from forge.verifier.protocol.records import (
    TRAIN_KEY,
    BoundPlan,
    CaseDescriptor,
    CaseFacts,
    InputShape,
    Message,
    ModelBuild,
    PartnerCase,
    TimingFacts,
    TimingPlan,
)
from forge.verifier.protocol.replies import (
    REPLIES,
    BaselineCallReply,
    BaselinesEndReply,
    BaselinesReadyReply,
    BoundReply,
    CaseDataReply,
    CaseResultReply,
    ErrorReply,
    GradDataReply,
    GradRunReply,
    HelloReply,
    LoadedReply,
    ProblemErrorReply,
    ProblemReply,
    ProfileReply,
    ReadyReply,
    Reply,
    RooflineReply,
    TickReply,
    TimedCallReply,
    TimeReadyReply,
    TimingBatchReply,
    TimingReply,
)
from forge.verifier.protocol.requests import (
    REQUESTS,
    BaselineCallRequest,
    BaselinesBeginRequest,
    BaselinesEndRequest,
    BindRequest,
    CaseDataRequest,
    CaseRequest,
    ExitRequest,
    GradDataRequest,
    GradRunRequest,
    InstantiateRequest,
    LoadRequest,
    ProfileRequest,
    Request,
    RooflineRequest,
    SetupRequest,
    TimeBeginRequest,
    TimeCallRequest,
    TimeEndRequest,
    TimingBatchRequest,
    Turns,
    TurnTimes,
    UserLoopRequest,
)


class MalformedMessage(Exception):
    """A frame that is not one of the messages (what was wrong, in a line)."""


def _said(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the frame"
    return f"{where}: {first['msg']}" + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")


def parse_reply(frame: Any) -> Reply:
    """The reply ``frame`` is; ``MalformedMessage`` if it is none."""
    try:
        return REPLIES.validate_python(frame)
    except ValidationError as exc:
        raise MalformedMessage(_said(exc)) from None


def parse_request(frame: Any) -> Request:
    """The request ``frame`` is; ``MalformedMessage`` if it is none."""
    try:
        return REQUESTS.validate_python(frame)
    except ValidationError as exc:
        raise MalformedMessage(_said(exc)) from None


__all__ = [
    "TRAIN_KEY",
    "BaselineCallReply",
    "BaselineCallRequest",
    "BaselinesBeginRequest",
    "BaselinesEndReply",
    "BaselinesEndRequest",
    "BaselinesReadyReply",
    "BindRequest",
    "BoundPlan",
    "BoundReply",
    "CaseDataReply",
    "CaseDataRequest",
    "CaseDescriptor",
    "CaseFacts",
    "CaseRequest",
    "CaseResultReply",
    "ErrorReply",
    "ExitRequest",
    "GradDataReply",
    "GradDataRequest",
    "GradRunReply",
    "GradRunRequest",
    "HelloReply",
    "InputShape",
    "InstantiateRequest",
    "LoadRequest",
    "LoadedReply",
    "MalformedMessage",
    "Message",
    "ModelBuild",
    "PartnerCase",
    "ProblemErrorReply",
    "ProblemReply",
    "ProfileReply",
    "ProfileRequest",
    "ReadyReply",
    "Reply",
    "Request",
    "RooflineReply",
    "RooflineRequest",
    "SetupRequest",
    "TickReply",
    "TimeBeginRequest",
    "TimeCallRequest",
    "TimeEndRequest",
    "TimeReadyReply",
    "TimedCallReply",
    "TimingBatchReply",
    "TimingBatchRequest",
    "TimingFacts",
    "TimingPlan",
    "TimingReply",
    "TurnTimes",
    "Turns",
    "UserLoopRequest",
    "parse_reply",
    "parse_request",
]
