// Drives `steerable-bridge acp` with the official TypeScript ACP client (@agentclientprotocol/sdk).
//
// Run by tests/interop/test_acp_interop.py with ACP_PYTHON, ACP_SCRIPT (a scripted-model file),
// ACP_TOOLS (the --tools-module file) and ACP_CWD set. Every response and every session/update
// is validated against the SDK's own zod schemas; any schema failure, console warning from the
// SDK, or broken promise (updates after a prompt response, cancel not answered "cancelled",
// replay differing from the live stream) fails the run. Prints one JSON report line on success.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk/unstable";
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

// What session/load sends for a run of live chunks: the agent folds the consecutive deltas of
// one message (consecutive seqs in its log) into one chunk, text joined, keeping the first
// chunk's _meta and naming the last seq it folded (`last_seq`). Chunk boundaries carry no
// meaning in ACP, so a replay may join them; everything else must come back as it was sent.
function foldDeltas(notifications) {
  const out = [];
  for (const n of notifications) {
    const prev = out.at(-1);
    const kind = n.update.sessionUpdate;
    const meta = n.update._meta?.steerable;
    const prevMeta = prev?.update._meta?.steerable;
    const chunk = kind === "agent_message_chunk" || kind === "agent_thought_chunk";
    if (
      chunk &&
      prev &&
      prev.update.sessionUpdate === kind &&
      prev.update.messageId === n.update.messageId &&
      prev.update.content?.type === "text" &&
      n.update.content?.type === "text" &&
      meta &&
      prevMeta &&
      meta.seq === (prevMeta.last_seq ?? prevMeta.seq) + 1
    ) {
      prev.update.content.text += n.update.content.text;
      prevMeta.last_seq = meta.seq;
      continue;
    }
    out.push(structuredClone(n));
  }
  return out;
}


const { ACP_PYTHON, ACP_SCRIPT, ACP_TOOLS, ACP_CWD } = process.env;
const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level];
  console[level] = (...args) => {
    warnings.push(args.map(String).join(" "));
    original(...args);
  };
}

// ACP_AGUI_URL set: `acp --agui-url` in front of a third-party AG-UI server instead. One
// `acp` process takes session/new and three prompts (ACP_PROMPTS, a JSON list: text, a
// backend tool the server runs, one more); a second `acp` process takes session/load of
// that session. Prints one JSON line: per prompt its stop reason, update kinds, text and
// tool call statuses, and what the load replayed.
if (process.env.ACP_AGUI_URL) {
  console.log(JSON.stringify(await bridged(process.env.ACP_AGUI_URL, JSON.parse(process.env.ACP_PROMPTS))));
  assert.deepEqual(warnings, [], "the ACP SDK printed warnings");
  process.exit(0);
}

async function bridged(aguiUrl, prompts) {
  const argv = ["-m", "steerable_bridge.cli", "acp", "--agui-url", aguiUrl];
  const seen = [];
  async function connected(work) {
    const agentProcess = spawn(ACP_PYTHON, argv, { cwd: ACP_CWD, env: process.env, stdio: ["pipe", "pipe", "inherit"] });
    const client = acp
      .client({ name: "steerable-bridge-interop" })
      .onNotification("session/update", (ctx) => {
        seen.push(check(z.zSessionNotification, ctx.params, "session/update"));
      });
    const io = acp.ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout));
    try {
      return await client.connectWith(io, async (agent) => {
        const init = check(z.zInitializeResponse, await agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} }), "initialize response");
        assert.equal(init.agentCapabilities.loadSession, true);
        return await work(agent);
      });
    } finally {
      agentProcess.stdin.end();
      agentProcess.kill();
    }
  }
  const updatesOf = (from) => seen.slice(from).map((n) => n.update);
  const textOf = (updates) => updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text ?? "").join("");

  const { sessionId, turns } = await connected(async (agent) => {
    const created = check(z.zNewSessionResponse, await agent.request("session/new", { cwd: ACP_CWD, mcpServers: [] }), "session/new response");
    const turns = [];
    for (const text of prompts) {
      const from = seen.length;
      const answer = check(z.zPromptResponse, await agent.request("session/prompt", { sessionId: created.sessionId, prompt: [{ type: "text", text }] }), "session/prompt response");
      const updates = updatesOf(from);
      turns.push({
        stopReason: answer.stopReason,
        kinds: [...new Set(updates.map((u) => u.sessionUpdate))],
        text: textOf(updates),
        toolCalls: updates.filter((u) => u.sessionUpdate === "tool_call").map((u) => ({ id: u.toolCallId, title: u.title })),
        statuses: updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.status).map((u) => u.status),
      });
    }
    return { sessionId: created.sessionId, turns };
  });

  const replayed = await connected(async (agent) => {
    const from = seen.length;
    check(z.zLoadSessionResponse, await agent.request("session/load", { sessionId, cwd: ACP_CWD, mcpServers: [] }), "session/load response");
    return updatesOf(from);
  });
  return {
    turns,
    replay: {
      users: replayed.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text),
      text: textOf(replayed),
      toolCalls: replayed.filter((u) => u.sessionUpdate === "tool_call").map((u) => u.toolCallId),
    },
  };
}

const child = spawn(
  ACP_PYTHON,
  ["-m", "steerable_bridge.cli", "acp", "--model", `scripted:${ACP_SCRIPT}`, "--tools-module", ACP_TOOLS],
  { cwd: ACP_CWD, env: process.env, stdio: ["pipe", "pipe", "ignore"] },
);

