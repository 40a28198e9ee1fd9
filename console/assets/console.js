// The AgentFS console: one ES module, no build step, no dependency. Every
// call goes to this origin's /v1 API with the pasted token as a Bearer
// header (kept in sessionStorage, never in a URL); every write carries an
// Idempotency-Key; a failed call shows its problem's detail.

const TOKEN = 'agentfs.console.token';
const $ = (sel, root = document) => root.querySelector(sel);

// el builds an element: attrs (on* are listeners), then children (strings
// become text, never HTML).
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== undefined && k !== null && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}

const token = () => sessionStorage.getItem(TOKEN);
const newKey = () => 'console-' + crypto.randomUUID();
const enc = encodeURIComponent;
const when = (t) => (t ? new Date(t).toLocaleString() : '');
const bytes = (n) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

// Problem is a failed call: the API's problem+json, or what went wrong
// reaching it.
class Problem extends Error {
  constructor(p) {
    super(p.detail || p.title || 'request failed');
    this.p = p;
  }
}

async function problemOf(res) {
  let p = { title: `HTTP ${res.status}`, status: res.status };
  try { p = await res.json(); } catch { /* not a problem body */ }
  return new Problem(p);
}

function showProblem(err) {
  const box = $('#problem');
  box.replaceChildren();
  if (!err) return;
  const p = err instanceof Problem ? err.p : { title: 'Error', detail: String(err.message || err) };
  box.append(el('strong', {}, `${p.title || 'Error'}${p.code ? ` (${p.code})` : ''}`), ': ', p.detail || '');
  for (const f of p.errors || []) box.append(el('div', {}, `${f.field}: ${f.message}`));
  if (p.status === 401 && token()) { sessionStorage.removeItem(TOKEN); setTimeout(() => { route(); showProblem(err); }, 0); }
}

const say = (msg) => { $('#status').textContent = msg; };

