"""The verifier's messages: parsed once at the channel, refused when malformed, answered by a side."""

from __future__ import annotations

import typing

import pytest
import torch

from forge.verifier.protocol import (
    CaseFacts,
    CaseResultReply,
    ErrorReply,
    ExitRequest,
    MalformedMessage,
    Message,
    SetupRequest,
    TimingFacts,
    TimingReply,
    codec,
    parse_reply,
    parse_request,
)
from forge.verifier.protocol.requests import Request
from forge.verifier.worker.candidate_side import CandidateSide
from forge.verifier.worker.reference_side import ReferenceSide


def _facts() -> CaseFacts:
    return CaseFacts(
        layout="tensor",
        types=["torch.Tensor"],
        plain=[True],
        storage_ok=[True],
        devices=["cpu"],
        aliases=[[]],
        busy_python_threads=[],
        new_native_threads=0,
        call_index=0,
        reference_calls=0,
        inputs_modified=[],
        changed_after_return=[],
        clock_tampering=[],
    )


def test_a_reply_survives_the_wire_as_the_same_record_with_its_tensors():
    out = torch.arange(6.0).reshape(2, 3)
    reply = CaseResultReply(id="base/0:normal:0", outputs=[out], outputs2=[out.clone()], facts=_facts())
    back = parse_reply(codec.decode(codec.encode(reply.wire())))
    assert isinstance(back, CaseResultReply) and back.facts == reply.facts
    assert torch.equal(back.outputs[0], out) and back.outputs_refill is None


@pytest.mark.parametrize(
    ("frame", "said"),
    [
        ({"kind": "case_result", "id": "x", "outputs": "all good", "outputs2": [], "facts": {}}, "outputs"),
        ({"kind": "timed_call", "ns": -5}, "ns"),
        ({"kind": "timed_call", "ns": 5, "extra": 1}, "extra"),
        ({"kind": "victory"}, "kind"),
        ({"type": "tick"}, "kind"),
        ([1, 2], "valid"),
    ],
)
def test_a_malformed_reply_is_refused_and_says_which_field(frame, said):
    with pytest.raises(MalformedMessage, match=said):
        parse_reply(frame)


def test_a_case_result_whose_facts_disagree_with_its_outputs_is_refused():
    out = torch.ones(3)
    frame = CaseResultReply(id="c", outputs=[out], outputs2=[out], facts=_facts()).wire()
    frame["facts"] = {**frame["facts"], "devices": []}  # the checks index devices by output
    with pytest.raises(MalformedMessage, match="devices"):
        parse_reply(frame)


def test_timing_replies_refuse_negative_times():
    good = TimingReply(
        times_ns=[1], host_ns=[1], window_ns=[1], launch_ns=[0], outputs=[[]], facts=TimingFacts()
    ).wire()
    assert isinstance(parse_reply(good), TimingReply)
    with pytest.raises(MalformedMessage, match="times_ns"):
        parse_reply({**good, "times_ns": [-1]})
    with pytest.raises(MalformedMessage, match="differ in length"):
        parse_reply({**good, "host_ns": [1, 2]})


def _answered_by(side: ReferenceSide | CandidateSide, request: Message) -> bool:
    """Whether ``side`` takes ``request`` to a handler of its own (a bare side's handler fails on
    its missing state, or answers: either way it was reached), rather than saying it answers none."""
    try:
        reply = side.answer(request, lambda: None)
    except Exception:
        return True
    return not (isinstance(reply, ErrorReply) and "answers no" in reply.message)


def test_every_request_is_answered_by_one_worker_side_by_its_type():
    types = typing.get_args(typing.get_args(Request)[0])
    kinds = [typing.get_args(cls.model_fields["kind"].annotation)[0] for cls in types]
    assert len(kinds) == len(set(kinds)) > 10
    sides = (object.__new__(ReferenceSide), object.__new__(CandidateSide))  # no state: handlers fail once reached
    for cls in types:
        if cls is ExitRequest:  # the worker's loop ends on it
            continue
        answering = [type(side).__name__ for side in sides if _answered_by(side, cls.model_construct())]
        assert len(answering) == 1, (cls.__name__, answering)
    refused = CandidateSide.answer(sides[1], SetupRequest.model_construct(), lambda: None)
    assert isinstance(refused, ErrorReply) and refused.stage == "internal", refused
    assert parse_request({"kind": "time_call", "index": 3}).index == 3  # type: ignore[union-attr]
    with pytest.raises(MalformedMessage):
        parse_request({"kind": "time_call", "index": "three"})
