// A CopilotKit runner that restores threads from steerable-bridge after the runtime restarts.
//
// CopilotKit's runtime answers a page's `/agent/:id/connect` (how a reloaded page gets its
// thread back) from its runner, and the default InMemoryAgentRunner only knows the runs this
// runtime process has seen: after a restart, a deploy, or on a second instance behind a load
// balancer, the page comes back empty although steerable-bridge still holds the thread. This
// runner keeps the in-memory behaviour and, for a thread it has never seen, asks the agent's
// `GET /agent/threads/{threadId}` (docs/agui-routes.md) and replays it as one run:
// RUN_STARTED, MESSAGES_SNAPSHOT, STATE_SNAPSHOT, RUN_FINISHED (with the pending interrupts,
// when the thread waits for an approval). The page's request headers that CopilotKit forwards
// (Authorization) go along, so `serve --auth jwt` sees the same user.
//
// Usage, in the app that hosts the runtime:
//   import { CopilotRuntime, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
//   import { steerableRunner } from "./copilotkit-runner.mjs";
//   const url = "http://127.0.0.1:8000/agent";
//   const runtime = new CopilotRuntime({
//     agents: { default: new HttpAgent({ url }) },
//     runner: steerableRunner(InMemoryAgentRunner, { default: url }),
//   });
// The base class is passed in so this file imports nothing and fits the runtime you pinned.

const RESTORE_TIMEOUT_MS = 10000;

/** A subclass of `Base` (CopilotKit's InMemoryAgentRunner) restoring from `agentUrls`. */
export function steerableRunner(Base, agentUrls) {
  return new (class SteerableRunner extends Base {
    connect(request) {
      const url = agentUrls[request.agentId];
      if (!url || this.getThreadEvents(request.threadId).length > 0) return super.connect(request);
      const local = super.connect(request);
      const Observable = local.constructor;  // the runtime's own rxjs Observable
      return new Observable((subscriber) => {
        let inner = null;
        let closed = false;
        restore(url, request).then(
          (events) => {
            if (closed) return;
            for (const event of events) subscriber.next(event);
            inner = local.subscribe(subscriber);  // whatever this process runs next
          },
          (error) => closed || subscriber.error(error),
        );
        return () => {
          closed = true;
          inner?.unsubscribe();
        };
      });
    }
  })();
}

async function restore(url, { threadId, headers }) {
  const forwarded = Object.fromEntries(
    Object.entries(headers ?? {}).filter(([name]) => name.toLowerCase() === "authorization"),
  );
  const response = await fetch(`${url}/threads/${encodeURIComponent(threadId)}`, {
    headers: { accept: "application/json", ...forwarded },
    signal: AbortSignal.timeout(RESTORE_TIMEOUT_MS),
  });
  if (response.status === 404) return [];  // a new thread: nothing to restore
  if (!response.ok) {
    throw new Error(`restoring thread ${threadId}: ${url} answered ${response.status} ${await response.text()}`);
  }
  const thread = await response.json();
  const runId = `restore-${threadId}-${thread.lastEventId}`;
  const interrupts = thread.interrupts ?? [];
  return [
    { type: "RUN_STARTED", threadId, runId },
    { type: "MESSAGES_SNAPSHOT", messages: thread.messages },
    { type: "STATE_SNAPSHOT", snapshot: thread.state ?? {} },
    {
      type: "RUN_FINISHED", threadId, runId,
      ...(interrupts.length ? { outcome: { type: "interrupt", interrupts } } : {}),
    },
  ];
}
