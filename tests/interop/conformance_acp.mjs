// Replays the conformance scenarios against `steerable-bridge acp` with the official TypeScript
// ACP client (@agentclientprotocol/sdk 2.x).
//
// Usage: node conformance_acp.mjs PLAN.json   (env ACP_PYTHON, ACP_TOOLS)
// PLAN.json: [{name, script, maxSteps, quality, cwd, turns: [{prompt, permission, cancel, steer,
//              compact}]}]  (compact: the prompt is `/compact`; quality: `--quality` text, the
//              scenario's settings as a JSON object)
// For each scenario: spawn the agent, initialize opting in to `_steerable/event` (and
// advertising form and url elicitation and the v1.25 session.notices / session.compaction, whose
// updates the zod schema below validates), open a session, send one session/prompt per turn, answer
// permission requests and questions (`elicitation/create`) as the turn says, record the
// elicitationId of each `elicitation/complete` (validated likewise),
// cancel / steer (`_steerable/steer`) when the trigger kind shows in an update's
// `_meta.steerable.kind`. Every session/update is validated against the SDK's zod schema.
// Prints one JSON line: {warnings, scenarios: [{name, events, updates, completed, stops, errors}]}; the
// Python test (test_conformance_interop.py) decodes and compares.
import { readFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable";
import * as z from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

const { ACP_PYTHON, ACP_TOOLS } = process.env;
const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const warnings = [];
for (const level of ["warn", "error"]) {
  const original = console[level];
  console[level] = (...args) => {
    warnings.push(args.map(String).join(" "));
    original(...args);
  };
}

async function replay(scenario) {
  const child = spawn(
    ACP_PYTHON,
    [
      "-m", "steerable_bridge.cli", "acp",
      "--model", `scripted:${scenario.script}`,
      "--approve", "ask",
      "--max-steps", String(scenario.maxSteps),
      "--quality", scenario.quality,
      "--tools-module", ACP_TOOLS,
    ],
    { cwd: scenario.cwd, env: { ...process.env, STEERABLE_DEMO_PACE_MS: "0" }, stdio: ["pipe", "pipe", "ignore"] },
  );
  const record = { name: scenario.name, events: [], updates: [], completed: [], stops: [], errors: [] };
  let turn = {};
  let fired = new Set();
  let sessionId = "";
  let agentRef = null;
  const pending = [];

  function trigger(kind) {
    for (const name of ["cancel", "steer"]) {
      const spec = turn[name];
      if (!spec || fired.has(name) || spec.on !== kind) continue;
      fired.add(name);
      if (name === "cancel") pending.push(agentRef.notify("session/cancel", { sessionId }));
      else pending.push(agentRef.request("_steerable/steer", { sessionId, text: spec.text }));
    }
  }

  const app = acp
    .client({ name: "steerable-bridge-conformance" })
    .onNotification("session/update", (ctx) => {
      const parsed = z.zSessionNotification.safeParse(ctx.params);
      if (!parsed.success) record.errors.push(`invalid session/update: ${JSON.stringify(parsed.error.issues)}`);
      record.updates.push(ctx.params);
      trigger(ctx.params.update?._meta?.steerable?.kind);
    })
    .onNotification("elicitation/complete", (ctx) => {
      const parsed = z.zCompleteElicitationNotification.safeParse(ctx.params);
      if (!parsed.success) record.errors.push(`invalid elicitation/complete: ${JSON.stringify(parsed.error.issues)}`);
      record.completed.push(ctx.params.elicitationId);
    })
    .onNotification("*", (ctx) => {
      if (ctx.method === "_steerable/event") record.events.push(ctx.params);
    })
    .onRequest("session/request_permission", () => ({
      outcome: { outcome: "selected", optionId: turn.permission ?? "allow_once" },
    }))
    .onRequest("elicitation/create", (ctx) => {
      const parsed = z.zCreateElicitationRequest.safeParse(ctx.params);
      if (!parsed.success) record.errors.push(`invalid elicitation/create: ${JSON.stringify(parsed.error.issues)}`);
      const choice = turn.question ?? { action: "cancel" };
      return choice.action === "accept" && choice.content != null
        ? { action: "accept", content: choice.content }
        : { action: choice.action };
    });

  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  await app.connectWith(stream, async (agent) => {
    agentRef = agent;
    await agent.request("initialize", {
      protocolVersion: 1,
      // it answers the turn's questions; it shows v1.25 notices and compactions itself
      clientCapabilities: { elicitation: { form: {}, url: {} }, session: { notices: {}, compaction: {} } },
      _meta: { steerable: { events: true } },
    });
    const created = await agent.request("session/new", { cwd: scenario.cwd, mcpServers: [] });
    sessionId = created.sessionId;
    for (const next of scenario.turns) {
      turn = next;
      fired = new Set();
      try {
        const answer = await agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: next.compact ? "/compact" : next.prompt ?? "" }],
        });
        record.stops.push(answer.stopReason);
      } catch (err) {
        record.stops.push(null);
        record.errors.push(`prompt failed: ${err?.message ?? err}`);
      }
      await Promise.all(pending.splice(0));
    }
  });
  child.kill();
  return record;
}

const results = [];
for (const scenario of plan) results.push(await replay(scenario));
process.stdout.write(JSON.stringify({ warnings, scenarios: results }) + "\n");
