"""A tiny LangGraph graph served over AG-UI by `ag-ui-langgraph`'s FastAPI endpoint.

Usage: python langgraph_agui.py MODEL_URL — MODEL_URL is an OpenAI-compatible base
(`http://127.0.0.1:PORT/v1`, the interop tests' fake), used through langchain-openai's
`ChatOpenAI`. The graph is the usual two-node loop: `chat` calls the model with the backend
tool `lookup` bound, plus the frontend tools the client sent (`state["tools"]`, which
ag-ui-langgraph fills from RunAgentInput); when the model calls `lookup`, `tools` runs it and
the loop goes back to `chat`; a frontend tool call ends the run so the client can answer it.
`POST /agent` takes the runs. Run in the langgraph venv (see tests/interop/venvs.py).
"""

from __future__ import annotations

import sys
from typing import Any

from _listen import serve
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode


@tool
def lookup(topic: str) -> str:
    """Look a topic up and return what is known about it."""
    return f"lookup result for {topic}: 42"


class State(MessagesState):
    tools: list[Any]


def build(model_url: str) -> FastAPI:
    model = ChatOpenAI(model="fake-model", base_url=model_url, api_key="sk-fake", max_retries=0)

    async def chat(state: State) -> dict[str, Any]:
        frontend = state.get("tools") or []
        bound = model.bind_tools([lookup, *frontend])
        system = SystemMessage(content="You are a small test agent. Use tools when asked.")
        reply = await bound.ainvoke([system, *state["messages"]])
        return {"messages": [reply]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        return "tools" if any(c["name"] == "lookup" for c in calls) else END

    graph = StateGraph(State)
    graph.add_node("chat", chat)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "chat")
    graph.add_conditional_edges("chat", route, ["tools", END])
    graph.add_edge("tools", "chat")
    compiled = graph.compile(checkpointer=MemorySaver())

    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="tiny", graph=compiled), "/agent")
    return app


if __name__ == "__main__":
    serve(build(sys.argv[1]))
