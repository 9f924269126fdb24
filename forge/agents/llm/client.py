"""A thin litellm client: one chat completion with retries, tokens and dollar cost, streamed
when the caller wants to show the reply as it arrives.

litellm is imported on first use (never at forge import) and told to use its bundled price map,
so nothing reaches the network until a request is made. Rate limits, timeouts and transient
server errors are retried with exponential backoff; a missing key, an unknown model or an
unreachable provider becomes ``ProviderError`` (exit code 3).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge.core.errors import ProviderError

_RETRIES = 4
_BACKOFF_S = 1.0
_STREAM_EVERY_S = 0.2  # a streamed reply is reported at most this often


@dataclass
class Completion:
    text: str
    tokens: int
    cost_usd: float | None
    cost_known: bool


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def context_tokens(model: str) -> int | None:
    """The input context of ``model`` as litellm's bundled map knows it (None: not listed)."""
    table = _litellm().model_cost
    entry = table.get(model) or table.get(model.split("/", 1)[-1]) or {}
    found = entry.get("max_input_tokens") or entry.get("max_tokens")
    return int(found) if found else None


class LLMClient:
    """Chat completions for one model (``openai/gpt-4o``, ``anthropic/...``, ``ollama_chat/...``)."""

    def __init__(self, model: str, api_base: str | None = None, timeout_s: float = 300.0) -> None:
        self.model, self.api_base, self.timeout_s = model, api_base, timeout_s

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.model, "timeout": self.timeout_s, "num_retries": 0}
        if self.api_base:
            kw["api_base"] = self.api_base
            # Local OpenAI-compatible servers (vLLM, llama.cpp) take any key; the client wants one.
            if self.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kw["api_key"] = "not-needed"
        return kw

    def complete(
        self,
        messages: list[dict[str, str]],
        max_tokens: int | None = None,
        retries: int = _RETRIES,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One reply. ``on_text``: the reply is streamed, and told the text so far as it grows
        (at most every ``_STREAM_EVERY_S``, and once complete)."""
        litellm = _litellm()
        transient = (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
        )
        fatal = (
            litellm.AuthenticationError,
            litellm.NotFoundError,
            litellm.BadRequestError,
            litellm.PermissionDeniedError,
        )
        delay = _BACKOFF_S
        for attempt in range(retries + 1):
            try:
                if on_text is None:
                    resp = litellm.completion(messages=messages, max_tokens=max_tokens, **self._kwargs())
                else:
                    resp = self._streamed(litellm, messages, max_tokens, on_text)
                break
            except fatal as exc:
                raise ProviderError(f"{self.model}: the provider refused the request ({_short(exc)})") from None
            except transient as exc:
                if attempt == retries:
                    where = f" at {self.api_base}" if self.api_base else ""
                    raise ProviderError(
                        f"{self.model}{where}: no answer after {retries + 1} tries ({_short(exc)})"
                    ) from None
                time.sleep(delay)
                delay *= 2
            except Exception as exc:  # litellm wraps provider errors in many classes
                raise ProviderError(f"{self.model}: the call failed ({type(exc).__name__}: {_short(exc)})") from None
        text = resp.choices[0].message.content or ""
        usage = getattr(resp, "usage", None)
        tokens = int(getattr(usage, "total_tokens", 0) or 0)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=resp))
            known = True
        except Exception:  # no price for this model (local servers, new models): say unknown
            cost, known = None, False
        return Completion(text, tokens, cost, known)

    def _streamed(
        self, litellm: Any, messages: list[dict[str, str]], max_tokens: int | None, on_text: Callable[[str], None]
    ) -> Any:
        """A streamed completion, put back together as one response (usage included, for the cost)."""
        chunks, text, told = [], "", 0.0
        stream = litellm.completion(
            messages=messages,
            max_tokens=max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            **self._kwargs(),
        )
        for chunk in stream:
            chunks.append(chunk)
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta:
                text += delta
                if time.monotonic() - told >= _STREAM_EVERY_S:
                    on_text(text)
                    told = time.monotonic()
        on_text(text)
        return litellm.stream_chunk_builder(chunks, messages=messages)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def check_model(model: str, api_base: str | None) -> None:
    """Fail early (ProviderError) when the model cannot be used: a missing key, or no answer."""
    litellm = _litellm()
    if not api_base:
        try:
            env = litellm.validate_environment(model=model)
        except Exception as exc:
            raise ProviderError(f"{model!r} is not a model litellm knows ({_short(exc)})") from None
        missing = env.get("missing_keys") or []
        if missing:
            raise ProviderError(
                f"{model}: set {', '.join(missing)} in the environment (or use --api-base for a local server)"
            )
    LLMClient(model, api_base, timeout_s=30).complete(
        [{"role": "user", "content": "Reply with: ok"}], max_tokens=1, retries=1
    )
