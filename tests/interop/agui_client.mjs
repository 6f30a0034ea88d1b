// Drives a live steerable-bridge AG-UI endpoint with the official @ag-ui/client HttpAgent.
// Usage: node agui_client.mjs http://127.0.0.1:PORT/agent
//    or: node agui_client.mjs --bridged TAG TRIGGER LONG CUE   (URLs on stdin; see `bridged`)
// Runs every scenario, then prints one JSON object on stdout:
//   {"warnings": [...every "[ag-ui]" console message...], "scenarios": [{name, runs: [...]}]}
// where each run records the event types, the final outcome and any error the client threw.
// The Python test (test_agui_interop.py) makes the assertions; the client itself does not
// fail a stream that lacks RUN_FINISHED or ends in RUN_ERROR.
import { createInterface } from "node:readline";

import { HttpAgent } from "@ag-ui/client";

const url = process.argv[2];
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

async function run(agent, params = {}, during = undefined) {
  const events = [];
  let error = null;
  try {
    await agent.runAgent({ runId: id("run"), ...params }, {
      onEvent: ({ event }) => {
        events.push(event);
        if (during) during(event);
      },
    });
  } catch (err) {
    error = String(err?.message ?? err);
  }
  const last = events[events.length - 1] ?? {};
  return {
    types: events.map((e) => e.type),
    outcome: last.type === "RUN_FINISHED" ? (last.outcome ?? { type: "success" }) : null,
    results: events.filter((e) => e.type === "TOOL_CALL_RESULT").map((e) => ({
      toolCallId: e.toolCallId, content: e.content, status: e.metadata?.steerable?.status,
    })),
    toolCalls: events.filter((e) => e.type === "TOOL_CALL_START").map((e) => e.toolCallName),
    text: events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join(""),
    runError: events.find((e) => e.type === "RUN_ERROR")?.message ?? null,
    messageIds: agent.messages.map((m) => m.id),
    state: agent.state,
    error,
  };
}

function say(agent, text) {
  agent.addMessage({ id: id("user"), role: "user", content: text });
}

const CARD = {
  name: "show_card",
  description: "Show a card in the page.",
  parameters: { type: "object", properties: { title: { type: "string" } } },
};

const scenarios = {
  async chat() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "hello");
    const first = await run(agent);
    say(agent, "and again");
    return [first, await run(agent)];
  },
  async reasoning_and_tool() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "think, then use a tool");
    return [await run(agent)];
  },
  async plan() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "make a plan");
    return [await run(agent)];
  },
  async shared_state() {
    const agent = new HttpAgent({ url, threadId: id("thread"), initialState: { count: 1 } });
    say(agent, "change the state");
    return [await run(agent)];
  },
  async frontend_tool() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "please show_card");
    const first = await run(agent, { tools: [CARD] });
    const pending = first.outcome?.pendingToolCallIds ?? [];
    for (const toolCallId of pending) {
      agent.addMessage({ id: id("tool"), role: "tool", toolCallId, content: "card shown" });
    }
    return [first, await run(agent, { tools: [CARD] })];
  },
  async approval() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "write a note");
    const first = await run(agent);
    const interrupts = first.outcome?.interrupts ?? [];
    const resume = interrupts.map((it) => ({ interruptId: it.id, status: "resolved", payload: { approved: true } }));
    return [first, await run(agent, { resume })];
  },
  async model_error() {
    const agent = new HttpAgent({ url, threadId: id("thread") });
    say(agent, "show an error");
    return [await run(agent)];
  },
};

// `--bridged TAG TRIGGER LONG CUE`: one thread through `serve --acp-agent` (a real agent on a
// fake model), at the URL read from stdin (so node loads while the server starts): a text turn; a TRIGGER turn that ends in a permission interrupt, approved by
// `resume`; a LONG turn aborted once its text shows CUE (abortRun), then a text turn; one JSON line
// for those. Then it reads the URL of a restarted server from stdin and continues the same
// thread there (one more text turn), printing a second line. TAG marks every prompt so the
// fake's record tells this client's requests apart.
async function bridged([tag, trigger, long, cue]) {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const nextUrl = async () => (await lines.next()).value.trim();
  const threadId = id(`thread-${tag}`);
  const agent = new HttpAgent({ url: await nextUrl(), threadId });
  say(agent, `Say hello (${tag}).`);
  const hello = await run(agent);
  say(agent, `Please ${trigger} now (${tag}).`);
  const asked = await run(agent);
  const resume = (asked.outcome?.interrupts ?? []).map((it) => ({
    interruptId: it.id, status: "resolved", payload: { approved: true },
  }));
  const approved = await run(agent, { resume });
  say(agent, `Please ${long} (${tag}).`);
  let aborted = false;
  let streamed = "";
  const cancelled = await run(agent, {}, (event) => {
    if (event.type === "TEXT_MESSAGE_CONTENT") streamed += event.delta;
    if (!aborted && streamed.includes(cue)) {
      aborted = true;
      setTimeout(() => agent.abortRun(), 0);
    }
  });
  say(agent, `Say hello again (${tag}).`);
  const after = await run(agent);
  process.stdout.write(JSON.stringify({ warnings, hello, asked, approved, cancelled: { ...cancelled, aborted }, after }) + "\n");

  const restarted = new HttpAgent({ url: await nextUrl(), threadId, initialMessages: agent.messages });
  say(restarted, `After the restart (${tag}).`);
  const continued = await run(restarted);
  process.stdout.write(JSON.stringify({ warnings, continued }) + "\n");
}

if (process.argv[2] === "--bridged") {
  await bridged(process.argv.slice(3));
  process.exit(0);
}

const results = [];
for (const [name, scenario] of Object.entries(scenarios)) {
  results.push({ name, runs: await scenario() });
}
process.stdout.write(JSON.stringify({ warnings, scenarios: results }) + "\n");
