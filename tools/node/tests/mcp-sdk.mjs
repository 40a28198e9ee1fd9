// The official TypeScript SDK's client against AgentFS's /mcp door, as an
// MCP host uses it. cmd/agentfs's TestOfficialMCPClients runs it:
//
//   AGENTFS_A=http://… AGENTFS_B=http://… AGENTFS_TOKEN=… node tools/node/tests/mcp-sdk.mjs
//
// A and B are two `agentfs serve` processes on one database and bucket.
// The client speaks to A; REST writes go to B, so a subscription on A hears
// a change another instance made. It prints one line per check and exits
// non-zero at the first that fails.

import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const A = process.env.AGENTFS_A;
const B = process.env.AGENTFS_B;
const token = process.env.AGENTFS_TOKEN;
assert.ok(A && B && token, 'set AGENTFS_A, AGENTFS_B and AGENTFS_TOKEN');
const auth = { Authorization: `Bearer ${token}` };
const dir = `ts-${Date.now()}`;
const run = `${dir}-run`;
const called = new Set();

function say(line) {
  console.log(`ok: ${line}`);
}

async function connect() {
  const warnings = [];
  const client = new Client({ name: 'agentfs-ts-test', version: '1.0.0' });
  const origWarn = console.warn;
  console.warn = (...args) => warnings.push(args.join(' '));
  const transport = new StreamableHTTPClientTransport(new URL(`${A}/mcp`), {
    requestInit: { headers: { ...auth, 'X-Run-ID': run } },
  });
  await client.connect(transport);
  console.warn = origWarn;
  return { client, transport, warnings };
}

// restSession opens an upload session of body at path over REST (on B,
// in the client's run), sending its one part when sendPart: what
// complete_upload and abort_upload finish or end.
async function restSession(path, body, sendPart) {
  const res = await fetch(`${B}/v1/uploads`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'application/json', 'X-Run-ID': run },
    body: JSON.stringify({ path, size_bytes: Buffer.byteLength(body) }),
  });
  assert.equal(res.status, 201, `REST upload session ${path}: ${res.status}`);
  const { id } = await res.json();
  if (sendPart) {
    const part = await fetch(`${B}/v1/uploads/${id}/parts/1`, { method: 'PUT', headers: { ...auth, 'X-Run-ID': run }, body });
    assert.equal(part.status, 200, `REST part of ${path}: ${part.status}`);
  }
  return id;
}

async function restPut(path, body) {
  const res = await fetch(`${B}/v1/files?path=${encodeURIComponent(path)}&if_exists=replace`, {
    method: 'POST', headers: { ...auth, 'Content-Type': 'text/plain' }, body,
  });
  if (res.status !== 200 && res.status !== 201) {
    assert.fail(`REST put ${path}: ${res.status} ${await res.text()}`);
  }
  return res.json();
}