// api calls the API. A write (any method but GET) is keyed: key, or a
// new one.
async function api(method, path, { json, key, raw, headers = {} } = {}) {
  const h = { Authorization: `Bearer ${token()}`, ...headers };
  let body;
  if (method !== 'GET') h['Idempotency-Key'] = key || newKey();
  if (json !== undefined) { h['Content-Type'] = 'application/json'; body = JSON.stringify(json); }
  let res;
  try {
    res = await fetch(path, { method, headers: h, body, signal: page.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new Problem({ title: 'Network error', detail: `${method} ${path}: ${e.message}` });
  }
  if (!res.ok) throw await problemOf(res);
  if (raw) return res;
  return res.status === 204 ? null : res.json();
}

// act runs a user's action, showing its problem if it fails; then, if it
// worked, after().
async function act(what, fn, after) {
  showProblem(null);
  say(`${what}…`);
  try {
    const out = await fn();
    say(`${what}: done.`);
    if (after) await after(out);
    return out;
  } catch (e) {
    if (e.name === 'AbortError') return undefined;
    say('');
    showProblem(e);
    return undefined;
  }
}

// download fetches a file's bytes with the token and saves them under name.
async function download(path, name) {
  const res = await api('GET', path, { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// follow reads GET /v1/events/stream (fetch with the Authorization header,
// not EventSource, which cannot send one) and calls onEvent for each event,
// reconnecting with Last-Event-ID until the page changes.
async function follow(query, onEvent, signal, onOpen) {
  let last = '';
  while (!signal.aborted) {
    try {
      const h = { Authorization: `Bearer ${token()}` };
      if (last) h['Last-Event-ID'] = last;
      const res = await fetch(`/v1/events/stream?${query}`, { headers: h, signal });
      if (!res.ok) throw await problemOf(res);
      if (onOpen) onOpen();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const msg = { data: '' };
          for (const line of buf.slice(0, i).split('\n')) {
            const c = line.indexOf(':');
            if (c <= 0) continue; // a comment (heartbeat) or nothing
            const name = line.slice(0, c), v = line.slice(c + 1).replace(/^ /, '');
            if (name === 'id') last = v;
            if (name === 'data') msg.data += v;
          }
          buf = buf.slice(i + 2);
          if (msg.data) onEvent(JSON.parse(msg.data));
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof Problem && e.p.status < 500 && e.p.status !== 429) { showProblem(e); return; }
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function eventLine(e) {
  const moved = e.previous_path ? ` (from ${e.previous_path})` : '';
  return el('li', { 'data-event': e.id },
    el('span', { class: 'badge' }, e.type), ' ',
    el('a', { href: `#/file/${e.file_id}` }, e.path), moved,
    e.version ? ` v${e.version}` : '',
    el('span', { class: 'muted' }, ` · ${when(e.at)}${e.run_id ? ` · run ${e.run_id}` : ''}${e.agent_id ? ` · agent ${e.agent_id}` : ''}`));
}

function table(head, rows) {
  return el('div', { class: 'table' }, el('table', {},
    el('thead', {}, el('tr', {}, head.map((h) => el('th', { scope: 'col', class: /^(Size|Version|Live|Created|Replaced|Deleted|Moved|Reverted)/.test(h) ? 'num' : undefined }, h)))),
    el('tbody', {}, rows)));
}

// ---- Runs -------------------------------------------------------------

async function runsPage(root) {
  root.append(el('h1', {}, 'Runs'));
  const body = el('tbody');
  const more = el('button', { type: 'button', class: 'secondary', hidden: true }, 'More runs');
  root.append(el('div', { class: 'table' }, el('table', {},
    el('thead', {}, el('tr', {}, ['Run', 'Last activity', 'Agents', 'Created', 'Replaced', 'Deleted', 'Moved', 'Reverted', 'Live files']
      .map((h) => el('th', { scope: 'col' }, h)))), body)), more);
  let cursor = '';
  const load = async () => {
    const page = await api('GET', `/v1/runs?limit=50${cursor ? `&cursor=${enc(cursor)}` : ''}`);
    for (const r of page.data) {
      const c = r.counts;
      body.append(el('tr', {},
        el('td', {}, el('a', { href: `#/run/${enc(r.run_id)}` }, r.run_id)),
        el('td', {}, when(r.last_at)), el('td', {}, r.agent_ids.join(', ')),
        [c.created, c.replaced, c.deleted, c.moved, c.reverted, r.live_files].map((n) => el('td', { class: 'num' }, n))));
    }
    if (!page.data.length && !cursor) root.append(el('p', {}, 'No runs yet: requests that send X-Run-ID make one.'));
    cursor = page.next_cursor || '';
    more.hidden = !page.has_more;
  };
  more.addEventListener('click', () => act('Loading runs', load));
  await load();
}

async function runPage(root, id) {
  const run = await api('GET', `/v1/runs/${enc(id)}`);
  const c = run.counts;
  root.append(el('h1', {}, `Run ${id}`),
    el('dl', { class: 'meta' },
      el('dt', {}, 'Active'), el('dd', {}, `${when(run.first_at)} – ${when(run.last_at)}`),
      el('dt', {}, 'Agents'), el('dd', {}, run.agent_ids.join(', ') || '—'),
      el('dt', {}, 'Effects'), el('dd', {}, `${c.created} created, ${c.replaced} replaced, ${c.deleted} deleted, ${c.restored} restored, ${c.moved} moved, ${c.reverted} reverted`),
      el('dt', {}, 'Written'), el('dd', {}, `${bytes(run.bytes_written)}; ${run.live_files} live files`)));
  const plan = el('div', { id: 'revert-plan' });
  root.append(el('div', { class: 'actions' },
    el('button', { type: 'button', onclick: () => act('Downloading the archive', () => download(`/v1/runs/${enc(id)}/archive?format=zip`, `run-${id}.zip`)) }, 'Download archive (zip)'),
    el('button', { type: 'button', class: 'secondary', onclick: () => planRevert(plan, id) }, 'Revert run…')), plan);

  root.append(el('h2', {}, 'Files it last wrote'));
  const files = await api('GET', `/v1/files?last_run_id=${enc(id)}&limit=1000`);
  root.append(files.data.length
    ? table(['Path', 'Version', 'Size'], files.data.map((f) => el('tr', {},
      el('td', {}, el('a', { href: `#/file/${f.id}` }, f.path)), el('td', { class: 'num' }, f.version), el('td', { class: 'num' }, bytes(f.size_bytes)))))
    : el('p', { class: 'muted' }, 'None live.'));

  root.append(el('h2', {}, 'Timeline'), el('p', { class: 'muted', id: 'live' }, 'Live: new events of this run appear here as they commit.'));
  const list = el('ol', { class: 'timeline', id: 'timeline', 'aria-live': 'polite' });
  root.append(list);
  let after = '';
  for (let i = 0; i < 20; i++) { // the run's past, up to 20,000 events
    const p = await api('GET', `/v1/events?run_id=${enc(id)}&limit=1000${after ? `&after=${enc(after)}` : ''}`);
    for (const e of p.data) list.append(eventLine(e));
    after = p.next_cursor;
    if (!p.has_more) break;
  }
  follow(`run_id=${enc(id)}&after=${enc(after)}`, (e) => list.append(eventLine(e)), page.signal,
    () => root.setAttribute('data-live', 'true'));
}

// planRevert shows what reverting the run would do (dry_run) and only then
// offers to do it.
async function planRevert(box, id) {
  const key = newKey(); // one revert, however often its button is pressed
  await act('Planning the revert', () => api('POST', `/v1/runs/${enc(id)}/revert`, { json: { dry_run: true } }), (p) => {
    box.replaceChildren(el('div', { class: 'plan' },
      el('h2', {}, 'Planned revert'),
      p.items.length ? el('ul', { id: 'plan-items' }, p.items.map((it) => el('li', {},
        it.action === 'delete' ? `delete ${it.path}` : `put back ${it.path}${it.version ? ` (content of version ${it.version})` : ''}`)))
        : el('p', {}, 'Nothing to undo.'),
      el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'danger', onclick: () => act('Reverting the run',
          () => api('POST', `/v1/runs/${enc(id)}/revert`, { json: { force: false }, key }),
          (b) => watchBatch(box, b.id)) }, 'Revert now'),
        el('button', { type: 'button', class: 'secondary', onclick: () => box.replaceChildren() }, 'Cancel'))));
    $('#plan-items, .plan button', box)?.focus?.();
  });
}

// watchBatch shows a batch until it ends.
async function watchBatch(box, id) {
  const out = el('div', { id: 'batch-result' });
  box.replaceChildren(out);
  for (let i = 0; i < 120 && !page.signal.aborted; i++) {
    const b = await api('GET', `/v1/batch/${id}`);
    out.replaceChildren(el('p', {}, `Batch `, el('code', {}, b.id), `: ${b.status}`));
    if (b.items) {
      out.append(el('ul', {}, b.items.map((it) => el('li', {}, `${it.path || it.file_id || ''}: ${it.status}`,
        it.error ? ` — ${it.error.code}: ${it.error.detail}` : ''))));
    }
    if (!['queued', 'running'].includes(b.status)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

// ---- Files ------------------------------------------------------------

async function filesPage(root, params) {
  const prefix = params.get('prefix') || '';
  const deleted = params.get('deleted') === '1';
  root.append(el('h1', {}, `Files${prefix ? ` in ${prefix}` : ''}`));
  const crumbs = el('nav', { 'aria-label': 'Folder' }, el('a', { href: '#/files' }, 'All files'));
  let acc = '';
  for (const part of prefix.split('/').filter(Boolean)) {
    acc += `${part}/`;
    crumbs.append(' / ', el('a', { href: `#/files?prefix=${enc(acc)}` }, part));
  }
  root.append(crumbs, el('p', {}, el('a', { href: `#/files?prefix=${enc(prefix)}${deleted ? '' : '&deleted=1'}` },
    deleted ? 'Hide deleted files' : 'Show deleted files too')));
  // Live files: one folder by delimiter (its files and the folders below,
  // never the subtree). Deleted ones too: the subtree's first 1000, split here.
  const page = deleted
    ? await api('GET', `/v1/files?limit=1000&include_deleted=true${prefix ? `&prefix=${enc(prefix)}` : ''}`)
    : await api('GET', `/v1/files?delimiter=/&limit=1000${prefix ? `&prefix=${enc(prefix)}` : ''}`);
  const folders = new Set((page.prefixes || []).map((p) => p.slice(prefix.length)));
  const here = [];
  for (const f of page.data) {
    const rest = f.path.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash >= 0) folders.add(rest.slice(0, slash + 1));
    else here.push(f);
  }
  if (folders.size) {
    root.append(el('h2', {}, 'Folders'), el('ul', { class: 'folders' },
      [...folders].sort().map((d) => el('li', {}, el('a', { href: `#/files?prefix=${enc(prefix + d)}` }, d)))));
  }
  root.append(el('h2', {}, 'Files'));
  root.append(here.length ? table(['Path', 'Version', 'Size', 'Updated', 'State'], here.map((f) => el('tr', {},
    el('td', {}, el('a', { href: `#/file/${f.id}` }, f.path)), el('td', { class: 'num' }, f.version),
    el('td', { class: 'num' }, bytes(f.size_bytes)), el('td', {}, when(f.updated_at)), el('td', {}, f.deleted_at ? 'deleted' : 'live'))))
    : el('p', { class: 'muted' }, 'No files directly here.'));
  if (page.has_more) root.append(el('p', { class: 'muted' }, deleted ? 'Showing the first 1000 files under this prefix: open a folder to see the rest.' : 'Showing the first 1000 entries of this folder.'));
}

async function filePage(root, id) {
  const f = await api('GET', `/v1/files/${id}`);
  const versions = (await api('GET', `/v1/files/${id}/versions?limit=1000`)).data;
  const render = () => { root.replaceChildren(); filePage(root, id).catch(showProblem); };
  const name = f.path.split('/').pop();
  root.append(el('h1', {}, f.path),
    el('p', {}, el('a', { href: `#/files?prefix=${enc(f.path.slice(0, f.path.lastIndexOf('/') + 1))}` }, 'Back to its folder')),
    el('dl', { class: 'meta' },
      el('dt', {}, 'Id'), el('dd', { class: 'mono' }, f.id),
      el('dt', {}, 'State'), el('dd', { id: 'file-state' }, f.deleted_at ? `deleted ${when(f.deleted_at)}` : 'live'),
      el('dt', {}, 'Version'), el('dd', {}, f.version),
      el('dt', {}, 'Size'), el('dd', {}, bytes(f.size_bytes)),
      el('dt', {}, 'Type'), el('dd', {}, f.content_type),
      el('dt', {}, 'SHA-256'), el('dd', { class: 'mono' }, f.sha256),
      el('dt', {}, 'Written by'), el('dd', {}, [f.last_run_id && `run ${f.last_run_id}`, f.last_agent_id && `agent ${f.last_agent_id}`].filter(Boolean).join(', ') || '—'),
      el('dt', {}, 'Updated'), el('dd', {}, when(f.updated_at))));
  const share = el('div', { id: 'share' });
  const moveTo = el('input', { id: 'move-to', value: f.path });
  const actions = el('div', { class: 'actions' });
  if (!f.deleted_at) {
    actions.append(
      el('button', { type: 'button', onclick: () => act('Downloading', () => download(`/v1/files/${id}/content`, name)) }, 'Download'),
      el('button', { type: 'button', class: 'secondary', onclick: () => act('Making a share link',
        () => api('POST', `/v1/files/${id}/links`, { json: { expires_in: 3600 } }),
        (l) => share.replaceChildren(el('p', {}, 'Link (valid 1 hour): ', el('a', { href: l.url, rel: 'noreferrer' }, l.url)))) }, 'Share link'),
      el('button', { type: 'button', class: 'danger', onclick: () => act('Deleting', () => api('DELETE', `/v1/files/${id}`), render) }, 'Delete'));
  } else {
    actions.append(el('button', { type: 'button', onclick: () => act('Restoring', () => api('POST', `/v1/files/${id}/restore`), render) }, 'Restore'));
  }
  root.append(actions, share);
  if (!f.deleted_at) {
    root.append(el('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); act('Moving', () => api('POST', `/v1/files/${id}/move`, { json: { path: moveTo.value } }), render); } },
      el('div', {}, el('label', { for: 'move-to' }, 'Move to path'), moveTo), el('button', { type: 'submit' }, 'Move')));
  }

  root.append(el('h2', {}, 'Versions'));
  root.append(table(['Version', 'Size', 'Written', 'By', ''], versions.map((v) => el('tr', {},
    el('td', { class: 'num' }, v.version), el('td', { class: 'num' }, bytes(v.size_bytes)), el('td', {}, when(v.created_at)),
    el('td', {}, [v.run_id && `run ${v.run_id}`, v.agent_id && `agent ${v.agent_id}`].filter(Boolean).join(', ')),
    el('td', {}, v.version === f.version || f.deleted_at ? '' : el('button', { type: 'button', class: 'secondary',
      onclick: () => act(`Reverting to version ${v.version}`, () => api('POST', `/v1/files/${id}/revert`, { json: { version: v.version } }), render) },
      `Revert to version ${v.version}`))))));

  if (versions.length > 1) {
    const pick = (idn, sel) => el('select', { id: idn }, versions.map((v) => el('option', { value: v.version, selected: v.version === sel }, `version ${v.version}`)));
    const from = pick('diff-from', versions[1].version), to = pick('diff-to', versions[0].version);
    const out = el('div', { id: 'diff' });
    root.append(el('h2', {}, 'Compare versions'),
      el('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); act('Comparing', () => showDiff(out, id, from.value, to.value)); } },
        el('div', {}, el('label', { for: 'diff-from' }, 'From'), from), el('div', {}, el('label', { for: 'diff-to' }, 'To'), to),
        el('button', { type: 'submit' }, 'Show diff')), out);
  }
}

async function versionText(id, n) {
  const res = await api('GET', `/v1/files/${id}/versions/${n}/content`, { raw: true });
  const buf = new Uint8Array(await res.arrayBuffer());
  if (buf.length > 1 << 20) throw new Problem({ title: 'Too large to compare', detail: `version ${n} is over 1 MiB` });
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    throw new Problem({ title: 'Not text', detail: `version ${n} is not UTF-8 text: download it instead` });
  }
}

// lineDiff is the shortest edit script between two lists of lines (an LCS
// table: fine for the 1 MiB the console compares).
function lineDiff(a, b) {
  const n = a.length, m = b.length;
  if (n * m > 25e6) throw new Problem({ title: 'Too large to compare', detail: 'these versions have too many lines to compare here' });
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { out.push([' ', a[i]]); i++; j++; }
    else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) { out.push(['-', a[i]]); i++; }
    else { out.push(['+', b[j]]); j++; }
  }
  return out;
}

async function showDiff(out, id, from, to) {
  const [a, b] = await Promise.all([versionText(id, from), versionText(id, to)]);
  const split = (t) => (t.endsWith('\n') ? t.slice(0, -1) : t).split('\n');
  const lines = lineDiff(split(a), split(b));
  const changed = lines.filter(([op]) => op !== ' ').length;
  out.replaceChildren(el('p', {}, `Version ${from} → ${to}: ${changed} changed line${changed === 1 ? '' : 's'}.`),
    el('pre', { class: 'diff', 'aria-label': `Diff from version ${from} to ${to}` },
      lines.map(([op, text]) => el('span', { class: op === '+' ? 'add' : op === '-' ? 'del' : undefined }, `${op} ${text}`))));
}

// ---- Events -----------------------------------------------------------

function eventsPage(root, params) {
  root.append(el('h1', {}, 'Events'), el('p', { class: 'muted' }, 'The live feed: events appear as they commit, from when this page opened.'));
  const field = (name, label) => el('div', {}, el('label', { for: `f-${name}` }, label),
    el('input', { id: `f-${name}`, name, value: params.get(name) || '' }));
  const types = ['', 'file.created', 'file.replaced', 'file.deleted', 'file.restored', 'file.moved', 'file.reverted', 'file.expired', 'file.purged'];
  const form = el('form', { class: 'inline', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams([...new FormData(form)].filter(([, v]) => v));
    location.hash = `#/events?${q}`;
  } }, field('prefix', 'Path prefix'), field('run_id', 'Run id'), field('agent_id', 'Agent id'),
  el('div', {}, el('label', { for: 'f-type' }, 'Type'), el('select', { id: 'f-type', name: 'type' },
    types.map((t) => el('option', { value: t, selected: (params.get('type') || '') === t }, t || 'any')))),
  el('button', { type: 'submit' }, 'Apply filters'));
  const list = el('ol', { class: 'timeline', id: 'events', 'aria-live': 'polite' });
  root.append(form, el('h2', {}, 'Feed'), list);
  const q = new URLSearchParams([...params].filter(([k, v]) => v && ['prefix', 'run_id', 'agent_id', 'type'].includes(k)));
  q.set('after', 'now');
  follow(q.toString(), (e) => list.prepend(eventLine(e)), page.signal, () => root.setAttribute('data-live', 'true'));
}

// ---- Checkpoints --------------------------------------------------------

async function checkpointsPage(root) {
  root.append(el('h1', {}, 'Checkpoints'));
  const list = (await api('GET', '/v1/checkpoints?limit=100')).data;
  if (!list.length) { root.append(el('p', {}, 'No checkpoints yet (agentfs checkpoint NAME makes one).')); return; }
  const out = el('div', { id: 'checkpoint-detail' });
  root.append(table(['Name', 'Prefix', 'Created', ''], list.map((c) => el('tr', {},
    el('td', {}, c.name || el('span', { class: 'mono' }, c.id)), el('td', {}, c.prefix || '(all)'), el('td', {}, when(c.created_at)),
    el('td', {}, el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'secondary', onclick: () => act('Comparing with now', () => checkpointDiff(out, c)) }, 'Diff against now'),
      el('button', { type: 'button', class: 'secondary', onclick: () => act('Planning the restore', () => restorePreview(out, c)) }, 'Restore…')))))), out);
}

