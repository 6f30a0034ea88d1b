"""A peer for `agui_concurrency.py --peer`: pydantic-ai's `AGUIAdapter` on the same fake model.

Not part of steerable-bridge and not one of its dependencies: run it with a Python that has
`pydantic-ai-slim[ag-ui,openai]` and uvicorn installed (a throwaway environment). It serves
`POST /agent` (a pydantic-ai `Agent` on `OpenAIChatModel("bench")`, pointed at
`STEERABLE_BASE_URL`, the fake server `openai_server.py`) and `GET /health` on 127.0.0.1.

    uv venv /tmp/pai && uv pip install --python /tmp/pai/bin/python \\
        'pydantic-ai-slim[ag-ui,openai]' uvicorn
    uv run python bench/agui_concurrency.py --runs 300 --concurrency 100 --model-http 20 \\
        --server-cpus 0 --peer /tmp/pai/bin/python
"""

from __future__ import annotations

import argparse
import os

import uvicorn
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def app() -> Starlette:
    provider = OpenAIProvider(base_url=os.environ["STEERABLE_BASE_URL"], api_key="bench")
    agent = Agent(OpenAIChatModel("bench", provider=provider))

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[Route("/agent", run, methods=["POST"]), Route("/health", health, methods=["GET"])]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app(), host="127.0.0.1", port=args.port, log_level="warning")
