"""A tiny pydantic-ai agent served over AG-UI with its own adapter (`AGUIAdapter`).

Usage: python pydantic_ai_agui.py MODEL_URL — MODEL_URL is an OpenAI-compatible base
(`http://127.0.0.1:PORT/v1`, the interop tests' fake). `POST /agent` takes a RunAgentInput and
streams the run as pydantic-ai's adapter does. The agent has one backend tool, `lookup`, that
the server runs itself; tools the client sends in RunAgentInput are frontend tools, which the
adapter hands back to the client. Run in the pydantic-ai venv (see tests/interop/venvs.py).
"""

from __future__ import annotations

import sys

from _listen import serve
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def build(model_url: str) -> Starlette:
    model = OpenAIChatModel(
        "fake-model", provider=OpenAIProvider(base_url=model_url, api_key="sk-fake")
    )
    agent = Agent(model, instructions="You are a small test agent. Use tools when asked.")

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up and return what is known about it."""
        return f"lookup result for {topic}: 42"

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/agent", run, methods=["POST"])])


if __name__ == "__main__":
    serve(build(sys.argv[1]))
