"""Stored model credentials: what `steerable-bridge login` saves and model routes fall back on.

One JSON file, `$XDG_CONFIG_HOME/steerable-bridge/credentials.json` (else
`~/.config/steerable-bridge/credentials.json`), created 0600 in a 0700 directory, holds at
most one entry per provider (`openai` for any OpenAI-compatible server, `anthropic`): a base
URL and a key. Commands read it once at start-up (`ModelEnv`) and hand the result to the
adapters as the environment they configure from: a provider's stored entry applies only
when the environment sets none of that provider's key or base-URL variables, so a variable
always wins and a stored key is never sent to a base URL the environment chose.
`ModelEnv.reload()` re-reads the file (after a login in the editor's terminal). A file that
cannot be read or parsed is logged and ignored: routes then behave as if nothing is stored.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PROVIDERS",
    "ModelEnv",
    "StoredKey",
    "credentials_path",
    "load_credentials",
    "overlay",
    "save_credential",
]

log = logging.getLogger("steerable_bridge.credentials")

PROVIDERS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "openai": (
        ("STEERABLE_API_KEY", "OPENAI_API_KEY", "STEERABLE_BASE_URL", "OPENAI_BASE_URL"),
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ),
    "anthropic": (
        ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
}
"""Per provider: the variables whose presence means "configured by the environment", and
the key and base-URL variables a stored entry fills in."""


@dataclass(frozen=True, slots=True)
class StoredKey:
    """One provider's stored base URL (empty: the provider's default) and key (may be empty)."""

    base_url: str
    api_key: str


def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    """Where credentials live: under `$XDG_CONFIG_HOME`, else `~/.config`."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "steerable-bridge" / "credentials.json"


def load_credentials(path: Path) -> dict[str, StoredKey]:
    """The stored entries by provider; empty when the file is missing or unreadable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        log.warning("ignoring %s: %s; run `steerable-bridge login` to rewrite it", path, error)
        return {}
    found: dict[str, StoredKey] = {}
    providers = raw.get("providers") if isinstance(raw, dict) else None
    if not isinstance(providers, dict):
        log.warning("ignoring %s: no providers object; run `steerable-bridge login`", path)
        return {}
    for name, entry in providers.items():
        if name not in PROVIDERS or not isinstance(entry, dict):
            continue
        base_url, api_key = entry.get("base_url", ""), entry.get("api_key", "")
        if isinstance(base_url, str) and isinstance(api_key, str):
            found[name] = StoredKey(base_url=base_url, api_key=api_key)
    return found


def save_credential(path: Path, provider: str, key: StoredKey) -> None:
    """Store `key` for `provider`, keeping the other providers' entries; the directory is
    made 0700 and the file written 0600 and renamed into place (never half-written)."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    entries = load_credentials(path)
    entries[provider] = key
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    body = {
        "version": 1,
        "providers": {
            name: {"base_url": entry.base_url, "api_key": entry.api_key}
            for name, entry in sorted(entries.items())
        },
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".credentials-", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=2)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def overlay(env: Mapping[str, str], stored: Mapping[str, StoredKey]) -> dict[str, str]:
    """`env` plus the stored entries of the providers `env` does not configure."""
    merged = dict(env)
    for name, entry in stored.items():
        configured, key_var, url_var = PROVIDERS[name]
        if any(env.get(var) for var in configured):
            continue
        if entry.api_key:
            merged[key_var] = entry.api_key
        if entry.base_url:
            merged[url_var] = entry.base_url
    return merged


class ModelEnv(Mapping[str, str]):
    """The environment model routes configure from: the process environment overlaid with
    the stored credentials, read once here and again on `reload()`."""

    def __init__(self, env: Mapping[str, str] | None = None, path: Path | None = None) -> None:
        self._env = dict(os.environ if env is None else env)
        self.path = credentials_path(self._env) if path is None else path
        self._merged = overlay(self._env, load_credentials(self.path))

    def reload(self) -> None:
        """Re-read the credentials file (the process environment is not re-read)."""
        self._merged = overlay(self._env, load_credentials(self.path))

    def __getitem__(self, key: str) -> str:
        return self._merged[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged)

    def __len__(self) -> int:
        return len(self._merged)
