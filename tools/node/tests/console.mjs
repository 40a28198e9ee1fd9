// The console in a real browser (Debian's Chromium through playwright-core),
// against a running server the Go test TestConsoleInABrowser prepared:
// sign-in, browsing, a version diff, a file revert, a run revert with its
// plan shown first, a problem shown with its detail, writes by another
// client appearing live within 2 s on a run's timeline and on the events
// page, no request leaving the origin, and axe-core scans (WCAG 2 A and AA)
// with no serious or critical violation, at desktop and phone width. It
// saves screenshots into SHOTS and prints one line per check.
//
// Environment: AGENTFS_URL, AGENTFS_TOKEN, FILE_ID (notes/plan.md, two
// text versions), RUN_ID (the run that replaced it), UNDO_RUN (a run that
// created undo/made.txt), SHOTS (a folder).

import AxeBuilder from '@axe-core/playwright';
import { launchChromium } from '../chromium.mjs';

const base = process.env.AGENTFS_URL;
const token = process.env.AGENTFS_TOKEN;
const { FILE_ID: fileID, RUN_ID: runID, UNDO_RUN: undoRun, SHOTS: shots } = process.env;
const origin = new URL(base).origin;

const fail = (msg) => { throw new Error(msg); };
const ok = (msg) => console.log(`ok: ${msg}`);

// another client: a write through the API, as an agent would make it.
async function write(path, body, runHeader) {
  const res = await fetch(`${base}/v1/files?path=${encodeURIComponent(path)}&if_exists=replace`, {
    method: 'POST', body,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'text/plain', 'X-Run-ID': runHeader, 'Idempotency-Key': `k-${crypto.randomUUID()}` },
  });
  if (!res.ok) fail(`write ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function getJSON(path) {
  const res = await fetch(base + path, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) fail(`GET ${path}: ${res.status}`);
  return res.json();
}

async function axe(page, what) {
  const r = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  const bad = r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  if (bad.length) fail(`axe on ${what}: ${bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target).join(' ')}`).join('; ')}`);
  ok(`axe: no serious violation on ${what} (${r.passes.length} rules passed)`);
}

// live waits for the page's stream to be open, makes a write, and times
// its event's arrival in selector.
async function live(page, selector, path, run) {
  await page.waitForSelector('#page[data-live="true"]', { timeout: 10000 });
  const start = Date.now();
  await write(path, `written at ${new Date().toISOString()}\n`, run);
  await page.locator(selector, { hasText: path }).first().waitFor({ timeout: 2000 });
  return Date.now() - start;
}

