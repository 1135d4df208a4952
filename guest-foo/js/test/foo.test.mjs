// Unit tests of foo.js (the same cases as guest-foo/src/foo/tests.rs). Run: npm test
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { INVALID_SPEC, checkDnsSubdomain, debugStr, sync } from '../src/foo.js';
import { formatFloat, parse, serdeF64, stringify } from '../src/json.js';
import { runFixture } from './fixtures.mjs';

const foo = (deploymentName, replicas) => {
  const spec = {};
  if (deploymentName !== undefined) spec.deploymentName = deploymentName;
  if (replicas !== undefined) spec.replicas = replicas;
  return parse(
    JSON.stringify({
      apiVersion: 'samplecontroller.k8s.io/v1alpha1',
      kind: 'Foo',
      metadata: { name: 'test', namespace: 'default', uid: 'uid-foo' },
      spec,
    }),
  );
};

const deployment = (ownerUid, available, controller = true) => {
  const d = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'test', namespace: 'default' },
    spec: { replicas: 1 },
  };
  if (ownerUid !== undefined) {
    d.metadata.ownerReferences = [
      { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', name: 'test', uid: ownerUid, controller, blockOwnerDeletion: true },
    ];
  }
  if (available !== undefined) d.status = { availableReplicas: available };
  return parse(JSON.stringify(d));
};

const none = () => undefined;

test('creates the Deployment sample-controller would', () => {
  const { ok } = sync(foo('test', 1), none);
  assert.equal(
    stringify(ok.apply[0]),
    stringify({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'test', namespace: 'default' },
      spec: {
        replicas: 1n,
        selector: { matchLabels: { app: 'nginx', controller: 'test' } },
        template: {
          metadata: { labels: { app: 'nginx', controller: 'test' } },
          spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] },
        },
      },
    }),
  );
  assert.equal(stringify(ok.status), '{"availableReplicas":0}');
  assert.deepEqual(ok.events, [{ severity: 'normal', reason: 'Synced', message: 'Foo synced successfully' }]);
});

test('unset replicas stay unset', () => {
  const { ok } = sync(foo('test'), none);
  assert.equal('replicas' in ok.apply[0].spec, false);
});

test('status copies availableReplicas of the owned Deployment', () => {
  const found = (ns, n) => (ns === 'default' && n === 'test' ? deployment('uid-foo', 3) : undefined);
  assert.equal(stringify(sync(foo('test', 3), found).ok.status), '{"availableReplicas":3}');
});

test('an unowned Deployment is left alone and reported', () => {
  const { err } = sync(foo('test', 1), () => deployment());
  assert.equal(err.retry, true);
  assert.equal(err.message, 'Resource "test" already exists and is not managed by Foo');
  assert.equal(err.events[0].reason, 'ErrResourceExists');
  assert.equal(err.events[0].severity, 'warning');
});

test('a Deployment controlled by another Foo is not ours', () => {
  assert.ok(sync(foo('test', 1), () => deployment('uid-other')).err);
});

test('a non-controller owner reference does not count', () => {
  assert.ok(sync(foo('test', 1), () => deployment('uid-foo', undefined, false)).err);
});

test('a missing or empty deploymentName is a Warning without retry', () => {
  for (const f of [foo(undefined, 1), foo('', 1)]) {
    const { err } = sync(f, none);
    assert.equal(err.retry, false);
    assert.equal(err.events[0].reason, INVALID_SPEC);
    assert.equal(err.events[0].severity, 'warning');
  }
});

test('an invalid deploymentName is a Warning without retry', () => {
  for (const bad of ['Has_Upper', '-lead', 'trail-', 'a..b', 'x'.repeat(254)]) {
    const { err } = sync(foo(bad, 1), none);
    assert.equal(err.retry, false, bad);
    assert.match(err.message, /not a valid Deployment name/);
  }
  assert.ok(sync(foo('a.b-c.d9', 1), none).ok);
  assert.equal(checkDnsSubdomain('é'.repeat(127)), 'must be no more than 253 characters');
});

test('a garbage Foo is rejected without retry, in serde words', () => {
  const { err } = sync(parse('{"spec":"nope"}'), none);
  assert.equal(err.retry, false);
  assert.equal(err.message, 'Foo does not parse: invalid type: string "nope", expected struct Spec');
  assert.equal(
    sync(parse('{"spec":{"deploymentName":"x","replicas":2.0}}'), none).err.message,
    'Foo does not parse: invalid type: floating point `2.0`, expected i64',
  );
  assert.equal(
    sync(parse('{"spec":{"deploymentName":"x","replicas":9223372036854775808}}'), none).err.message,
    'Foo does not parse: invalid value: integer `9223372036854775808`, expected i64',
  );
});

