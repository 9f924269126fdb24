"""A local HTTP server that speaks the OpenAI chat-completions protocol and replays scripted
replies: the real litellm client talks to it, nothing reaches the network. The tests drive
forge's LLM roles through it, and so do the benchmarks that measure prompts (``costs.prompt_sizes``)
and the GPU suite's ``llm_cuda`` part.

Requests are told apart by their system prompt: the judge's says it reviews candidates. Every
request body is kept for the caller to inspect. A request asking to stream gets its reply as
server-sent events, a chunk at a time, with the usage last (as OpenAI's API sends it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    coder: list[str] = field(default_factory=list)
    judge: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: int | None = None  # answer every request with this HTTP status
    chunk_chars: int = 40  # a streamed reply (a request with "stream": true) comes this many characters a chunk
    chunk_delay_s: float = 0.01

    def role(self, body: dict[str, Any]) -> str:
        system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
        if "review" in system:
            return "judge"
        return "ping" if body.get("max_tokens") == 1 else "coder"

    def reply(self, body: dict[str, Any]) -> str:
        role = self.role(body)
        self.requests.append({"role": role, **body})
        if role == "ping":
            return "ok"
        queue = self.coder if role == "coder" else self.judge
        return queue.pop(0) if queue else "I have nothing more to say."


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if script.fail_with:
                self._send(script.fail_with, {"error": {"message": "scripted failure", "type": "server_error"}})
                return
            text = script.reply(body)
            if body.get("stream"):
                self._stream(text, body)
                return
            self._send(
                200,
                {
                    "id": f"chatcmpl-{len(script.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test-model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                },
            )

        def _stream(self, text: str, body: dict[str, Any]) -> None:
            """The reply as server-sent events, a few characters a chunk, then the usage."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            base = {
                "id": f"chatcmpl-{len(script.requests)}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", "test-model"),
            }
            pieces = [text[i : i + script.chunk_chars] for i in range(0, len(text), script.chunk_chars)] or [""]
            for i, piece in enumerate(pieces):
                delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                time.sleep(script.chunk_delay_s)
            self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            usage = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}
            self._event({**base, "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def serve(script: Script) -> Iterator[str]:
    """Run the server on a free local port; yields its base URL (for --api-base)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
