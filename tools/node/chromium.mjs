// How the tests start Debian's Chromium through playwright-core: the
// machine's /usr/bin/chromium (CHROMIUM_BIN, exported by ensure_deps
// chromium), never a browser of Playwright's own, headless, and with the
// flags this closed network needs (without the background-networking ones
// Chromium keeps trying hosts it cannot reach). Playwright gives each
// launch a new empty profile and removes it on close. Import it from a
// script in this folder:
//
//   import { launchChromium } from './chromium.mjs';
//   const browser = await launchChromium();
//   const page = await browser.newPage();

import { chromium } from 'playwright-core';

// chromiumArgs are the flags every test browser starts with.
export const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

// chromiumPath is the browser binary: CHROMIUM_BIN, else /usr/bin/chromium.
export const chromiumPath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';

// launchChromium starts a headless Chromium and returns Playwright's Browser;
// options are Playwright's launch options, on top of these.
export function launchChromium(options = {}) {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    chromiumSandbox: false,
    ...options,
    args: [...chromiumArgs, ...(options.args || [])],
  });
}