const changeLine = (ch) => el('li', {}, el('span', { class: 'badge' }, ch.change), ' ', ch.previous_path ? `${ch.previous_path} → ` : '', ch.path);

async function checkpointDiff(out, c) {
  const d = await api('GET', `/v1/diff?from=${enc(c.id)}&to=now&limit=1000${c.prefix ? `&prefix=${enc(c.prefix)}` : ''}`);
  out.replaceChildren(el('h2', {}, `Since ${c.name || c.id}`), d.data.length ? el('ul', {}, d.data.map(changeLine)) : el('p', {}, 'Nothing changed.'));
}

async function restorePreview(out, c) {
  const key = newKey();
  const body = { to: c.id, prefix: c.prefix || '' };
  const plan = await api('POST', '/v1/restore', { json: { ...body, dry_run: true } });
  out.replaceChildren(el('div', { class: 'plan' }, el('h2', {}, `Restore to ${c.name || c.id}`),
    plan.items.length ? el('ul', {}, plan.items.map(changeLine)) : el('p', {}, 'Nothing to restore.'),
    el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'danger', onclick: () => act('Restoring', () => api('POST', '/v1/restore', { json: body, key }), (b) => watchBatch(out, b.id)) }, 'Restore now'),
      el('button', { type: 'button', class: 'secondary', onclick: () => out.replaceChildren() }, 'Cancel'))));
}

