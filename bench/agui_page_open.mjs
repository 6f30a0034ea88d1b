// Opens one thread in the built-in chat page (headless Chromium, playwright-core from
// tests/interop/node_modules) REPS times and prints, per load, the ms from navigation start
// until the first message is drawn and until the whole thread is (USERS user bubbles, status
// idle). Usage: node bench/agui_page_open.mjs URL THREAD_ID USERS REPS. Driven by
// bench/agui_page_open.py, which builds the thread and reports the figures.
import { createRequire } from "node:module";

const require = createRequire(new URL("../tests/interop/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const [url, threadId, users, reps] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const loads = [];
try {
  for (let i = 0; i < Number(reps); i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addInitScript((id) => localStorage.setItem("steerable.thread", id), threadId);
    const page = await context.newPage();
    await page.goto(url, { timeout: 60000 });
    const first = await page.waitForFunction(
      () => document.querySelector("#log .msg") && (window.__first ??= performance.now()),
      null, { timeout: 120000, polling: "raf" });
    const whole = await page.waitForFunction(
      (n) => document.querySelectorAll("#log .msg.user").length >= n
        && document.querySelector("#status").textContent === "idle"
        && (window.__whole ??= performance.now()),
      Number(users), { timeout: 120000, polling: "raf" });
    loads.push({ firstMs: await first.jsonValue(), wholeMs: await whole.jsonValue(),
                 users: await page.evaluate(() => document.querySelectorAll("#log .msg.user").length),
                 cards: await page.evaluate(() => document.querySelectorAll("#log .tool-call").length) });
    await context.close();
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(loads) + "\n");