test('64-bit replicas stay exact', () => {
  const { ok } = sync(parse('{"metadata":{"namespace":"d"},"spec":{"deploymentName":"x","replicas":9223372036854775807}}'), none);
  assert.match(stringify(ok.apply[0]), /"replicas":9223372036854775807/);
});

test('strings are quoted as Rust Debug quotes them', () => {
  assert.equal(debugStr('a"b\\c\n\t\r\0'), '"a\\"b\\\\c\\n\\t\\r\\0"');
  assert.equal(debugStr('é\u0301\u200b\u00a0😀\u007f'), '"é\\u{301}\\u{200b}\\u{a0}😀\\u{7f}"');
});

test('floats are read and written as serde_json does', () => {
  assert.equal(formatFloat(1e16), '1e+16');
  assert.equal(formatFloat(1e15), '1000000000000000.0');
  assert.equal(formatFloat(1.5e-7), '1.5e-7');
  assert.equal(formatFloat(0.00001), '0.00001');
  assert.equal(formatFloat(-0), '-0.0');
  // Not the nearest f64: u64 significand, then one multiplication by 10^4.
  assert.equal(formatFloat(serdeF64('1.2345678901234567e+20')), '1.2345678901234568e+20');
});

test('the edge fixtures (expected outputs from the Rust guest) pass', () => {
  const root = fileURLToPath(new URL('./edge-fixtures', import.meta.url));
  for (const d of readdirSync(root).sort()) {
    const r = runFixture(join(root, d));
    if (r.skipped) continue;
    assert.equal(r.got, r.expected, d);
  }
});

// Admission: the cases of tests/fixtures/foo-validate (the Rust guest's `admit`).
import { admit } from '../src/foo.js';

const withUid = (f, uid) => {
  f.get('metadata').set('uid', uid);
  return f;
};
const nothing = () => undefined;

test('admit: a valid Foo is allowed without a word', () => {
  assert.deepEqual(admit(foo('web', 1), undefined, nothing), { warnings: [] });
});

test('admit: an invalid, a missing, an empty deploymentName is refused, naming the field', () => {
  assert.deepEqual(admit(foo('Web_App', 1), undefined, nothing), { violations: [{ field: 'spec.deploymentName',
    message: `"Web_App" is not a valid Deployment name: must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character` }] });
  for (const f of [foo(undefined, 1), foo('', 1)]) {
    assert.deepEqual(admit(f, undefined, nothing), { violations: [{ field: 'spec.deploymentName',
      message: 'is required: the name of the Deployment this Foo manages' }] });
  }
});

test("admit: someone else's Deployment is refused, its own is fine", () => {
  const seen = [];
  const lookup = (d) => (ns, name) => (seen.push(`${ns}/${name}`), d);
  assert.deepEqual(admit(foo('test', 1), undefined, lookup(deployment(undefined))), { violations: [{ field: 'spec.deploymentName',
    message: 'Deployment "test" already exists in namespace "default" and is not managed by this Foo; choose another name' }] });
  assert.deepEqual(seen, ['default/test'], "looked up in the Foo's namespace");
  assert.deepEqual(admit(foo('test', 1), foo('test', 2), lookup(deployment('uid-foo'))), { warnings: [] });
  assert.ok(admit(foo('test', 1), undefined, lookup(deployment('uid-foo', undefined, false))).violations, 'not the controller');
  assert.ok(admit(withUid(foo('test', 1), ''), undefined, lookup(deployment(''))).violations, 'an empty uid controls nothing');
});

test('admit: an UPDATE leaving spec alone is warned, not refused; one changing spec is refused', () => {
  const theirs = () => deployment(undefined);
  const msg = 'spec.deploymentName: Deployment "test" already exists in namespace "default" and is not managed by this Foo; choose another name';
  assert.deepEqual(admit(foo('test', 1), foo('test', 1), theirs), { warnings: [msg] });
  assert.ok(admit(foo('test', 2), foo('test', 1), theirs).violations);
  assert.ok(admit(foo('test', 1), undefined, theirs).violations, 'CREATE');
});

test('admit: a Foo that does not parse is refused with the reason', () => {
  const f = parse('{"metadata":{"name":"x","namespace":"default"},"spec":{"deploymentName":5}}');
  assert.deepEqual(admit(f, undefined, nothing), { violations: [{ field: undefined,
    message: 'the object does not parse: invalid type: integer `5`, expected a string' }] });
});