// ---- Batches and uploads in flight ---------------------------------------

async function activityPage(root) {
  root.append(el('h1', {}, 'Batches and uploads in flight'));
  const batches = [];
  for (const s of ['running', 'queued']) batches.push(...(await api('GET', `/v1/batch?status=${s}&limit=100`)).data);
  root.append(el('h2', {}, 'Batches'), batches.length
    ? table(['Batch', 'Status', 'Created'], batches.map((b) => el('tr', {}, el('td', { class: 'mono' }, b.id), el('td', {}, b.status), el('td', {}, when(b.created_at)))))
    : el('p', { class: 'muted' }, 'No batch is queued or running.'));
  const ups = (await api('GET', '/v1/uploads?status=pending&limit=100')).data;
  root.append(el('h2', {}, 'Uploads'), ups.length
    ? table(['Path', 'Size', 'Expires'], ups.map((u) => el('tr', {}, el('td', {}, u.path), el('td', { class: 'num' }, bytes(u.size_bytes)), el('td', {}, when(u.expires_at)))))
    : el('p', { class: 'muted' }, 'No upload is in progress.'));
}

// ---- Routing -----------------------------------------------------------

// page is the current page's lifetime: changing page aborts its calls and
// its live streams.
let page = new AbortController();

async function route() {
  page.abort();
  page = new AbortController();
  showProblem(null);
  say('');
  const signedIn = Boolean(token());
  $('#signin').hidden = signedIn;
  $('#nav').hidden = !signedIn;
  $('#signout').hidden = !signedIn;
  const root = $('#page');
  root.replaceChildren();
  root.removeAttribute('data-live');
  root.removeAttribute('data-ready');
  root.dataset.route = location.hash;
  if (!signedIn) { $('#token').focus(); return; }
  const [path, query] = (location.hash.slice(1) || '/runs').split('?');
  const params = new URLSearchParams(query || '');
  const [, name, ...rest] = path.split('/');
  const arg = decodeURIComponent(rest.join('/'));
  for (const a of document.querySelectorAll('#nav a')) {
    const here = a.getAttribute('href').slice(2) === (name === 'run' ? 'runs' : name === 'file' ? 'files' : name);
    if (here) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const pages = { runs: runsPage, run: (r) => runPage(r, arg), files: (r) => filesPage(r, params), file: (r) => filePage(r, arg),
    events: (r) => eventsPage(r, params), checkpoints: checkpointsPage, activity: activityPage };
  const show = pages[name] || runsPage;
  try {
    await show(root);
    root.setAttribute('data-ready', 'true');
  } catch (e) {
    if (e.name !== 'AbortError') showProblem(e);
  }
}

$('#signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const t = $('#token').value.trim();
  sessionStorage.setItem(TOKEN, t);
  $('#token').value = '';
  try {
    await api('GET', '/v1/files?limit=1');
    if (!location.hash) location.hash = '#/runs';
    route();
    $('#main').focus();
  } catch (e) {
    sessionStorage.removeItem(TOKEN);
    route();
    showProblem(e);
  }
});
$('#signout').addEventListener('click', () => { sessionStorage.removeItem(TOKEN); location.hash = ''; route(); });
window.addEventListener('hashchange', route);
route();
