// Drives a remote `steerable-bridge acp --listen` with the official TypeScript ACP client over
// its own remote transports: `@agentclientprotocol/sdk/experimental/http-client` (Streamable
// HTTP: POST, SSE GET streams, DELETE) or `.../experimental/ws-client` (WebSocket, Node 20's
// `--experimental-websocket` global). Run by tests/interop/test_acp_remote_interop.py with
// ACP_URL (the endpoint) and ACP_TRANSPORT (http | ws). Every response and session/update is
// validated against the SDK's zod schemas. It initializes, opens a session, prompts (the reply
// must stream in more than one chunk), then prompts again and cancels mid-turn (the answer
// must be "cancelled"). Prints one JSON report line on success.

import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk/unstable";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

const { ACP_URL, ACP_TRANSPORT } = process.env;
const check = (schema, value, what) => {
  const parsed = schema.safeParse(value);
  assert.ok(parsed.success, `${what} does not match the schema: ${JSON.stringify(parsed.error?.issues)}`);
  return value;
};

const seen = [];
let arrived = () => {};
const client = acp
  .client({ name: "steerable-bridge-remote-interop" })
  .onNotification("session/update", (ctx) => {
    seen.push(check(z.zSessionNotification, ctx.params, "session/update"));
    arrived();
  });
const stream =
  ACP_TRANSPORT === "ws"
    ? createWebSocketStream(ACP_URL.replace(/^http/, "ws"))
    : createHttpStream(ACP_URL);
const textOf = (from) =>
  seen
    .slice(from)
    .filter((n) => n.update.sessionUpdate === "agent_message_chunk")
    .map((n) => n.update.content.text ?? "")
    .join("");

const report = await client.connectWith(stream, async (agent) => {
  const init = check(
    z.zInitializeResponse,
    await agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} }),
    "initialize response",
  );
  const session = check(
    z.zNewSessionResponse,
    await agent.request("session/new", { cwd: process.cwd(), mcpServers: [] }),
    "session/new response",
  );
  const sessionId = session.sessionId;
  const first = await agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] });
  check(z.zPromptResponse, first, "session/prompt response");
  const chunks = seen.filter((n) => n.update.sessionUpdate === "agent_message_chunk").length;
  const reply = textOf(0);

  const from = seen.length;
  const turn = agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "again" }] });
  while (!textOf(from).includes("thinking")) {
    await new Promise((resolve) => {
      arrived = resolve;
    });
  }
  await agent.notify("session/cancel", { sessionId });
  const cancelled = check(z.zPromptResponse, await turn, "cancelled session/prompt response");
  return {
    protocolVersion: init.protocolVersion,
    loadSession: init.agentCapabilities.loadSession,
    stopReasons: [first.stopReason, cancelled.stopReason],
    reply,
    chunks,
    sessions: [...new Set(seen.map((n) => n.sessionId))].length,
  };
});
console.log(JSON.stringify(report));
process.exit(0);
