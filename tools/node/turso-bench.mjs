// The Turso peer of `make bench` (bench/turso.go): Turso's agentfs-sdk on
// a local SQLite file, measured as the bench measures AgentFS beside it.
//
//   node tools/node/turso-bench.mjs DIR WRITES READS LIST ROUNDS
//
// In DIR it opens a new database and, in each of ROUNDS rounds, writes
// WRITES files of 4 KiB one at a time, reads READS of them one at a time
// and READS again 16 at once; then it writes LIST files of 4 KiB into one
// folder and lists it with every entry's stats (readdirPlus) 2 × ROUNDS
// times. It prints one JSON object: each round's rates (per second) and
// each listing's time in milliseconds, and the Node version.

import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { AgentFS } from 'agentfs-sdk';

const [dir, writesArg, readsArg, listArg, roundsArg] = process.argv.slice(2);
const [writes, reads, list, rounds] = [writesArg, readsArg, listArg, roundsArg].map(Number);
if (!dir || ![writes, reads, list, rounds].every((n) => Number.isInteger(n) && n > 0)) {
  console.error('usage: node turso-bench.mjs DIR WRITES READS LIST ROUNDS');
  process.exit(2);
}

const size = 4096;
const data = Buffer.alloc(size);
for (let i = 0; i < size; i++) data[i] = (i * 7919) % 251;

const work = mkdtempSync(join(dir, 'turso-'));
const agent = await AgentFS.open({ path: join(work, 'agentfs-sdk.db') });
const fs = agent.fs;
const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;
const out = { node: process.version, writes: [], reads1: [], reads16: [], list_ms: [] };

async function readOne(path) {
  const b = await fs.readFile(path);
  if (b.length !== size) throw new Error(`${path}: read ${b.length} bytes, want ${size}`);
}

try {
  for (let r = 0; r < rounds; r++) {
    const paths = Array.from({ length: writes }, (_, i) => `/w${r}/f${i}.bin`);
    let t0 = process.hrtime.bigint();
    for (const p of paths) await fs.writeFile(p, data);
    out.writes.push(writes / seconds(t0));

    t0 = process.hrtime.bigint();
    for (let i = 0; i < reads; i++) await readOne(paths[(i * 7) % writes]);
    out.reads1.push(reads / seconds(t0));

    let next = 0;
    t0 = process.hrtime.bigint();
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let i = next++; i < reads; i = next++) await readOne(paths[(i * 7) % writes]);
    }));
    out.reads16.push(reads / seconds(t0));
  }

  for (let i = 0; i < list; i++) await fs.writeFile(`/list/f${String(i).padStart(5, '0')}.bin`, data);
  for (let k = 0; k < 2 * rounds; k++) {
    const t0 = process.hrtime.bigint();
    const entries = await fs.readdirPlus('/list');
    const ms = seconds(t0) * 1000;
    if (entries.length !== list || entries.some((e) => e.stats.size !== size)) {
      throw new Error(`readdirPlus listed ${entries.length} entries, want ${list} of ${size} bytes`);
    }
    out.list_ms.push(ms);
  }
} finally {
  await agent.close();
  rmSync(work, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
