// Replays the conformance scenarios against live steerable-bridge AG-UI servers with the official
// @ag-ui/client HttpAgent.
//
// Usage: node conformance_agui.mjs PLAN.json
// PLAN.json: [{name, url, threadId, turns: [{prompt, state, frontendTools, toolResults, resume,
//              steer, cancel, compact}]}]
// Each scenario runs on its own HttpAgent (one thread); a turn adds its messages and runs the
// agent. Triggers fire on the first event of their kind (`metadata.steerable.kind`, or a
// CUSTOM `steerable.<kind>`): steer sends the text from a second HttpAgent on the same thread
// with `forwardedProps.steerable.steer`; cancel calls `abortRun()` (AG-UI's only way to stop). Prints one JSON line: {warnings, scenarios: [{name,
// runs: [{events, error}]}]} — events as the client handed them to `onEvent`. Every
// "[ag-ui]" console message is collected; the Python test fails on any.
import { readFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const warnings = [];
for (const level of ["warn", "error", "log", "info"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    const text = args.map((a) => (typeof a === "string" ? a : String(a?.message ?? a))).join(" ");
    if (text.includes("[ag-ui]")) warnings.push(`${level}: ${text}`);
    original(...args);
  };
}

function kindOf(event) {
  if (event.type === "CUSTOM" && String(event.name).startsWith("steerable.")) return event.value?.kind;
  return event.metadata?.steerable?.kind;
}

async function replay(scenario, index) {
  const threadId = scenario.threadId;
  const initialState = scenario.turns.find((t) => t.state != null)?.state;
  const agent = new HttpAgent({ url: scenario.url, threadId, ...(initialState ? { initialState } : {}) });
  const runs = [];
  let counter = 0;
  for (const turn of scenario.turns) {
    if (turn.prompt) agent.addMessage({ id: `user-${index}-${++counter}`, role: "user", content: turn.prompt });
    for (const answer of turn.toolResults ?? []) {
      agent.addMessage({ id: `tool-${answer.call_id}`, role: "tool", toolCallId: answer.call_id, content: answer.text });
    }
    const resume = [
      ...(turn.resume ?? []).map((a) => ({
        interruptId: `approval-${a.call_id}`,
        status: "resolved",
        payload: { approved: a.approved },
      })),
      ...(turn.answers ?? []).map((q) => ({
        interruptId: `question-${q.call_id}`,
        status: "resolved",
        payload: q.content != null ? { action: q.action, content: q.content } : { action: q.action },
      })),
    ];
    const events = [];
    const side = [];
    let steered = false;
    let aborted = false;
    let error = null;
    try {
      await agent.runAgent(
        {
          runId: `run-${index}-${++counter}`,
          tools: turn.frontendTools ?? [],
          ...(resume.length ? { resume } : {}),
          ...(turn.compact ? { forwardedProps: { steerable: { command: "compact" } } } : {}),
        },
        {
          onEvent: ({ event }) => {
            events.push(event);
            if (turn.cancel && !aborted && kindOf(event) === turn.cancel.on) {
              aborted = true;
              agent.abortRun();
            }
            if (turn.steer && !steered && kindOf(event) === turn.steer.on) {
              steered = true;
              const helper = new HttpAgent({ url: scenario.url, threadId });
              helper.addMessage({ id: `steer-${index}-${++counter}`, role: "user", content: turn.steer.text });
              side.push(helper.runAgent({ runId: `steer-${index}-${counter}`, forwardedProps: { steerable: { steer: true } } }));
            }
          },
        },
      );
      await Promise.all(side);
    } catch (err) {
      error = String(err?.message ?? err);
    }
    runs.push({ events, error, aborted });
  }
  return { name: scenario.name, runs };
}

const results = [];
for (const [index, scenario] of plan.entries()) results.push(await replay(scenario, index));
process.stdout.write(JSON.stringify({ warnings, scenarios: results }) + "\n");
