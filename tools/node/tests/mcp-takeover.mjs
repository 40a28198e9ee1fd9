// A takeover of a dead run by a second agent that uses only MCP tools, with
// the official TypeScript SDK's client. cmd/agentfs's
// TestMCPTakeoverWithTheNamedTools runs it twice:
//
//   AGENTFS_URL=http://… AGENTFS_TOKEN=… AGENTFS_RUN=… AGENTFS_AGENT=a AGENTFS_INTENT='{…}' node tools/node/tests/mcp-takeover.mjs
//
// Agent a works the run: it writes one file with a keyed write_file, which
// the server commits and then dies before answering (the test starts it
// with AGENTFS_FAULT_AFTER_COMMIT=exit), so a never learns whether it
// happened. Agent b, a fresh client on the same run against a fresh
// server, knows only the run's intent (AGENTFS_INTENT: path → the content
// meant for it): it calls run_recovery and then only the tool calls its
// text names under "With these tools", with the arguments written there,
// filling in only the content a write_file step asks for from the intent.
// b dies after its first write_file and c, a third fresh client, takes
// over from b the same way (a step repeated must not duplicate an
// effect). Every call and answer is printed as a model reads them.

import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.env.AGENTFS_URL;
const token = process.env.AGENTFS_TOKEN;
const run = process.env.AGENTFS_RUN;
const agent = process.env.AGENTFS_AGENT;
let current = agent;
const intent = JSON.parse(process.env.AGENTFS_INTENT ?? '{}');
assert.ok(url && token && run && agent, 'set AGENTFS_URL, AGENTFS_TOKEN, AGENTFS_RUN and AGENTFS_AGENT');

async function connect() {
  const client = new Client({ name: `agentfs-takeover-${current}`, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, 'X-Run-ID': run, 'X-Agent-ID': `agent-${current}` } },
  });
  await client.connect(transport);
  return client;
}

// call prints the call and its text answer, indented, as in docs/mcp.md.
async function call(client, name, args) {
  console.log(`> ${name} ${JSON.stringify(args)}`);
  const res = await client.callTool({ name, arguments: args });
  const text = res.content.map((c) => c.text).join('\n');
  console.log(text.split('\n').map((l, i) => (i === 0 ? '< ' : '  ') + l).join('\n'));
  assert.ok(!res.isError, `${name} failed: ${text}`);
  return { res, text };
}

// steps reads the "With these tools" list of run_recovery's text: each
// line "N. tool {name: "value", …} …" is one call.
function steps(text) {
  const at = text.indexOf('With these tools:\n');
  if (at < 0) return [];
  return text.slice(at).split('\n').slice(1).filter((l) => /^\d+\. /.test(l)).map((line) => {
    const m = line.match(/^\d+\. ([a-z_]+) \{([^}]*)\}/);
    assert.ok(m, `a step names no tool call: ${line}`);
    const args = {};
    for (const [, k, v] of m[2].matchAll(/([a-z_]+): "([^"]*)"/g)) args[k] = v;
    if (m[1] === 'write_file') {
      assert.ok(args.path in intent, `write_file of ${args.path}, which the run never meant to write`);
      args.content = intent[args.path];
    }
    return { tool: m[1], args, line };
  });
}

if (agent === 'a') {
  const client = await connect();
  await call(client, 'write_file', { path: 'takeover/plan.md', content: intent['takeover/plan.md'], idempotency_key: 'a-plan' })
    .then(() => assert.fail('the server answered a write it should have died committing'))
    .catch((err) => {
      if (err instanceof assert.AssertionError) throw err;
      console.log(`agent a: the server died before answering write_file: ${err.message.split('\n')[0]}`);
    });
  process.exit(0);
}

// Agent b follows the steps up to its first write_file and dies there;
// agent c, another fresh client, reads the recovery again and follows it
// to the end: the step b took is named again and repeated harmlessly.
for (const who of ['b', 'c']) {
  current = who;
  const client = await connect();
  console.log(`agent ${who}:`);
  const { text } = await call(client, 'run_recovery', {});
  const todo = steps(text);
  assert.ok(todo.length > 0, 'run_recovery named nothing to do');
  for (const s of todo) {
    if (s.tool === 'run_recovery') continue; // a wait: the next agent asks again
    await call(client, s.tool, s.args);
    if (who === 'b' && s.tool === 'write_file') break;
  }
  await client.close();
}
const client = await connect();
const { text } = await call(client, 'run_recovery', {});
assert.match(text, /Next actions: none/);
assert.doesNotMatch(text, /With these tools/);
console.log('ok: run_recovery and only the tools it named finished the run; nothing is left to do');
await client.close();
process.exit(0); // the transport's open GET stream would keep node running
