"""`steerable-bridge login`: save a model provider's base URL and key for later runs.

It is what an ACP client runs for the `terminal` auth method (in its terminal, before the
agent starts serving), and what a user runs by hand. Interactive on a terminal: pick the
provider (OpenAI-compatible or Anthropic), a base URL (Enter for the provider's default)
and the key, read without echo. Flags make it non-interactive: `--provider`, `--base-url`,
and `--key-stdin` (the key is the first line of stdin; without it and off a terminal the key
is empty, which only a local base URL accepts). The entry is written by `credentials.py`
(0600 file in a 0700 directory); environment variables still win over it. Exit 0 once saved.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any, TextIO
from urllib.parse import urlsplit

from steerable_bridge.commands.errors import ConfigError

__all__ = ["main", "register", "run_login"]

DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
LABELS = {
    "openai": "OpenAI-compatible (OpenAI, Ollama, vLLM, LM Studio, ...)",
    "anthropic": "Anthropic",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "login", help="save a model provider's base URL and API key (0600, in your config dir)"
    )
    add_login_options(parser)
    parser.set_defaults(func=main)


def add_login_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--provider",
        choices=sorted(DEFAULT_URLS),
        help="openai (any OpenAI-compatible server) or anthropic",
    )
    parser.add_argument("--base-url", help="the provider's base URL (default: its public API)")
    parser.add_argument(
        "--key-stdin", action="store_true", help="read the API key from the first line of stdin"
    )


def main(args: argparse.Namespace) -> int:
    return run_login(
        provider=getattr(args, "provider", None),
        base_url=getattr(args, "base_url", None),
        key_stdin=getattr(args, "key_stdin", False),
    )


def run_login(
    *,
    provider: str | None,
    base_url: str | None,
    key_stdin: bool,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Ask for what the flags leave out (on a terminal), check it, save it; 0 when saved."""
    from steerable_bridge.adapters.llm.http_stream import is_loopback
    from steerable_bridge.commands.credentials import StoredKey, credentials_path, save_credential

    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    interactive = stdin.isatty() and not key_stdin
    if provider is None:
        if not interactive:
            raise ConfigError("login: --provider is required when stdin is not a terminal")
        provider = _ask_provider(stdin, out)
    if base_url is None:
        base_url = _ask(stdin, out, f"Base URL [{DEFAULT_URLS[provider]}]: ") if interactive else ""
    base_url = base_url.strip().rstrip("/")
    url = base_url or DEFAULT_URLS[provider]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"login: {url!r} is not an http(s) URL; pass one such as {DEFAULT_URLS[provider]}"
        )
    if key_stdin:
        key = stdin.readline().strip()
    elif interactive:
        key = getpass.getpass("API key (hidden; Enter for none, for a local server): ").strip()
    else:
        key = ""
    if not key and not is_loopback(url):
        raise ConfigError(
            f"login: {url} needs an API key; type it when asked, or pass it on stdin"
            " with --key-stdin"
        )
    path = credentials_path()
    try:
        save_credential(path, provider, StoredKey(base_url=base_url, api_key=key))
    except OSError as error:
        raise ConfigError(
            f"login: cannot write {path}: {error}; check that directory's permissions"
        ) from None
    what = "a key" if key else "no key"
    print(f"Saved {provider} ({url}, {what}) to {path}.", file=out)
    return 0


def _ask(stdin: TextIO, out: TextIO, prompt: str) -> str:
    out.write(prompt)
    out.flush()
    line = stdin.readline()
    if not line:
        raise ConfigError("login: stdin closed before an answer; run it again in a terminal")
    return line.strip()


def _ask_provider(stdin: TextIO, out: TextIO) -> str:
    names = sorted(DEFAULT_URLS, key=lambda name: name != "openai")
    for number, name in enumerate(names, 1):
        print(f"  {number}. {LABELS[name]}", file=out)
    for _ in range(3):
        answer = _ask(stdin, out, "Provider [1]: ").lower() or "1"
        if answer.isdigit() and 1 <= int(answer) <= len(names):
            return names[int(answer) - 1]
        if answer in DEFAULT_URLS:
            return answer
        print(f"  answer 1 to {len(names)}", file=out)
    raise ConfigError("login: no provider chosen; pass --provider openai or --provider anthropic")
