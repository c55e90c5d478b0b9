// What every scenario shares. A scenario is run by ui/browser_test.go as
// `node e2e/<scenario>.mjs <base URL>`, with its parameters in E2E_*
// variables; Go sets up the outbox and verifies it afterwards, the script
// only uses the UI as an operator would (docs/ARCHITECTURE.md, "The web UI").
// No sleeps: every wait is on something the page shows, with a deadline.
import { chromium } from 'playwright-core';

// timeout bounds every wait of a scenario.
export const timeout = 20_000;

export const base = process.argv[2] ?? process.env.E2E_BASE_URL;

// param returns the E2E_<name> variable, which must be set.
export function param(name) {
  const v = process.env[`E2E_${name}`];
  if (!v) throw new Error(`E2E_${name} is not set`);
  return v;
}

export function assert(ok, message) {
  if (!ok) throw new Error(`assertion failed: ${message}`);
}

// scenario launches one chromium, runs fn({ open }) and reports: it fails
// (exit code 1, with what each page showed) when fn throws or any page
// saw a problem: a script error, a dialog (injected markup ran), a CSP
// violation, an error response it did not allow, or a request outside
// the base URL (the UI's links escaping its mount point).
export async function scenario(name, fn) {
  if (!base) throw new Error('usage: node <scenario>.mjs <base URL>');
  const t0 = Date.now();
  const browser = await chromium.launch({
    executablePath: process.env.E2E_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox'],
  });
  const problems = [];
  const pages = [];
  const context = await browser.newContext();
  context.setDefaultTimeout(timeout);
  // open returns a new tab whose requests carry X-User: who, as the test
  // server's auth middleware requires; allow lists the error statuses
  // the scenario expects this tab to receive.
  const open = async (who, { allow = [] } = {}) => {
    const page = await context.newPage();
    await page.setExtraHTTPHeaders({ 'X-User': who });
    page.on('pageerror', (e) => problems.push(`${who}: script error: ${e.message}`));
    page.on('dialog', (d) => {
      problems.push(`${who}: a dialog opened (markup ran?): ${d.message()}`);
      d.dismiss().catch(() => {});
    });
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) problems.push(`${who}: ${m.text()}`);
    });
    page.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith(base) && new URL(u).pathname !== '/favicon.ico') problems.push(`${who}: request outside ${base}: ${u}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400 && !allow.includes(r.status()) && new URL(r.url()).pathname !== '/favicon.ico') {
        problems.push(`${who}: ${r.request().method()} ${r.url()}: ${r.status()}`);
      }
    });
    pages.push({ who, page });
    return page;
  };
  let failed = false;
  try {
    await fn({ open });
    assert(problems.length === 0, `problems seen:\n  ${problems.join('\n  ')}`);
  } catch (e) {
    failed = true;
    console.error(`${name}: ${e.stack ?? e}`);
    if (problems.length) console.error(`problems seen:\n  ${problems.join('\n  ')}`);
    for (const { who, page } of pages) {
      const text = await page.locator('main').innerText({ timeout: 1000 }).catch(() => '(no main)');
      console.error(`--- ${who}'s tab at ${page.url()}:\n${text.slice(0, 3000)}`);
    }
  } finally {
    await browser.close();
  }
  console.log(`${name}: ${failed ? 'FAILED' : 'ok'} in ${Date.now() - t0} ms`);
  process.exitCode = failed ? 1 : 0;
}

// definition is the <dd> of a <dl> term on the partition page.
export function definition(page, term) {
  return page.locator(`xpath=//dt[normalize-space()="${term}"]/following-sibling::dd[1]`);
}

// watch waits until locator's text matches re. Where the element is in a
// live region (data-live: refreshed in place by the UI's polling) it
// waits without reloading; elsewhere it reloads the page until it does.
// The page must have been reached by a GET.
export async function watch(page, locator, re, what) {
  const t0 = Date.now();
  const deadline = t0 + timeout;
  let last = '';
  for (let reloads = 0; ; reloads++) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`timed out waiting for ${what} to match ${re}; last ${JSON.stringify(last)}`);
    last = (await locator.textContent({ timeout: left })) ?? '';
    if (re.test(last)) {
      console.log(`  ${what}: ${JSON.stringify(last.trim())} after ${reloads} reloads, ${Date.now() - t0} ms`);
      return last;
    }
    if (await locator.evaluate((el) => el.closest('[data-live]') !== null)) {
      await locator.filter({ hasText: re }).waitFor({ timeout: Math.max(1, deadline - Date.now()) });
      console.log(`  ${what}: updated live after ${reloads} reloads, ${Date.now() - t0} ms`);
      return locator.textContent();
    }
    await page.reload();
  }
}

// submit clicks a submit button and returns the response of the POST it makes.
export async function submit(page, button) {
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST'),
    button.click(),
  ]);
  await page.waitForLoadState();
  return response;
}