// call is callTool, which validates a success's structuredContent against
// the tool's outputSchema (the SDK throws when it does not match).
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  called.add(name);
  assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name}: no structuredContent`);
  return res;
}

async function tools(client) {
  const { tools } = await client.listTools();
  assert.ok(tools.length >= 17, `only ${tools.length} tools`);
  say(`tools/list: ${tools.length} tools`);
  const w = await call(client, 'write_file', { path: `${dir}/a.txt`, content: 'alpha\nbeta\n' });
  await call(client, 'read_text_file', { path: `${dir}/a.txt` });
  await call(client, 'read_text_file', { path: `${dir}/a.txt`, head: 1 });
  await call(client, 'read_multiple_files', { paths: [`${dir}/a.txt`, `${dir}/missing.txt`] });
  await call(client, 'edit_file', { path: `${dir}/a.txt`, edits: [{ oldText: 'beta', newText: 'gamma' }] });
  await call(client, 'edit_file', { path: `${dir}/a.txt`, edits: [{ oldText: 'gamma', newText: 'delta' }], dryRun: true });
  await call(client, 'list_directory', { path: dir });
  await call(client, 'directory_tree', { path: dir });
  await call(client, 'search_files', { path: dir, pattern: '**/*.txt' });
  const grep = await call(client, 'grep_files', { path: dir, pattern: 'gam+a' });
  assert.deepEqual(grep.structuredContent.data.map((m) => [m.path, m.line, m.text]), [[`${dir}/a.txt`, 2, 'gamma']],
    JSON.stringify(grep.structuredContent));
  const ck = await call(client, 'checkpoint', { path: dir, note: 'before the revert' });
  await call(client, 'list_checkpoints', { path: dir });
  await call(client, 'get_file_info', { path: `${dir}/a.txt` });
  await call(client, 'file_history', { path: `${dir}/a.txt` });
  await call(client, 'revert_file', { path: `${dir}/a.txt`, version: 1 });
  await call(client, 'share_file', { path: `${dir}/a.txt` });
  const diff = await call(client, 'diff', { from: ck.structuredContent.id, path: dir });
  assert.ok(diff.structuredContent.changes.some((c) => c.path === `${dir}/a.txt` && c.change === 'modified'), JSON.stringify(diff.structuredContent));
  await call(client, 'restore', { path: dir, to: ck.structuredContent.id, dry_run: true });
  const fork = await call(client, 'fork', { source: dir, destination: `${dir}-fork` });
  await call(client, 'write_file', { path: `${dir}-fork/a.txt`, content: 'from the fork\n', if_exists: 'replace' });
  const merged = await call(client, 'merge', { fork_id: fork.structuredContent.id, on_conflict: 'fork' });
  assert.ok(merged.structuredContent.applied.some((c) => c.path === `${dir}/a.txt`), JSON.stringify(merged.structuredContent));
  await call(client, 'move_file', { source: `${dir}/a.txt`, destination: `${dir}/b.txt` });
  const del = await call(client, 'delete_file', { path: `${dir}/b.txt` });
  await call(client, 'restore_file', { file_id: del.structuredContent.id ?? w.structuredContent.id });
  await call(client, 'list_run_files', {});
  await call(client, 'read_media_file', { path: `${dir}/b.txt` });
  await call(client, 'run_summary', { run_id: run });
  await call(client, 'run_recovery', { run_id: run });
  const done = await call(client, 'complete_upload', { upload_id: await restSession(`${dir}/session.txt`, 'in parts\n', true) });
  assert.equal(done.structuredContent.path, `${dir}/session.txt`);
  const ended = await call(client, 'abort_upload', { upload_id: await restSession(`${dir}/ended.txt`, 'never\n', false) });
  assert.equal(ended.structuredContent.status, 'aborted');
  const missing = tools.map((t) => t.name).filter((n) => !called.has(n));
  assert.deepEqual(missing, [], 'tools not called');
  say(`${called.size} tools called, each succeeding; the SDK client validated every result against its outputSchema`);
}

async function failures(client) {
  await call(client, 'write_file', { path: `${dir}/taken.txt`, content: 'one' });
  const res = await client.callTool({ name: 'write_file', arguments: { path: `${dir}/taken.txt`, content: 'two', if_exists: 'error' } });
  assert.equal(res.isError, true);
  assert.equal(res.structuredContent, undefined, 'a failure carries no structuredContent');
  assert.match(res.content[0].text, /^PATH_EXISTS/);
  assert.equal(res._meta?.['agentfs/problem']?.code, 'PATH_EXISTS');
  say(`a failed write_file: ${res.content[0].text.split('\n')[0]}`);
  const bad = await client.callTool({ name: 'write_file', arguments: { path: `${dir}/x.txt` } });
  assert.equal(bad.isError, true);
  assert.match(bad.content[0].text, /^VALIDATION_FAILED/);
  assert.ok(bad._meta['agentfs/problem'].errors.some((e) => e.field === 'content'), JSON.stringify(bad._meta));
  say(`arguments outside the schema: ${bad.content[0].text.split('\n')[0]}`);
}

async function resources(client) {
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.equal(resourceTemplates[0].uriTemplate, 'agentfs:///{+path}');
  await restPut(`${dir}/res/r.md`, '# resource\n');
  const read = await client.readResource({ uri: `agentfs:///${dir}/res/r.md` });
  assert.equal(read.contents[0].text, '# resource\n');
  const list = await client.listResources({ _meta: { 'agentfs/prefix': `${dir}/res/` } });
  assert.deepEqual(list.resources.map((r) => r.uri), [`agentfs:///${dir}/res/r.md`]);
  say('resources: template, read, list by prefix');
}

async function subscriptions(client) {
  const uri = `agentfs:///${dir}/watched.txt`;
  const heard = [];
  let wake;
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    heard.push(n.params.uri);
    wake?.();
  });
  await client.subscribeResource({ uri });
  // The GET stream may open just after subscribe answers; writes after it
  // are heard either way (the session's watch starts at subscribe).
  await restPut(`${dir}/watched.txt`, 'changed on the other instance');
  const deadline = Date.now() + 20000;
  while (!heard.includes(uri) && Date.now() < deadline) {
    await new Promise((r) => { wake = r; setTimeout(r, 500); });
  }
  assert.ok(heard.includes(uri), `no notifications/resources/updated for ${uri} (heard ${heard})`);
  say(`subscribed on ${A}, written through ${B}: notifications/resources/updated ${uri}`);
}

const { client, warnings } = await connect();
try {
  say(`connected: ${client.getServerVersion().name} ${client.getServerVersion().version}, protocol ${client.transport?.protocolVersion ?? '(negotiated)'}`);
  await tools(client);
  await failures(client);
  await resources(client);
  await subscriptions(client);
  assert.deepEqual(warnings, [], 'the SDK warned');
} finally {
  await client.close();
}
