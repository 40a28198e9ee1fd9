// An agent's session with points in time and forks, through the official
// TypeScript SDK's client against AgentFS's /mcp door: a checkpoint, a bad
// edit across several files, the diff showing it, a restore putting it
// back; then a fork, changes on both sides, and a merge with one conflict
// resolved. It prints the transcript (each call, then the text the tool
// answered) and exits non-zero at the first answer that is not what the
// session needs. cmd/agentfs's TestOfficialMCPClients runs it;
// docs/mcp.md shows a transcript of it.
//
//   AGENTFS_A=http://… AGENTFS_TOKEN=… node tools/node/tests/mcp-points-session.mjs

import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const A = process.env.AGENTFS_A;
const token = process.env.AGENTFS_TOKEN;
assert.ok(A && token, 'set AGENTFS_A and AGENTFS_TOKEN');
// Each run works in a folder of its own, so the transcript's paths are
// the same from run to run but for this one name.
const dir = process.env.SESSION_DIR || `shop-${Date.now()}`;

const client = new Client({ name: 'agentfs-points-session', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${A}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
}));

// call prints the call and the text answered; fail is whether the tool
// must fail (an error the agent reads and acts on).
async function call(name, args, { fail = false, quiet = false } = {}) {
  const res = await client.callTool({ name, arguments: args });
  const text = res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  if (!quiet) {
    console.log(`> ${name} ${JSON.stringify(args)}`);
    const shown = (res.isError ? '(isError) ' : '') + text.trimEnd();
    console.log(shown.split('\n').map((l) => `< ${l}`.trimEnd()).join('\n'));
    console.log('');
  }
  assert.equal(!!res.isError, fail, `${name}: ${res.isError ? 'failed' : 'succeeded'}: ${text}`);
  return { text, out: res.structuredContent };
}

const files = {
  'cart.py': 'def total(items):\n    return sum(i.price * i.qty for i in items)\n',
  'tax.py': 'RATE = 0.2\n\ndef with_tax(amount):\n    return amount * (1 + RATE)\n',
  'checkout.py': 'from cart import total\nfrom tax import with_tax\n\ndef pay(items):\n    return with_tax(total(items))\n',
};
for (const [name, body] of Object.entries(files)) {
  await call('write_file', { path: `${dir}/${name}`, content: body }, { quiet: true });
}

// 1. A checkpoint before a risky change.
await call('checkpoint', { name: `${dir}-before-rename`, path: dir, note: 'before renaming total' });

// 2. A bad edit across several files: total renamed in two of the three.
await call('edit_file', { path: `${dir}/cart.py`, edits: [{ oldText: 'def total(', newText: 'def subtotal(' }] });
await call('edit_file', { path: `${dir}/checkout.py`, edits: [
  { oldText: 'from cart import total', newText: 'from cart import subtotal' },
  { oldText: 'with_tax(total(items))', newText: 'with_tax(subtotal(items), rounding=True)' },
] });
await call('write_file', { path: `${dir}/rounding.py`, content: 'def round_cents(x):\n    return round(x, 2)\n' });

// 3. What changed since the checkpoint.
const d = await call('diff', { from: `${dir}-before-rename`, path: dir });
assert.equal(d.out.changes.length, 3);
assert.match(d.text, /-def total\(items\):\n\+def subtotal\(items\):/);

// 4. Put it back: the plan first, then the restore.
const plan = await call('restore', { path: dir, to: `${dir}-before-rename`, dry_run: true });
assert.equal(plan.out.plan.length, 3);
const r = await call('restore', { path: dir, to: `${dir}-before-rename` });
assert.equal(r.out.batch.status, 'succeeded');
const after = await call('diff', { from: `${dir}-before-rename`, path: dir });
assert.equal(after.out.changes.length, 0);

// 5. A fork to try an idea apart, changes on both sides.
const f = await call('fork', { source: dir, destination: `${dir}-try` });
const forkID = f.out.id;
await call('edit_file', { path: `${dir}-try/tax.py`, edits: [{ oldText: 'RATE = 0.2', newText: 'RATE = 0.21' }] });
await call('write_file', { path: `${dir}-try/discount.py`, content: 'def discount(amount, pct):\n    return amount * (1 - pct)\n' });
await call('edit_file', { path: `${dir}/tax.py`, edits: [{ oldText: 'RATE = 0.2', newText: 'RATE = 0.19' }] });
await call('edit_file', { path: `${dir}/cart.py`, edits: [{ oldText: 'return sum(', newText: 'return round(sum(' }, { oldText: 'in items)', newText: 'in items), 2)' }] });

// 6. The merge: a conflict on tax.py stops it with nothing applied; the
// agent looks at the plan and lets the fork's side win.
await call('merge', { fork_id: forkID }, { fail: true });
await call('merge', { fork_id: forkID, on_conflict: 'fork', dry_run: true });
const m = await call('merge', { fork_id: forkID, on_conflict: 'fork' });
assert.equal(m.out.applied.length, 2);
assert.equal(m.out.conflicts.length, 1);
const tax = await call('read_text_file', { path: `${dir}/tax.py` });
assert.match(tax.text, /RATE = 0\.21/);
const cart = await call('read_text_file', { path: `${dir}/cart.py` });
assert.match(cart.text, /round\(sum\(/);
await client.close();
