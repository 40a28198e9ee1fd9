// `make tools` runs this under Node 24 after installing the npm tools: each
// check uses a package for real and fails loudly when it cannot.
//
//   node tools/node/check.mjs chromium OUT.png   headless Debian Chromium (playwright-core)
//                                              screenshots a data: page, axe-core scans it
//   node tools/node/check.mjs mcp DIR             the MCP SDK's client lists and calls the
//                                              reference filesystem server's tools over stdio
//   node tools/node/check.mjs agentfs-sdk DIR     Turso's agentfs-sdk writes and reads a file
//                                              in a SQLite file in DIR

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

const page = `<!doctype html><html lang="en"><head><title>AgentFS tools check</title></head>
<body><main><h1>AgentFS tools check</h1><p>Rendered by headless Chromium.</p></main></body></html>`;

async function checkChromium(out) {
  const { launchChromium } = await import('./chromium.mjs');
  const { AxeBuilder } = await import('@axe-core/playwright');
  const browser = await launchChromium();
  try {
    // axe-core opens pages of its own in the page's context: a context is needed.
    const context = await browser.newContext({ viewport: { width: 480, height: 200 } });
    const tab = await context.newPage();
    await tab.goto('data:text/html,' + encodeURIComponent(page));
    assert.equal(await tab.title(), 'AgentFS tools check');
    await tab.screenshot({ path: out });
    const png = readFileSync(out);
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'not a PNG');
    const axe = await new AxeBuilder({ page: tab }).analyze();
    assert.deepEqual(axe.violations.map((v) => v.id), [], 'axe-core found violations');
    console.log(`chromium: ${browser.version()} took ${out} (${png.length} bytes); axe-core ${axe.testEngine.version}: ${axe.passes.length} rules passed, no violations`);
  } finally {
    await browser.close();
  }
}

async function checkMCP(dir) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  writeFileSync(join(dir, 'hello.txt'), 'hello from the tools check\n');
  const server = join(here, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
  const transport = new StdioClientTransport({ command: process.execPath, args: [server, dir], stderr: 'ignore' });
  const client = new Client({ name: 'agentfs-tools-check', version: '1.0.0' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'read_text_file'), 'no read_text_file tool');
    const res = await client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'hello.txt') } });
    assert.equal(res.content[0].text, 'hello from the tools check\n');
    const v = client.getServerVersion();
    console.log(`mcp: the SDK client listed ${tools.length} tools of ${v.name} ${v.version} and read a file through it`);
  } finally {
    await client.close();
  }
}

async function checkAgentfsSDK(dir) {
  const { AgentFS } = await import('agentfs-sdk');
  const agent = await AgentFS.open({ path: join(dir, 'agentfs-sdk.db') });
  try {
    await agent.fs.writeFile('/notes/a.txt', 'four KiB later');
    assert.equal(await agent.fs.readFile('/notes/a.txt', 'utf8'), 'four KiB later');
    assert.deepEqual(await agent.fs.readdir('/notes'), ['a.txt']);
    console.log(`agentfs-sdk: wrote, read and listed a file in ${join(dir, 'agentfs-sdk.db')} on Node ${process.version}`);
  } finally {
    await agent.close();
  }
}

const [what, arg] = process.argv.slice(2);
const checks = { chromium: checkChromium, mcp: checkMCP, 'agentfs-sdk': checkAgentfsSDK };
if (!checks[what] || !arg) {
  console.error('usage: node check.mjs chromium OUT.png | mcp DIR | agentfs-sdk DIR');
  process.exit(2);
}
await checks[what](arg);
