// Drives the built-in chat page in headless Chromium (Debian's /usr/bin/chromium) with
// playwright-core. Usage: node agui_browser.mjs http://127.0.0.1:PORT/ SCREENSHOT.png [stop]
// Default: sends "think, then use a tool", waits for the streamed reply and the tool call
// card, asks for a file write and approves it, opens the first run's timeline, takes a
// screenshot, then prints {"reply", "tool", "reasoning", "errors", "approvals",
// "timelines", "timelineOpen", "timelineRows", "console"} as JSON on stdout.
// With "stop": sends a message to a slow model, presses Stop while the reply streams, and
// prints {"reply", "notes", "console"}.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [url, screenshot, mode] = process.argv.slice(2);
const WAIT = { timeout: 15000 };

const texts = (page, selector) =>
  page.evaluate((sel) => [...document.querySelectorAll(sel)].map((n) => n.textContent), selector);
const idle = (page) =>
  page.waitForFunction(() => document.querySelector("#status").textContent === "idle", null, WAIT);

async function send(page, text) {
  await page.fill("#input", text);
  await page.click("#send");
}

async function chat(page) {
  await send(page, "think, then use a tool");
  await page.waitForSelector(".tool-call .result:not([hidden])", WAIT);
  await page.waitForFunction(
    () => [...document.querySelectorAll(".msg.assistant")].some((n) => n.textContent.includes("That is how a tool call looks.")),
    null,
    WAIT,
  );
  await idle(page);
  // An approval: the run stops with an interrupt, the page asks, Approve resumes it.
  await send(page, "write a note");
  await page.click(".approval button.primary", WAIT);
  await page.waitForFunction(
    () => [...document.querySelectorAll(".tool-call .result")].some((n) => n.textContent.includes("wrote")),
    null,
    WAIT,
  );
  await idle(page);
  // The first run's timeline: collapsed until clicked, then one row per bracket.
  const first = page.locator("details.timeline").first();
  const timelineOpen = await first.evaluate((n) => n.open);
  await first.locator("summary").click();
  await page.screenshot({ path: screenshot, fullPage: true });
  return {
    timelines: await texts(page, "details.timeline summary"),
    timelineOpen,
    timelineRows: await first.evaluate((n) =>
      [...n.querySelectorAll(".tl-row")].map((r) => ({
        label: r.querySelector(".tl-label").textContent,
        duration: r.querySelector(".tl-dur").textContent,
        width: r.querySelector(".tl-bar").style.width,
      }))),
    reply: await texts(page, ".msg.assistant"),
    tool: await texts(page, ".tool-call"),
    reasoning: await page.evaluate(() =>
      [...document.querySelectorAll("details.reasoning")].map((n) => ({ open: n.open, text: n.textContent }))),
    errors: await texts(page, ".error"),
    approvals: await texts(page, ".approval"),
  };
}

async function stop(page) {
  await send(page, "hello");
  await page.waitForFunction(() => (document.querySelector(".msg.assistant")?.textContent ?? "").length > 0, null, WAIT);
  await page.click("#stop");
  await idle(page);
  return { reply: await texts(page, ".msg.assistant"), notes: await texts(page, ".note") };
}

const profile = mkdtempSync(join(tmpdir(), "steerable-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const consoleMessages = [];
try {
  const page = await context.newPage();
  page.on("console", (msg) => consoleMessages.push(`${msg.type()}: ${msg.text()}`));
  page.on("pageerror", (err) => consoleMessages.push(`pageerror: ${err.message}`));
  await page.goto(url, WAIT);
  const result = mode === "stop" ? await stop(page) : await chat(page);
  process.stdout.write(JSON.stringify({ ...result, console: consoleMessages }) + "\n");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
