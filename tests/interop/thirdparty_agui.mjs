// Drives a third-party AG-UI server (pydantic-ai, ag-ui-langgraph, ...) with the official
// @ag-ui/client HttpAgent, which checks the event order of every stream as it reads it.
// Usage: node thirdparty_agui.mjs http://127.0.0.1:PORT/agent TRIGGER
// TRIGGER is the phrase that makes the fake model call a tool. Runs three scenarios and
// prints one JSON object on stdout:
//   {"warnings": [...every "[ag-ui]" console message...], "scenarios": [{name, runs: [...]}]}
// chat: two prompts on one thread (the second run carries the first exchange);
// backend_tool: the server's own `lookup` tool, run by the server;
// frontend_tool: a client tool (`show_card`) the model calls, answered by the client with a
// tool message in the next run. The Python test (test_thirdparty_agui.py) asserts.
import { HttpAgent } from "@ag-ui/client";

const [url, trigger] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error", "log", "info"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    const text = args.map((a) => (typeof a === "string" ? a : String(a?.message ?? a))).join(" ");
    if (text.includes("[ag-ui]")) warnings.push(`${level}: ${text}`);
    original(...args);
  };
}

let counter = 0;
const id = (prefix) => `${prefix}-${++counter}`;

const CARD = {
  name: "show_card",
  description: "Show a card in the page.",
  parameters: { type: "object", properties: { title: { type: "string" } } },
};

async function run(agent, params = {}) {
  const events = [];
  let error = null;
  try {
    await agent.runAgent({ runId: id("run"), ...params }, { onEvent: ({ event }) => { events.push(event); } });
  } catch (err) {
    error = String(err?.message ?? err);
  }
  return {
    types: events.map((e) => e.type),
    text: events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join(""),
    toolCalls: events.filter((e) => e.type === "TOOL_CALL_START").map((e) => ({ id: e.toolCallId, name: e.toolCallName })),
    results: events.filter((e) => e.type === "TOOL_CALL_RESULT").map((e) => ({ toolCallId: e.toolCallId, content: e.content })),
    messages: agent.messages.map((m) => ({ role: m.role, toolCalls: (m.toolCalls ?? []).map((c) => c.function?.name) })),
    error,
  };
}

function say(agent, text) {
  agent.addMessage({ id: id("user"), role: "user", content: text });
}

const scenarios = {
  async chat() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "Say hello.");
    const first = await run(agent);
    say(agent, "And once more.");
    return [first, await run(agent)];
  },
  async backend_tool() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, `Please ${trigger} now.`);
    return [await run(agent)];
  },
  async frontend_tool() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, `Please ${trigger} to show a card.`);
    const first = await run(agent, { tools: [CARD] });
    for (const call of first.toolCalls) {
      agent.addMessage({ id: id("tool"), role: "tool", toolCallId: call.id, content: "card shown" });
    }
    return [first, await run(agent, { tools: [CARD] })];
  },
};

const results = [];
for (const [name, scenario] of Object.entries(scenarios)) {
  results.push({ name, runs: await scenario() });
}
process.stdout.write(JSON.stringify({ warnings, scenarios: results }) + "\n");
