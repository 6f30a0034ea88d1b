"""`ConfigError`: a configuration mistake the CLI prints as one line per problem, exit 2.

Its own module so that the settings model (`settings.py`), which every command's options
read, and every command module can raise it without importing the composition root
(`common.py`). The message names the remedy; a message of several lines is several problems.
"""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(Exception):
    """A configuration mistake; the message names the remedy."""
