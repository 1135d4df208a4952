// Runs conformance fixtures (folders with primary.yaml, observed.yaml, expected.json, as
// `kwop plugin test` reads them) against foo.js in Node, without building the component.
// Only JSON-syntax primary/observed files are supported (YAML needs the host).
//
//   node test/fixtures.mjs DIR...     (a fixture folder, or a folder of them)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from '../src/json.js';
import { sync } from '../src/foo.js';

/** What `kwop plugin reconcile` prints for a sync result (without the host's write fence). */
export function render(r) {
  const events = (es) => es.map((e) => ({ type: e.severity === 'normal' ? 'Normal' : 'Warning', reason: e.reason, message: e.message }));
  if (r.err) return { error: { message: r.err.message, retry: r.err.retry, events: events(r.err.events) } };
  return {
    apply: r.ok.apply.map((a) => parse(stringify(a))),
    delete: [],
    status: parse(stringify(r.ok.status)),
    events: events(r.ok.events),
    requeueAfterMs: null,
  };
}

export function runFixture(dir) {
  // The host parses the file and hands the guest its own serialization (serde_json).
  const primary = parse(stringify(parse(readFileSync(join(dir, 'primary.yaml'), 'utf8'))));
  let observed = [];
  if (existsSync(join(dir, 'observed.yaml'))) {
    const o = parse(stringify(parse(readFileSync(join(dir, 'observed.yaml'), 'utf8'))));
    observed = Array.isArray(o) ? o : [o];
  }
  const meta = (o, f) => (o instanceof Map && o.get('metadata') instanceof Map ? o.get('metadata').get(f) : undefined);
  const lookup = (ns, name) =>
    observed.find((o) => o.get('kind') === 'Deployment' && meta(o, 'name') === name && (meta(o, 'namespace') ?? '') === ns);
  const got = stringify(render(sync(primary, lookup)));
  const expected = stringify(parse(readFileSync(join(dir, 'expected.json'), 'utf8')));
  // The host's write fence is not simulated here.
  const skipped = expected.includes('"outcome rejected by the host: ');
  return { got, expected, skipped };
}

function collect(dir, out) {
  if (existsSync(join(dir, 'expected.json'))) return out.push(dir);
  for (const e of readdirSync(dir).sort()) if (statSync(join(dir, e)).isDirectory()) collect(join(dir, e), out);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dirs = [];
  for (const d of process.argv.slice(2)) collect(d, dirs);
  let failed = 0;
  for (const d of dirs) {
    let r;
    try {
      r = runFixture(d);
    } catch (e) {
      r = { got: `exception: ${e.stack}`, expected: '?' };
    }
    if (r.skipped) console.log(`skip ${d} (the host's write fence decides)`);
    else if (r.got === r.expected) console.log(`ok   ${d}`);
    else {
      failed++;
      console.log(`FAIL ${d}\n  expected: ${r.expected}\n  got:      ${r.got}`);
    }
  }
  const skipped = dirs.filter((d) => runFixture(d).skipped).length;
  console.log(`${dirs.length - failed - skipped} passed, ${failed} failed, ${skipped} skipped`);
  process.exit(failed ? 1 : 0);
}
