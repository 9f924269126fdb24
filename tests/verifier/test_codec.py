"""The worker wire format: round trips, and refusal of anything malformed (no pickle ever)."""

from __future__ import annotations

import pickle
import socket
import struct

import pytest
import torch

from forge.verifier.protocol import codec
from forge.verifier.protocol.channel import Channel, ChannelClosed


def test_round_trip_nested_values_and_dtypes():
    obj = {
        "a": [torch.randn(3, 4), torch.arange(5), (torch.tensor(True), 1.5)],
        "b": torch.randn(2, 3).to(torch.bfloat16),
        "c": torch.empty(0, 4),
        "d": None,
        "e": float("nan"),
        "s": "text",
        "nc": torch.randn(4, 6).t(),  # non-contiguous
    }
    back = codec.decode(codec.encode(obj))
    assert torch.equal(back["a"][0], obj["a"][0])
    assert torch.equal(back["a"][1], obj["a"][1])
    assert isinstance(back["a"][2], tuple) and bool(back["a"][2][0])
    assert back["b"].dtype == torch.bfloat16 and torch.equal(back["b"], obj["b"])
    assert back["c"].shape == (0, 4)
    assert back["d"] is None and back["s"] == "text"
    assert torch.equal(back["nc"], obj["nc"])


def test_tensor_subclasses_are_sent_as_plain_tensors():
    class Sub(torch.Tensor):
        pass

    t = torch.ones(3).as_subclass(Sub)
    assert type(codec.decode(codec.encode([t]))[0]) is torch.Tensor


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        struct.pack("<Q", 1000) + b"{}",
        struct.pack("<Q", 2) + b"[]",
        # header claims a tensor bigger than the payload
        (lambda h: struct.pack("<Q", len(h)) + h)(
            b'{"data": {"__tensor__": 0}, "tensors": [{"dtype": "torch.float32", "shape": [1000], "nbytes": 4000}]}'
        ),
        # dtype that is not a torch dtype
        (lambda h: struct.pack("<Q", len(h)) + h + b"\0" * 8)(
            b'{"data": {"__tensor__": 0}, "tensors": [{"dtype": "os.system", "shape": [2], "nbytes": 8}]}'
        ),
    ],
)
def test_malformed_frames_are_refused(payload):
    with pytest.raises((ValueError, KeyError, TypeError)):
        codec.decode(payload)


def test_channel_refuses_pickle_frames():
    a, b = socket.socketpair()
    try:
        body = b"P" + pickle.dumps({"type": "problem"})
        a.sendall(struct.pack("<Q", len(body)) + body)
        with pytest.raises(ChannelClosed, match="not in forge's wire format"):
            Channel(b).recv(deadline=None)
    finally:
        a.close()
        b.close()


def test_channel_round_trip():
    a, b = socket.socketpair()
    try:
        x = torch.randn(100, 10)
        Channel(a).send({"x": x})
        assert torch.equal(Channel(b).recv()["x"], x)
    finally:
        a.close()
        b.close()
