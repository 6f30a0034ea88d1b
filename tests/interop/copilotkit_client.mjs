// Drives steerable-bridge's AG-UI endpoint the way a CopilotKit 1.75 app does: the v2
// CopilotRuntime (Node listener on 127.0.0.1, port 0) forwards to the endpoint through the
// HttpAgent of its own pinned @ag-ui/client (0.0.59, strict outcome schemas), and the
// framework-neutral @copilotkit/core client (what the React components use) talks REST to
// that runtime. Usage: node copilotkit_client.mjs <agent url> <slow agent url>
//    or: node copilotkit_client.mjs --bridged TAG TRIGGER LONG CUE  (URLs on stdin; see `bridged`)
//    or: node copilotkit_client.mjs --restore <agent url> THREAD_ID WAITING_ID  (`restoreAfterRestart`)
// Prints one JSON object on stdout: {"agUiClient": version, "errors": [...onError codes and
// messages...], "scenarios": [{name, runs: [...]}]}; the Python test makes the assertions.
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

import { CopilotKitCore } from "@copilotkit/core";
import { CopilotRuntime, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

const [fastUrl, slowUrl] = process.argv.slice(2);

// The HttpAgent a CopilotKit app hands its runtime: the @ag-ui/client the runtime itself
// depends on (not this folder's 1.0.0), loaded as the same ES module the runtime uses.
const runtimeRequire = createRequire(createRequire(import.meta.url).resolve("@copilotkit/runtime"));
const clientPackage = runtimeRequire.resolve("@ag-ui/client/package.json");
const clientMeta = runtimeRequire(clientPackage);
const { HttpAgent } = await import(
  pathToFileURL(join(dirname(clientPackage), clientMeta.exports["."].import)).href
);

// A CopilotRuntime serving `agents` (name → AG-UI endpoint URL) on 127.0.0.1, port 0.
async function serveRuntime(agents, runner = undefined) {
  const runtime = new CopilotRuntime({
    ...(runner ? { runner } : {}),
    agents: Object.fromEntries(
      Object.entries(agents).map(([name, agentUrl]) => [name, new HttpAgent({ url: agentUrl })]),
    ),
  });
  const server = createServer(createCopilotNodeListener({ runtime, basePath: "/api/copilotkit" }));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = () => {
    server.closeAllConnections?.();
    server.close();
  };
  return { url: `http://127.0.0.1:${server.address().port}/api/copilotkit`, close };
}

const bridgedMode = fastUrl === "--bridged" || fastUrl === "--restore";
const served = bridgedMode ? null : await serveRuntime({ default: fastUrl, slow: slowUrl });

// @copilotkit/core only connects to its runtime where a `window` exists.
globalThis.window ??= globalThis;

const errors = [];
let counter = 0;
const id = (prefix) => `${prefix}-${++counter}`;

function within(ms, what, promise) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

async function connectedCore(tools = [], runtimeUrl = served?.url) {
  const core = new CopilotKitCore({ runtimeUrl, tools });
  core.subscribe({
    onError: ({ code, error }) => errors.push({ code, message: String(error?.message ?? error) }),
  });
  await within(10000, "connecting to the runtime", new Promise((resolve, reject) => {
    const check = () => {
      if (core.runtimeConnectionStatus === "connected") resolve();
      else if (core.runtimeConnectionStatus === "error") reject(new Error("runtime /info failed"));
    };
    core.subscribe({ onRuntimeConnectionStatusChanged: check });
    check();
  }));
  return core;
}

function record(agent, events, error) {
  const finished = events.filter((e) => e.type === "RUN_FINISHED");
  return {
    types: events.map((e) => e.type).filter((t, i, all) => t !== all[i - 1]),  // runs collapsed
    outcome: finished.length ? (finished[finished.length - 1].outcome ?? null) : null,
    toolCalls: events.filter((e) => e.type === "TOOL_CALL_START").map((e) => e.toolCallName),
    results: events.filter((e) => e.type === "TOOL_CALL_RESULT").map((e) => e.content),
    text: events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join(""),
    reasoning: events.filter((e) => e.type === "REASONING_MESSAGE_CONTENT").map((e) => e.delta).join(""),
    messages: agent.messages.map((m) => ({ id: m.id, role: m.role, content: typeof m.content === "string" ? m.content : null })),
    state: agent.state,
    error,
  };
}

async function run(core, agent, params = {}, during = undefined) {
  const events = [];
  const subscription = agent.subscribe({
    onEvent: ({ event }) => {
      events.push(event);
      if (during) during(event);
    },
  });
  let error = null;
  try {
    await within(30000, "a run", core.runAgent({ agent, ...params }));
  } catch (err) {
    error = String(err?.message ?? err);
  } finally {
    subscription.unsubscribe();
  }
  return record(agent, events, error);
}

function say(agent, text) {
  agent.addMessage({ id: id("user"), role: "user", content: text });
}

function agentOf(core, name, threadId = id("thread")) {
  const agent = core.getAgent(name);
  if (!agent) throw new Error(`the runtime offers no agent '${name}'`);
  agent.threadId = threadId;
  agent.setMessages([]);
  agent.setState({});
  return agent;
}

const scenarios = {
  async text_and_continued_thread() {
    const core = await connectedCore();
    const agent = agentOf(core, "default");
    say(agent, "hello");
    const first = await run(core, agent);
    say(agent, "and again");
    return [first, await run(core, agent)];
  },
  async reasoning() {
    const core = await connectedCore();
    const agent = agentOf(core, "default");
    say(agent, "think about it");
    return [await run(core, agent)];
  },
  async shared_state() {
    const core = await connectedCore();
    const agent = agentOf(core, "default");
    agent.setState({ count: 1 });
    say(agent, "change the state");
    return [await run(core, agent)];
  },
  async frontend_tool() {
    const handled = [];
    const core = await connectedCore([
      {
        name: "show_card",
        description: "Show a card in the page.",
        followUp: true,
        handler: async (args) => {
          handled.push(args);
          return "card shown";
        },
      },
    ]);
    const agent = agentOf(core, "default");
    say(agent, "please show_card");
    const result = await run(core, agent);
    return [{ ...result, handled }];
  },
  async model_error() {
    const core = await connectedCore();
    const agent = agentOf(core, "default");
    say(agent, "show an error");
    return [await run(core, agent)];
  },
  async stop() {
    const core = await connectedCore();
    const agent = agentOf(core, "slow");
    say(agent, "hello");
    let stopped = false;
    const result = await run(core, agent, {}, (event) => {
      if (!stopped && event.type === "TEXT_MESSAGE_CONTENT") {
        stopped = true;
        setTimeout(() => core.stopAgent({ agent }), 0);
      }
    });
    return [{ ...result, stopped }];
  },
  async approval() {
    const core = await connectedCore();
    const agent = agentOf(core, "default");
    say(agent, "write a note");
    const first = await run(core, agent);
    const interrupts = first.outcome?.interrupts ?? [];
    const resume = interrupts.map((it) => ({
      interruptId: it.id,
      status: "resolved",
      payload: { approved: true },
    }));
    return [first, await run(core, agent, { resume })];
  },
  // A page reload: a new CopilotKitCore (nothing in memory) opens the same threadId and
  // `connectAgent` restores it (CopilotKit's /agent/:id/connect), then the thread goes on.
  async reload_restores_thread() {
    const core = await connectedCore();
    const threadId = id("thread");
    const agent = agentOf(core, "default", threadId);
    say(agent, "hello");
    const first = await run(core, agent);
    say(agent, "write a note");
    const asked = await run(core, agent);
    const resume = (asked.outcome?.interrupts ?? []).map((it) => ({
      interruptId: it.id, status: "resolved", payload: { approved: true },
    }));
    const approved = await run(core, agent, { resume });
    const before = record(agent, [], null).messages;

    const reloaded = await connectedCore();
    const again = reloaded.getAgent("default");
    again.threadId = threadId;
    await within(10000, "restoring the thread", reloaded.connectAgent({ agent: again }));
    const restored = record(again, [], null);
    say(again, "and again");
    const continued = await run(reloaded, again);
    // A second thread left waiting for an approval (restored after a restart, `--restore`).
    const waitingId = id("thread");
    const waiting = agentOf(await connectedCore(), "default", waitingId);
    say(waiting, "write a note");
    await run(core, waiting);
    return [first, asked, approved, { ...restored, before, threadId, waitingId }, continued];
  },
};

// `--bridged TAG TRIGGER LONG CUE`: one thread through `serve --acp-agent` (a real agent on a
// fake model) at the URL read from stdin (so node loads while the server starts), served
// from a runtime of its own, as a page would drive it: a text turn; a TRIGGER turn that ends in a
// permission interrupt, approved by `resume`; a LONG turn stopped (stopAgent) once its text
// shows CUE, then a text turn; one JSON line for those. Then it reads the URL of a restarted
// server from stdin, serves it from a fresh runtime and continues the same thread there with
// a fresh core (one more text turn, the messages so far given back), printing a second line.
// TAG marks every prompt so the fake's record tells this client's requests apart.
async function bridged(tag, trigger, long, cue) {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const nextUrl = async () => (await lines.next()).value.trim();
  const firstRuntime = await serveRuntime({ default: await nextUrl() });
  try {
    return await bridgedTurns(tag, trigger, long, cue, firstRuntime.url, nextUrl);
  } finally {
    firstRuntime.close();
  }
}

async function bridgedTurns(tag, trigger, long, cue, runtimeUrl, nextUrl) {
  const core = await connectedCore([], runtimeUrl);
  const threadId = id(`thread-${tag}`);
  const agent = agentOf(core, "default", threadId);
  say(agent, `Say hello (${tag}).`);
  const hello = await run(core, agent);
  say(agent, `Please ${trigger} now (${tag}).`);
  const asked = await run(core, agent);
  const resume = (asked.outcome?.interrupts ?? []).map((it) => ({
    interruptId: it.id, status: "resolved", payload: { approved: true },
  }));
  const approved = await run(core, agent, { resume });
  say(agent, `Please ${long} (${tag}).`);
  let stopped = false;
  let streamed = "";
  const cancelled = await run(core, agent, {}, (event) => {
    if (event.type === "TEXT_MESSAGE_CONTENT") streamed += event.delta;
    if (!stopped && streamed.includes(cue)) {
      stopped = true;
      setTimeout(() => core.stopAgent({ agent }), 0);
    }
  });
  say(agent, `Say hello again (${tag}).`);
  const after = await run(core, agent);
  process.stdout.write(
    JSON.stringify({ errors: errors.splice(0), hello, asked, approved, cancelled: { ...cancelled, stopped }, after }) + "\n",
  );

  const restartedRuntime = await serveRuntime({ default: await nextUrl() });
  try {
    const fresh = await connectedCore([], restartedRuntime.url);
    const again = agentOf(fresh, "default", threadId);
    again.setMessages(agent.messages);
    say(again, `After the restart (${tag}).`);
    const continued = await run(fresh, again);
    process.stdout.write(JSON.stringify({ errors: errors.splice(0), continued }) + "\n");
  } finally {
    restartedRuntime.close();
  }
}

// `--restore AGENT_URL THREAD_ID WAITING_ID`: a runtime started after the threads' runs
// (nothing of them in its memory) with docs/copilotkit-runner.mjs; a fresh page opens
// THREAD_ID and goes on, another opens WAITING_ID (an approval waits) and answers it.
async function restoreAfterRestart(agentUrl, threadId, waitingId) {
  const { steerableRunner } = await import("../../docs/copilotkit-runner.mjs");
  const restarted = await serveRuntime(
    { default: agentUrl }, steerableRunner(InMemoryAgentRunner, { default: agentUrl }),
  );
  try {
    const core = await connectedCore([], restarted.url);
    const agent = core.getAgent("default");
    agent.threadId = threadId;
    await within(10000, "restoring the thread", core.connectAgent({ agent }));
    const restored = record(agent, [], null);
    say(agent, "after the restart");
    const continued = await run(core, agent);
    // The thread that waits for an approval: restored with its interrupt, then answered.
    const other = await connectedCore([], restarted.url);
    const asking = other.getAgent("default");
    asking.threadId = waitingId;
    await within(10000, "restoring the waiting thread", other.connectAgent({ agent: asking }));
    const pending = (asking.pendingInterrupts ?? []).map((it) => ({ id: it.id, toolCallId: it.toolCallId }));
    const waited = record(asking, [], null);
    const resume = pending.map((it) => ({ interruptId: it.id, status: "resolved", payload: { approved: true } }));
    const answered = await run(other, asking, { resume });
    return { errors: errors.splice(0), restored, continued, pending, waited, answered };
  } finally {
    restarted.close();
  }
}

if (fastUrl === "--restore") {
  process.stdout.write(JSON.stringify(await restoreAfterRestart(...process.argv.slice(3))) + "\n");
  process.exit(0);
}

if (bridgedMode) {
  await bridged(...process.argv.slice(3));
  process.exit(0);
}

const results = [];
try {
  for (const [name, scenario] of Object.entries(scenarios)) {
    const mark = errors.length;
    const runs = await scenario();
    results.push({ name, runs, errors: errors.slice(mark) });
  }
} finally {
  served.close();
}
process.stdout.write(JSON.stringify({ agUiClient: clientMeta.version, scenarios: results }) + "\n");
process.exit(0);
