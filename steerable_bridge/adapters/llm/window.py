"""Find a route's context window: the setting, else the model server, else a table of names.

Compaction and the usage displays need the window of the model behind an `openai:` route.
`STEERABLE_CONTEXT_WINDOW` wins (the provider never calls this then); `window_from_env` is
the one reader of that variable, which every HTTP provider's `config_from_env` calls. Otherwise
`discover_window` asks the server the way each one answers, first answer wins:

- vLLM: `GET {base}/models` lists `max_model_len` per model id;
- llama.cpp server: `GET {root}/props` holds `n_ctx` (in `default_generation_settings`);
- Ollama: `POST {root}/api/show` gives `num_ctx` in `parameters` when the model sets one,
  else its default of 4,096 tokens (capped by the model's own `context_length`);
- LM Studio: `GET {root}/api/v0/models/{model}` gives `loaded_context_length` or
  `max_context_length`;

and falls back to `known_window(model)` (a short table of hosted families: a guess, which
`probe_window` says so the user can be told), else None
(then only overflow recovery applies). Each probe is bounded by a short timeout and a
failed probe is just "no answer". `WindowCache` makes it once per route per process.
Uses the provider's pooled `httpx.AsyncClient`; never raises (only `window_from_env` does,
a `RouteError` for a bad value).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from steerable_bridge.runtime.agent_sessions.routing import RouteError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "KNOWN_WINDOWS",
    "WINDOW_ENV",
    "WindowCache",
    "discover_window",
    "known_window",
    "probe_window",
    "window_from_env",
]

logger = logging.getLogger(__name__)

OLLAMA_DEFAULT_CTX = 4096
"""What Ollama gives a model whose Modelfile sets no `num_ctx` (OLLAMA_CONTEXT_LENGTH)."""

KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 65_536),
    ("llama-3.1", 131_072),
    ("llama3.1", 131_072),
    ("llama-3.2", 131_072),
    ("llama3.2", 131_072),
    ("llama-3.3", 131_072),
    ("llama3.3", 131_072),
    ("qwen3", 40_960),
    ("qwen2.5", 32_768),
    ("mistral-large", 131_072),
    ("mistral", 32_768),
    ("gemma3", 131_072),
    ("gemma2", 8_192),
)
"""Family prefixes (matched after any `vendor/` part, longest first) and their windows."""

_BY_LENGTH = sorted(KNOWN_WINDOWS, key=lambda item: -len(item[0]))

WINDOW_ENV = "STEERABLE_CONTEXT_WINDOW"
"""The variable that sets a route's context window in tokens, over anything discovered."""


def tokens_from_env(
    env: Mapping[str, str], name: str, *, minimum: int = 1, remedy: str | None = None
) -> int | None:
    """A token count from the variable `name` in `env`, or None when unset or blank;
    RouteError `invalid_setting` (one line naming the variable, and `remedy` when given) when
    it is not a whole number of at least `minimum`."""
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        bound = "above zero" if minimum == 1 else f"of at least {minimum}"
        raise RouteError(
            "invalid_setting", f"{name}={text!r} is not a whole number of tokens {bound}", remedy
        )
    return value


def window_from_env(env: Mapping[str, str]) -> int | None:
    """`STEERABLE_CONTEXT_WINDOW` from `env` as a number of tokens (`tokens_from_env`)."""
    return tokens_from_env(
        env,
        WINDOW_ENV,
        remedy=f"set {WINDOW_ENV} to the model's context window (such as 131072), or unset it"
        " for the provider's default",
    )


def known_window(model: str) -> int | None:
    """The window of a well-known model family, or None."""
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, window in _BY_LENGTH:
        if name.startswith(prefix):
            return window
    return None


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value > 0:
        return int(value)
    return None


def _from_models(body: Any, model: str) -> int | None:
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, Mapping)]
    chosen = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in chosen:
        found = _positive(entry.get("max_model_len")) or _positive(entry.get("context_length"))
        if found:
            return found
    return None


def _from_props(body: Any) -> int | None:
    if not isinstance(body, Mapping):
        return None
    settings = body.get("default_generation_settings")
    if isinstance(settings, Mapping) and _positive(settings.get("n_ctx")):
        return _positive(settings.get("n_ctx"))
    return _positive(body.get("n_ctx"))


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.MULTILINE)


def _from_ollama(body: Any) -> int | None:
    if not isinstance(body, Mapping):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str) and (match := _NUM_CTX.search(parameters)):
        return int(match.group(1))
    info = body.get("model_info")
    if not isinstance(info, Mapping):
        return None
    trained = next(
        (_positive(v) for k, v in info.items() if str(k).endswith(".context_length")), None
    )
    return min(trained, OLLAMA_DEFAULT_CTX) if trained else OLLAMA_DEFAULT_CTX


def _from_lmstudio(body: Any) -> int | None:
    if not isinstance(body, Mapping):
        return None
    return _positive(body.get("loaded_context_length")) or _positive(body.get("max_context_length"))


async def _json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    timeout_s: float,
    body: Any = None,
) -> Any:
    import httpx

    try:
        with anyio.fail_after(timeout_s):
            reply = await client.request(
                method, url, headers=dict(headers), json=body, timeout=timeout_s
            )
        if reply.status_code != 200:
            return None
        return reply.json()
    except (httpx.HTTPError, ValueError, TimeoutError) as error:
        logger.debug("context window probe %s %s: %s", method, url, error)
        return None


async def discover_window(
    client: httpx.AsyncClient,
    base_url: str,
    model: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 3.0,
) -> int | None:
    """The window the server behind `base_url` reports for `model`, else `known_window`."""
    window, _ = await probe_window(client, base_url, model, headers=headers, timeout_s=timeout_s)
    return window


async def probe_window(
    client: httpx.AsyncClient,
    base_url: str,
    model: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 3.0,
) -> tuple[int | None, bool]:
    """(window, guessed): as `discover_window`, and whether the window is only the table's
    figure for the model's family (no server reported one)."""
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    sent = headers or {}
    probes: tuple[tuple[str, str, Any, Callable[[Any], int | None]], ...] = (
        ("GET", f"{base}/models", None, lambda body: _from_models(body, model)),
        ("GET", f"{root}/props", None, _from_props),
        ("POST", f"{root}/api/show", {"model": model}, _from_ollama),
        ("GET", f"{root}/api/v0/models/{model}", None, _from_lmstudio),
    )
    for method, url, body, read in probes:
        found = read(await _json(client, method, url, sent, timeout_s, body))
        if found:
            logger.info("context window of %s: %d tokens (from %s)", model, found, url)
            return found, False
    guess = known_window(model)
    return guess, guess is not None


class WindowCache:
    """One discovery per key (a route) per process; concurrent askers wait for the first."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], int | None] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self.guessed: set[tuple[str, str]] = set()
        """Keys whose window is the table's guess (a probe adds them; see `probe_window`)."""

    def peek(self, key: tuple[str, str]) -> tuple[bool, int | None]:
        """(known, window) without asking anyone."""
        return (key in self._found, self._found.get(key))

    async def get(
        self, key: tuple[str, str], probe: Callable[[], Awaitable[int | None]]
    ) -> int | None:
        if key in self._found:
            return self._found[key]
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._found:
                self._found[key] = await probe()
        return self._found[key]
