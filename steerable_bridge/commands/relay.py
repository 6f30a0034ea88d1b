"""`relay_signals(port)`: the background task every ACP serving mode runs beside the server.

`acp` (`acp.py`), its AG-UI bridge (`acp_agui.py`) and its remote listener (`acp_remote.py`)
all hand it to the transport as `background`, so that steer and cancel signals published by
other processes sharing the store reach the turns this process runs. It lives apart from
`acp.py` so the two other modes need not import the command that imports them. It never
fails the connection: a store that cannot listen costs a warning.
"""

from __future__ import annotations

from typing import Any

__all__ = ["relay_signals"]


async def relay_signals(port: Any) -> None:
    """Apply steer / cancel signals from other processes sharing the store to the turns
    this one runs, while it serves; a store that cannot listen costs a warning, not the
    connection."""
    import logging

    from steerable_bridge.runtime.ports.storage import StoreError

    try:
        await port.relay_signals()
    except StoreError as err:
        logging.getLogger("steerable_bridge.acp").warning(
            "steer and cancel from other processes will not arrive: %s", err.message
        )
