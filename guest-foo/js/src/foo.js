// The Foo → Deployment logic, a port of guest-foo/src/foo.rs (itself a port of
// sample-controller's syncHandler). Plain JavaScript over parsed JSON (see json.js), no WIT:
// unit-tested in Node (test/), wrapped for the component by component.js.
//
// The Rust guest is the reference, down to its error messages: a Foo that does not parse is
// reported with serde's wording ("invalid type: string \"x\", expected a string"), and names
// are quoted as Rust's `{:?}` quotes them. Both are reproduced here.

import { I64_MAX, JNum, formatFloat } from './json.js';
import { ESCAPED_RUNS } from './unicode.js';

/** Event reason when a Foo is synced (sample-controller's `SuccessSynced`). */
export const SUCCESS_SYNCED = 'Synced';
/** Message of the `Synced` event (sample-controller's `MessageResourceSynced`). */
export const MESSAGE_RESOURCE_SYNCED = 'Foo synced successfully';
/** Event reason when the Deployment exists but is not ours (sample-controller's `ErrResourceExists`). */
export const ERR_RESOURCE_EXISTS = 'ErrResourceExists';
/** Event reason for a Foo whose spec cannot be acted on. */
export const INVALID_SPEC = 'InvalidSpec';

const event = (severity, reason, message) => ({ severity, reason, message });

/**
 * One sync of a Foo, as sample-controller's `syncHandler` does it.
 *
 * `foo` is the parsed Foo (json.js `parse`); `deployment(namespace, name)` returns the parsed
 * Deployment from the cache, or undefined.
 *
 * Returns `{ ok: { apply, status, events } }` or `{ err: { message, events, retry } }`; events are
 * `{ severity: 'normal' | 'warning', reason, message }`, apply/status are JSON-ready values.
 */
export function sync(foo, deployment) {
  let parsed;
  try {
    parsed = FOO(foo);
  } catch (e) {
    if (!(e instanceof DeError)) throw e;
    return invalid(`Foo does not parse: ${e.message}`);
  }
  const { metadata, spec } = parsed;

  const name = spec.deploymentName;
  if (name === null || name === '') {
    // sample-controller logs "Deployment name missing from object reference" and drops the item
    // (no retry): the user has to fix the Foo, which triggers a new sync.
    return invalid('spec.deploymentName is missing or empty: no Deployment to manage');
  }
  const why = checkDnsSubdomain(name);
  if (why !== null) {
    return invalid(`spec.deploymentName ${debugStr(name)} is not a valid Deployment name: ${why}`);
  }

  const observed = deployment(metadata.namespace, name);
  if (observed !== undefined && !isControlledBy(observed, metadata.uid)) {
    const msg = `Resource ${debugStr(name)} already exists and is not managed by Foo`;
    return { err: { message: msg, events: [event('warning', ERR_RESOURCE_EXISTS, msg)], retry: true } };
  }

  let available = 0n;
  if (observed !== undefined) {
    const a = field(field(observed, 'status'), 'availableReplicas');
    if (a instanceof JNum && a.kind === 'int' && a.int <= I64_MAX) available = a.int;
  }

  return {
    ok: {
      apply: [newDeployment(metadata, spec, name)],
      status: { availableReplicas: available },
      events: [event('normal', SUCCESS_SYNCED, MESSAGE_RESOURCE_SYNCED)],
    },
  };
}

/**
 * Admission, as guest-foo's `admit` (guest-foo/src/foo.rs): what the API server should refuse to
 * store, so `kubectl apply` says it at once instead of an `InvalidSpec` or `ErrResourceExists`
 * event after the fact. A missing or invalid `deploymentName`, or one naming an existing
 * Deployment this Foo does not control, is refused on CREATE and whenever an UPDATE changes
 * `spec`; an UPDATE leaving `spec` as it was is only warned about, so a Foo that went wrong can
 * still be labelled, fixed or deleted.
 *
 * `foo`, `old` are parsed Foos (json.js `parse`; `old` undefined on CREATE), `deployment(ns, name)`
 * as for `sync`. Returns `{ warnings }` or `{ violations: [{ field, message }] }`; a Foo that does
 * not parse is refused with serde's reason.
 */
export function admit(foo, old, deployment) {
  let object;
  let stored;
  try {
    object = FOO(foo);
    stored = old === undefined ? undefined : FOO(old);
  } catch (e) {
    if (!(e instanceof DeError)) throw e;
    return { violations: [{ field: undefined, message: `the object does not parse: ${e.message}` }] };
  }
  const field = 'spec.deploymentName';
  const n = object.spec.deploymentName;
  let problem = null;
  if (n === null || n === '') {
    problem = 'is required: the name of the Deployment this Foo manages';
  } else {
    const why = checkDnsSubdomain(n);
    if (why !== null) {
      problem = `${debugStr(n)} is not a valid Deployment name: ${why}`;
    } else {
      const namespace = object.metadata.namespace;
      const d = deployment(namespace, n);
      if (d !== undefined && !isControlledBy(d, object.metadata.uid)) {
        problem = `Deployment ${debugStr(n)} already exists in namespace ${debugStr(namespace)} and is not managed by this Foo; choose another name`;
      }
    }
  }
  if (problem === null) return { warnings: [] };
  const sameSpec = stored !== undefined && stored.spec.deploymentName === object.spec.deploymentName &&
    stored.spec.replicas === object.spec.replicas;
  return sameSpec ? { warnings: [`${field}: ${problem}`] } : { violations: [{ field, message: problem }] };
}

function invalid(message) {
  return { err: { message, events: [event('warning', INVALID_SPEC, message)], retry: false } };
}