const updates = []; // { at, notification } in arrival order
const responses = []; // { at, method } in arrival order
let clock = 0;
let permissionAnswer = "allow_always";

function check(schema, value, what) {
  const result = schema.safeParse(value);
  assert.ok(result.success, `${what} does not match the ACP schema: ${JSON.stringify(result.error?.issues)}`);
  return value;
}

async function call(agent, method, params, schema) {
  const result = await agent.request(method, params);
  responses.push({ at: clock++, method });
  return schema ? check(schema, result, `${method} response`) : result;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition, what) {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function kindsOf(list) {
  return list.map((u) => u.notification.update.sessionUpdate);
}

const app = acp
  .client({ name: "steerable-bridge-interop" })
  .onNotification("session/update", (ctx) => {
    check(z.zSessionNotification, ctx.params, "session/update");
    updates.push({ at: clock++, notification: ctx.params });
  })
  .onRequest("session/request_permission", (ctx) => {
    check(z.zRequestPermissionRequest, ctx.params, "session/request_permission");
    return { outcome: { outcome: "selected", optionId: permissionAnswer } };
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const report = await app.connectWith(stream, async (agent) => {
  const init = await call(
    agent,
    "initialize",
    { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } } },
    z.zInitializeResponse,
  );
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities.loadSession, true);

  const created = await call(agent, "session/new", { cwd: ACP_CWD, mcpServers: [] }, z.zNewSessionResponse);
  const sessionId = created.sessionId;
  assert.equal(created.modes.currentModeId, "default");
  await until(() => kindsOf(updates).includes("available_commands_update"), "available commands");

  // 1. A turn with reasoning, text, a plan and an edit that needs permission.
  const liveStart = updates.length;
  const first = await call(
    agent,
    "session/prompt",
    { sessionId, prompt: [{ type: "text", text: "Write the note" }] },
    z.zPromptResponse,
  );
  assert.equal(first.stopReason, "end_turn");
  const live = updates.slice(0, updates.length);
  const liveKinds = new Set(kindsOf(updates.slice(liveStart)));
  for (const kind of [
    "session_info_update",
    "agent_thought_chunk",
    "agent_message_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "usage_update",
  ]) {
    assert.ok(liveKinds.has(kind), `no ${kind} in the live turn`);
  }
  const diff = updates
    .flatMap((u) => u.notification.update.content ?? [])
    .find((c) => c && c.type === "diff");
  assert.ok(diff && diff.newText === "from node", "the edit's diff was not shown");

  // 2. Cancel while the model streams: answer "cancelled" and nothing after it.
  const before = updates.length;
  const pending = call(agent, "session/prompt", { sessionId, prompt: [{ type: "text", text: "Go on" }] }, z.zPromptResponse);
  await until(() => kindsOf(updates.slice(before)).includes("agent_message_chunk"), "streaming text");
  await agent.notify("session/cancel", { sessionId });
  const cancelled = await pending;
  assert.equal(cancelled.stopReason, "cancelled");
  const answeredAt = responses.at(-1).at;
  await sleep(200);
  assert.deepEqual(updates.filter((u) => u.at > answeredAt), [], "session/update after the prompt response");

  // 3. Modes and model selection.
  await call(agent, "session/set_mode", { sessionId, modeId: "read-only" }, z.zSetSessionModeResponse);
  const options = await call(
    agent,
    "session/set_config_option",
    { sessionId, configId: "model", value: "demo:default" },
    z.zSetSessionConfigOptionResponse,
  );
  assert.equal(options.configOptions[0].currentValue, "demo:default");
  await until(() => kindsOf(updates).includes("config_option_update"), "config_option_update");
  assert.ok(kindsOf(updates).includes("current_mode_update"));

  // 4. Load replays the conversation; the first turn comes back as it was sent live.
  const replayStart = updates.length;
  await call(agent, "session/load", { sessionId, cwd: ACP_CWD, mcpServers: [] }, z.zLoadSessionResponse);
  const replayed = updates.slice(replayStart).map((u) => u.notification);
  const strip = (list) => list.filter((n) => n.update.sessionUpdate !== "user_message_chunk");
  const liveFirstTurn = foldDeltas(live.map((u) => u.notification));
  assert.deepEqual(strip(replayed).slice(0, liveFirstTurn.length), liveFirstTurn);
  const users = replayed.filter((n) => n.update.sessionUpdate === "user_message_chunk");
  assert.deepEqual(users.map((n) => n.update.content.text), ["Write the note", "Go on"]);

  // 5. List, fork, resume, close.
  const listed = await call(agent, "session/list", { cwd: ACP_CWD }, z.zListSessionsResponse);
  assert.ok(listed.sessions.some((s) => s.sessionId === sessionId && s.title === "Write the note"));
  const fork = await call(agent, "session/fork", { sessionId, cwd: ACP_CWD }, z.zForkSessionResponse);
  assert.notEqual(fork.sessionId, sessionId);
  await call(agent, "session/resume", { sessionId, cwd: ACP_CWD }, z.zResumeSessionResponse);
  await call(agent, "session/close", { sessionId }, z.zCloseSessionResponse);
  let closedError = null;
  try {
    await agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello?" }] });
  } catch (error) {
    closedError = error;
  }
  assert.equal(closedError?.code, -32002);

  return {
    updates: updates.length,
    kinds: [...new Set(kindsOf(updates))].sort(),
    replayed: replayed.length,
    stopReasons: [first.stopReason, cancelled.stopReason],
  };
});

child.stdin.end();
assert.deepEqual(warnings, [], "the ACP SDK printed warnings");
console.log(JSON.stringify(report));
process.exit(0);