const browser = await launchChromium();
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const outside = [];
  const errors = [];
  page.on('request', (r) => { if (new URL(r.url()).origin !== origin && !r.url().startsWith('blob:')) outside.push(r.url()); });
  // The browser logs each 4xx itself ("Failed to load resource"): those
  // are the problems the checks below provoke. Anything else is a fault.
  page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));

  // Sign in: the page asks for a token; a wrong one is refused with its problem.
  const res = await page.goto(`${base}/console/`);
  if (res.headers()['content-security-policy']?.split(';')[0] !== "default-src 'self'") fail(`CSP: ${res.headers()['content-security-policy']}`);
  await page.waitForSelector('#token:focus'); // the sign-in field takes the keyboard at once
  await page.keyboard.type('afs_wrong');
  await page.keyboard.press('Enter');
  await page.locator('#problem', { hasText: 'UNAUTHENTICATED' }).waitFor({ timeout: 5000 });
  ok('a wrong token is refused with its problem shown');
  await page.fill('#token', token);
  await page.press('#token', 'Enter');
  await page.locator('#page[data-ready="true"] a', { hasText: runID }).waitFor({ timeout: 10000 });
  if (page.url().includes(token)) fail('the token is in the URL');
  if (await page.evaluate(() => Object.values(sessionStorage).length) !== 1) fail('the token is not in sessionStorage');
  ok('signed in; the runs page lists the run');
  await page.screenshot({ path: `${shots}/runs.png`, fullPage: true });
  await axe(page, 'the runs page');

  // A run's timeline, live.
  await page.click(`a:text-is("${runID}")`);
  await page.waitForSelector('#timeline li');
  const ms = await live(page, '#timeline li', 'notes/live.txt', runID);
  ok(`a write by another client appeared on the run's timeline after ${ms} ms`);
  await page.screenshot({ path: `${shots}/run-timeline.png`, fullPage: true });
  await axe(page, "a run's page");

  // Files: folders, a file, a diff between its two versions.
  await page.click('nav a:text-is("Files")');
  await page.click('a:text-is("notes/")');
  await page.click('a:text-is("notes/plan.md")');
  await page.waitForSelector('#diff-from');
  await page.selectOption('#diff-from', '1');
  await page.selectOption('#diff-to', '2');
  await page.click('button:text-is("Show diff")');
  await page.waitForSelector('pre.diff span.add');
  const diff = await page.textContent('pre.diff');
  if (!diff.includes('- step two') || !diff.includes('+ step two, done')) fail(`the diff: ${diff}`);
  ok('a diff between two versions shows the changed lines');
  await page.screenshot({ path: `${shots}/version-diff.png`, fullPage: true });
  await axe(page, "a file's page with a diff");

  // A problem with its detail: moving onto a path that is taken.
  await page.fill('#move-to', 'notes/live.txt');
  await page.click('button:text-is("Move")');
  await page.locator('#problem', { hasText: 'PATH_EXISTS' }).waitFor({ timeout: 5000 });
  ok(`a refused move shows its problem: ${(await page.textContent('#problem')).trim()}`);

  // Revert the file to version 1 (a keyed write): version 3 has v1's content.
  await page.click('button:text-is("Revert to version 1")');
  await page.locator('dd', { hasText: /^3$/ }).waitFor({ timeout: 5000 });
  const after = await getJSON(`/v1/files/${fileID}`);
  const v1 = (await getJSON(`/v1/files/${fileID}/versions/1`));
  if (after.version !== 3 || after.sha256 !== v1.sha256) fail(`after the revert: version ${after.version}, sha ${after.sha256} vs ${v1.sha256}`);
  ok('a file reverted to version 1 from the console');

  // Run revert: the plan first, then the batch.
  await page.goto(`${base}/console/#/run/${encodeURIComponent(undoRun)}`);
  await page.click('button:text-is("Revert run…")');
  await page.locator('#plan-items li', { hasText: 'delete undo/made.txt' }).waitFor({ timeout: 5000 });
  ok('the run revert shows its planned items before it runs');
  await page.screenshot({ path: `${shots}/run-revert-plan.png`, fullPage: true });
  await page.click('button:text-is("Revert now")');
  await page.locator('#batch-result', { hasText: 'succeeded' }).waitFor({ timeout: 15000 });
  const made = await getJSON(`/v1/files?path=${encodeURIComponent('undo/made.txt')}`);
  if (made.data.length !== 0) fail('undo/made.txt is still live after the run revert');
  ok('the run reverted: the file it made is deleted');

  // Events: the live feed with a filter.
  await page.click('nav a:text-is("Events")');
  await page.fill('#f-prefix', 'feed/');
  await page.click('button:text-is("Apply filters")');
  await page.waitForFunction(() => (document.querySelector('#page').dataset.route || '').includes('prefix=feed'));
  await page.waitForSelector('#page[data-live="true"]', { timeout: 10000 });
  await write('elsewhere/skip.txt', 'not shown', 'run-other');
  const ms2 = await live(page, '#events li', 'feed/new.txt', 'run-other');
  if (await page.locator('#events li', { hasText: 'elsewhere/skip.txt' }).count()) fail('the filtered feed shows an event outside its prefix');
  ok(`a write by another client appeared on the filtered events page after ${ms2} ms`);
  await axe(page, 'the events page');

  // Checkpoints and batches pages open; a phone-width view passes axe too.
  await page.click('nav a:text-is("Checkpoints")');
  await page.waitForSelector('#page[data-ready="true"]');
  await page.click('nav a:text-is("Batches and uploads")');
  await page.waitForSelector('#page[data-ready="true"]');
  await page.setViewportSize({ width: 375, height: 800 });
  await page.goto(`${base}/console/#/file/${fileID}`);
  await page.waitForSelector('#page[data-ready="true"]');
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  if (wide > 375) fail(`at phone width the page is ${wide} px wide`);
  await page.screenshot({ path: `${shots}/phone-file.png`, fullPage: true });
  await axe(page, "a file's page at phone width");

  if (outside.length) fail(`requests left the origin: ${outside.join(', ')}`);
  if (errors.length) fail(`the page logged errors: ${errors.join('; ')}`);
  ok('no request left the origin; no error in the page');
} finally {
  await browser.close();
}
