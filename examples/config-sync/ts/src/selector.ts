// spec.namespaceSelector (a metav1.LabelSelector) as the host's label-selector string, with the
// API server's validation of keys, values and operators (a port of ../src/selector.rs).
//
// `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-joined: matchLabels first (sorted by
// key), then matchExpressions in their order, each set's values sorted. The empty selector is
// the empty string: it selects every namespace.
import type { LabelSelector } from './types.js';

/** Rust's `{:?}` of a string, for the names in messages (close enough: JSON's quoting). */
export const quote = (s: string): string => JSON.stringify(s);

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The selector string for `selector`, or throws a message naming the invalid field. */
export function toQuery(selector: LabelSelector): string {
  const terms: string[] = [];
  const labels = Object.entries(selector.matchLabels ?? {}).sort(([a], [b]) => cmp(a, b));
  for (const [key, value] of labels) {
    const field = `spec.namespaceSelector.matchLabels[${quote(key)}]`;
    const k = checkKey(key);
    if (k) throw new SelectorError(`${field}: invalid label key ${quote(key)}: ${k}`);
    const v = checkValue(String(value));
    if (v) throw new SelectorError(`${field}: invalid label value ${quote(String(value))}: ${v}`);
    terms.push(`${key}=${value}`);
  }
  (selector.matchExpressions ?? []).forEach((r, i) => {
    const field = `spec.namespaceSelector.matchExpressions[${i}]`;
    const key = r.key ?? '';
    const op = r.operator ?? '';
    const k = checkKey(key);
    if (k) throw new SelectorError(`${field}.key: invalid label key ${quote(key)}: ${k}`);
    const values = [...new Set(r.values ?? [])].sort(cmp);
    for (const v of values) {
      const why = checkValue(v);
      if (why) throw new SelectorError(`${field}.values: invalid label value ${quote(v)}: ${why}`);
    }
    const set = `(${values.join(',')})`;
    if ((op === 'In' || op === 'NotIn') && values.length === 0) {
      throw new SelectorError(`${field}.values: must be non-empty when operator is ${op}`);
    }
    if ((op === 'Exists' || op === 'DoesNotExist') && values.length > 0) {
      throw new SelectorError(`${field}.values: must be empty when operator is ${op}`);
    }
    switch (op) {
      case 'In':
        terms.push(`${key} in ${set}`);
        break;
      case 'NotIn':
        terms.push(`${key} notin ${set}`);
        break;
      case 'Exists':
        terms.push(key);
        break;
      case 'DoesNotExist':
        terms.push(`!${key}`);
        break;
      default:
        throw new SelectorError(`${field}.operator: ${quote(op)} is not a valid operator (In, NotIn, Exists or DoesNotExist)`);
    }
  });
  return terms.join(',');
}

/** An invalid selector: the message says which field and why. */
export class SelectorError extends Error {}

const utf8 = (s: string): number => new TextEncoder().encode(s).length;

function checkKey(key: string): string | null {
  const slash = key.indexOf('/');
  const [prefix, name] = slash >= 0 ? [key.slice(0, slash), key.slice(slash + 1)] : [null, key];
  if (prefix !== null) {
    const p = checkDnsSubdomain(prefix);
    if (p) return `prefix part ${p}`;
  }
  if (name === '') return 'name part must be non-empty';
  const n = checkNamePart(name);
  return n ? `name part ${n}` : null;
}

function checkValue(value: string): string | null {
  return value === '' ? null : checkNamePart(value);
}

function checkNamePart(s: string): string | null {
  if (utf8(s) > 63) return 'must be no more than 63 characters';
  if (/^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/.test(s)) return null;
  return "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
}

function checkDnsSubdomain(s: string): string | null {
  if (utf8(s) > 253) return 'must be no more than 253 characters';
  const label = (l: string): boolean => /^[a-z0-9-]+$/.test(l) && !l.startsWith('-') && !l.endsWith('-');
  if (s.split('.').every(label)) return null;
  return "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character";
}

/** A valid namespace name (an RFC 1123 label, at most 63 characters). */
export const isDnsLabel = (s: string): boolean => utf8(s) <= 63 && checkDnsSubdomain(s) === null && !s.includes('.');
/** A valid ConfigMap or Secret name (an RFC 1123 subdomain). */
export const isDnsSubdomain = (s: string): boolean => checkDnsSubdomain(s) === null;