/** sample-controller's `newDeployment`, as a server-side apply intent (no owner reference: the
 * host sets the controller reference itself). */
function newDeployment(metadata, spec, name) {
  const labels = () => ({ app: 'nginx', controller: metadata.name });
  const dspec = {
    selector: { matchLabels: labels() },
    template: {
      metadata: { labels: labels() },
      spec: { containers: [{ name: 'nginx', image: 'nginx:latest' }] },
    },
  };
  // Unset replicas stay unset (the API server defaults them to 1), as in sample-controller.
  if (spec.replicas !== null) dspec.replicas = spec.replicas;
  const meta = { name };
  if (metadata.namespace !== '') meta.namespace = metadata.namespace;
  return { apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta, spec: dspec };
}

/** A member of a JSON object; undefined for anything else (serde_json's `pointer`). */
function field(v, key) {
  return v instanceof Map ? v.get(key) : undefined;
}

/** `metav1.IsControlledBy`: the object's controller owner reference has the Foo's UID. */
function isControlledBy(obj, uid) {
  const refs = field(field(obj, 'metadata'), 'ownerReferences');
  if (!Array.isArray(refs)) return false;
  return refs.some((r) => field(r, 'controller') === true && uid !== '' && field(r, 'uid') === uid);
}

const DNS_MESSAGE =
  "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/** RFC 1123 subdomain, as the API server checks a Deployment name. Null when valid. */
export function checkDnsSubdomain(s) {
  if (utf8Length(s) > 253) return 'must be no more than 253 characters';
  const okLabel = (l) => /^[a-z0-9-]+$/.test(l) && !l.startsWith('-') && !l.endsWith('-');
  return s.split('.').every(okLabel) ? null : DNS_MESSAGE;
}

function utf8Length(s) {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Rust's `{:?}` for a string.

// Start of each run in ESCAPED_RUNS; odd indices start escaped runs.
const RUN_STARTS = (() => {
  const starts = [];
  let at = 0;
  for (const r of ESCAPED_RUNS.split(',')) {
    starts.push(at);
    at += parseInt(r, 36);
  }
  return starts;
})();

function escapedAsUnicode(c) {
  let lo = 0;
  let hi = RUN_STARTS.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (RUN_STARTS[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  return (lo & 1) === 1;
}

/** `format!("{s:?}")`: double quotes; `\0 \t \r \n \\ \"`; `\u{..}` for Grapheme_Extend and
 * unprintable chars; everything else as is. */
export function debugStr(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c === 0) out += '\\0';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '"') out += '\\"';
    else if (escapedAsUnicode(c)) out += `\\u{${c.toString(16)}}`;
    else out += ch;
  }
  return `${out}"`;
}

// ---------------------------------------------------------------------------------------------
// The Foo as serde reads it into the Rust guest's structs:
//   struct Foo  { #[serde(default)] metadata: Meta, #[serde(default)] spec: Spec }
//   struct Meta { #[serde(default)] name: String, namespace: String, uid: String }
//   struct Spec { #[serde(default)] deployment_name: Option<String>, replicas: Option<i64> }
// Unknown fields are ignored, missing ones default, a wrong type is an error with serde's wording.
// A struct also reads from an array (fields in declaration order), as serde allows.

class DeError extends Error {}

/** serde_json's description of an unexpected value. */
function unexpected(v) {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  if (typeof v === 'string') return `string ${debugStr(v)}`;
  if (v instanceof JNum) {
    return v.kind === 'int' ? `integer \`${v.int}\`` : `floating point \`${formatFloat(v.float)}\``;
  }
  if (Array.isArray(v)) return 'sequence';
  return 'map';
}

const invalidType = (v, expected) => new DeError(`invalid type: ${unexpected(v)}, expected ${expected}`);

function string(v) {
  if (typeof v === 'string') return v;
  throw invalidType(v, 'a string');
}

function optionString(v) {
  return v === null ? null : string(v);
}

function optionI64(v) {
  if (v === null) return null;
  if (!(v instanceof JNum) || v.kind !== 'int') throw invalidType(v, 'i64');
  if (v.int > I64_MAX) throw new DeError(`invalid value: integer \`${v.int}\`, expected i64`);
  return v.int;
}

/** A struct reader: `fields` is [jsonKey, jsName, read, default] in declaration order. */
function struct(name, fields) {
  return (v) => {
    const out = {};
    for (const [, js, , dflt] of fields) out[js] = dflt;
    if (v instanceof Map) {
      // serde_json's map is a BTreeMap: fields are read in key order.
      const present = fields.filter(([key]) => v.has(key)).sort(([a], [b]) => (a < b ? -1 : 1));
      for (const [key, js, read] of present) out[js] = read(v.get(key));
    } else if (Array.isArray(v)) {
      fields.forEach(([, js, read], k) => {
        if (k < v.length) out[js] = read(v[k]);
      });
      if (v.length > fields.length) {
        throw new DeError(`invalid length ${v.length}, expected fewer elements in array`);
      }
    } else {
      throw invalidType(v, `struct ${name}`);
    }
    return out;
  };
}

const META = struct('Meta', [
  ['name', 'name', string, ''],
  ['namespace', 'namespace', string, ''],
  ['uid', 'uid', string, ''],
]);
const SPEC = struct('Spec', [
  ['deploymentName', 'deploymentName', optionString, null],
  ['replicas', 'replicas', optionI64, null],
]);
const FOO = struct('Foo', [
  ['metadata', 'metadata', (v) => META(v), { name: '', namespace: '', uid: '' }],
  ['spec', 'spec', (v) => SPEC(v), { deploymentName: null, replicas: null }],
]);
