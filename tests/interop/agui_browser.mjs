// Drives the built-in chat page in headless Chromium (Debian's /usr/bin/chromium) with
// playwright-core. Usage: node agui_browser.mjs http://127.0.0.1:PORT/ SCREENSHOT.png
// Sends "think, then use a tool", waits for the streamed reply and the tool call card, asks
// for a file write and approves it, takes a screenshot, then prints {"reply", "tool", "reasoning", "console"} as JSON on stdout.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [url, screenshot] = process.argv.slice(2);
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
  await page.goto(url, { timeout: 15000 });
  await page.fill("#input", "think, then use a tool");
  await page.click("#send");
  await page.waitForSelector(".tool-call .result:not([hidden])", { timeout: 15000 });
  await page.waitForFunction(
    () => [...document.querySelectorAll(".msg.assistant")].some((n) => n.textContent.includes("That is how a tool call looks.")),
    null,
    { timeout: 15000 },
  );
  await page.waitForFunction(() => document.querySelector("#status").textContent === "idle", null, { timeout: 15000 });
  // An approval: the run stops with an interrupt, the page asks, Approve resumes it.
  await page.fill("#input", "write a note");
  await page.click("#send");
  await page.click(".approval button.primary", { timeout: 15000 });
  await page.waitForFunction(
    () => [...document.querySelectorAll(".tool-call .result")].some((n) => n.textContent.includes("wrote")),
    null,
    { timeout: 15000 },
  );
  await page.waitForFunction(() => document.querySelector("#status").textContent === "idle", null, { timeout: 15000 });
  await page.screenshot({ path: screenshot, fullPage: true });
  const result = await page.evaluate(() => ({
    reply: [...document.querySelectorAll(".msg.assistant")].map((n) => n.textContent),
    tool: [...document.querySelectorAll(".tool-call")].map((n) => n.textContent),
    reasoning: [...document.querySelectorAll("details.reasoning")].map((n) => ({ open: n.open, text: n.textContent })),
    errors: [...document.querySelectorAll(".error")].map((n) => n.textContent),
    approvals: [...document.querySelectorAll(".approval")].map((n) => n.textContent),
  }));
  process.stdout.write(JSON.stringify({ ...result, console: consoleMessages }) + "\n");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
