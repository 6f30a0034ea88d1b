// Drives the ACP client validator (`steerable-bridge acp --validate-client`) with the official
// TypeScript ACP client (@agentclientprotocol/sdk), acting as a careful editor would.
//
// Run by tests/conformance/validators/test_validator_interop.py with VALIDATOR_CMD (a JSON
// array: the validator command) and VALIDATOR_CWD set. It advertises fs and terminal, validates
// every request and update it receives with the SDK's own zod schemas, reads and writes files
// on disk, runs terminals as child processes, answers the ordinary permission request with an
// offered option and, when asked to press stop, sends session/cancel and answers the open
// permission request "cancelled". Prints one JSON line: what the turn looked like.

import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk/unstable";
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

const command = JSON.parse(process.env.VALIDATOR_CMD);
const cwd = process.env.VALIDATOR_CWD;
const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level];
  console[level] = (...args) => {
    warnings.push(args.map(String).join(" "));
    original(...args);
  };
}

function check(schema, value, what) {
  const result = schema.safeParse(value);
  assert.ok(result.success, `${what} does not match the ACP schema: ${JSON.stringify(result.error?.issues)}`);
  return value;
}

const child = spawn(command[0], command.slice(1), { cwd, env: process.env, stdio: ["pipe", "pipe", "ignore"] });
const updates = [];
const terminals = new Map();
let connection = null;
let nextTerminal = 1;

function collect(proc) {
  const terminal = { proc, output: "", exit: null };
  terminal.exited = new Promise((resolve) => {
    proc.on("exit", (code, signal) => {
      terminal.exit = code === null ? { signal } : { exitCode: code };
      resolve(terminal.exit);
    });
  });
  proc.stdout.on("data", (chunk) => (terminal.output += chunk));
  proc.stderr.on("data", (chunk) => (terminal.output += chunk));
  return terminal;
}

const app = acp
  .client({ name: "validator-interop", version: "1.0.0" })
  .onNotification("session/update", (ctx) => {
    check(z.zSessionNotification, ctx.params, "session/update");
    updates.push(ctx.params.update);
  })
  .onRequest("session/request_permission", async (ctx) => {
    check(z.zRequestPermissionRequest, ctx.params, "session/request_permission");
    if ((ctx.params.toolCall.title ?? "").toLowerCase().includes("stop")) {
      await connection.notify("session/cancel", { sessionId: ctx.params.sessionId });
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId: ctx.params.options[0].optionId } };
  })
  .onRequest("fs/read_text_file", async (ctx) => {
    check(z.zReadTextFileRequest, ctx.params, "fs/read_text_file");
    const text = await readFile(ctx.params.path, "utf8");
    const lines = text.split(/(?<=\n)/);
    const start = (ctx.params.line ?? 1) - 1;
    const end = ctx.params.limit == null ? undefined : start + ctx.params.limit;
    return { content: lines.slice(start, end).join("") };
  })
  .onRequest("fs/write_text_file", async (ctx) => {
    check(z.zWriteTextFileRequest, ctx.params, "fs/write_text_file");
    await writeFile(ctx.params.path, ctx.params.content, "utf8");
    return {};
  })
  .onRequest("terminal/create", (ctx) => {
    check(z.zCreateTerminalRequest, ctx.params, "terminal/create");
    const proc = spawn(ctx.params.command, ctx.params.args ?? [], { cwd: ctx.params.cwd ?? cwd });
    const terminalId = `term-${nextTerminal++}`;
    terminals.set(terminalId, collect(proc));
    return { terminalId };
  })
  .onRequest("terminal/output", (ctx) => {
    const terminal = terminals.get(ctx.params.terminalId);
    const reply = { output: terminal.output, truncated: false };
    if (terminal.exit) reply.exitStatus = terminal.exit;
    return reply;
  })
  .onRequest("terminal/wait_for_exit", async (ctx) => terminals.get(ctx.params.terminalId).exited)
  .onRequest("terminal/kill", (ctx) => {
    terminals.get(ctx.params.terminalId).proc.kill("SIGKILL");
    return {};
  })
  .onRequest("terminal/release", (ctx) => {
    const terminal = terminals.get(ctx.params.terminalId);
    if (terminal && !terminal.exit) terminal.proc.kill("SIGKILL");
    terminals.delete(ctx.params.terminalId);
    return {};
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const report = await app.connectWith(stream, async (agent) => {
  connection = agent;
  const init = check(
    z.zInitializeResponse,
    await agent.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
      clientInfo: { name: "validator-interop", version: "1.0.0" },
    }),
    "initialize response",
  );
  assert.equal(init.protocolVersion, 1);
  const created = check(
    z.zNewSessionResponse,
    await agent.request("session/new", { cwd, mcpServers: [] }),
    "session/new response",
  );
  const done = check(
    z.zPromptResponse,
    await agent.request("session/prompt", {
      sessionId: created.sessionId,
      prompt: [{ type: "text", text: "validate me" }],
    }),
    "session/prompt response",
  );
  const text = updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk")
    .map((u) => u.content.text)
    .join("");
  return {
    stopReason: done.stopReason,
    kinds: [...new Set(updates.map((u) => u.sessionUpdate))].sort(),
    summaryTable: text.includes("| check | result | evidence |"),
  };
});

child.stdin.end();
assert.deepEqual(warnings, [], "the ACP SDK printed warnings");
console.log(JSON.stringify(report));
process.exit(0);
