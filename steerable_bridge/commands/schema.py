"""`steerable-bridge schema`: print the LoopEvent taxonomy as JSON Schema."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("schema", help="print the LoopEvent JSON Schema")
    parser.add_argument("--kinds", action="store_true", help="print only the kind names")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from steerable_bridge.runtime import events
    from steerable_bridge.runtime.encoding import codec

    if args.kinds:
        print("\n".join(events.KINDS))
    else:
        print(json.dumps(codec.schema(), indent=2))
    return 0
