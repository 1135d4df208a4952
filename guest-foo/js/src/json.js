// JSON as the Rust guest sees it (serde_json::Value), not as JSON.parse does.
//
// The Rust guest tells integers from floats and keeps 64-bit integers exact: `"replicas": 2.0`
// is an error there, `"replicas": 9007199254740993` is fine. JSON.parse loses both, so objects
// are parsed here into:
//   null, true/false, strings, arrays,
//   Map (objects; no prototype keys to trip over),
//   JNum (numbers: integers as BigInt, floats as Number, classified as serde_json does).

export const I64_MIN = -(2n ** 63n);
export const I64_MAX = 2n ** 63n - 1n;
export const U64_MAX = 2n ** 64n - 1n;

/** A JSON number: `kind` is 'int' (`int` is a BigInt in i64 ∪ u64) or 'float' (`float`). */
export class JNum {
  constructor(kind, value) {
    this.kind = kind;
    if (kind === 'int') this.int = value;
    else this.float = value;
  }
}

export class JsonError extends Error {}

const NUMBER = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

/** Parses JSON text (RFC 8259). Throws JsonError with a position on invalid input. */
export function parse(text) {
  let i = 0;
  const n = text.length;
  const fail = (what) => {
    let line = 1;
    let col = 0;
    for (let k = 0; k < i && k < n; k++) {
      if (text.charCodeAt(k) === 10) {
        line++;
        col = 0;
      } else col++;
    }
    throw new JsonError(`${what} at line ${line} column ${col}`);
  };
  const ws = () => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i++;
      else return;
    }
  };
  const value = (depth) => {
    if (depth > 128) fail('recursion limit exceeded');
    ws();
    if (i >= n) fail('EOF while parsing a value');
    const c = text[i];
    if (c === '{') {
      i++;
      const m = new Map();
      ws();
      if (text[i] === '}') {
        i++;
        return m;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail(i >= n ? 'EOF while parsing an object' : 'key must be a string');
        const k = string();
        ws();
        if (text[i] !== ':') fail(i >= n ? 'EOF while parsing an object' : 'expected `:`');
        i++;
        m.set(k, value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return m;
        }
        fail(i >= n ? 'EOF while parsing an object' : 'expected `,` or `}`');
      }
    }
    if (c === '[') {
      i++;
      const a = [];
      ws();
      if (text[i] === ']') {
        i++;
        return a;
      }
      for (;;) {
        a.push(value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return a;
        }
        fail(i >= n ? 'EOF while parsing a list' : 'expected `,` or `]`');
      }
    }
    if (c === '"') return string();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    if (c === '-' || (c >= '0' && c <= '9')) return number();
    fail('expected value');
  };
  const string = () => {
    i++; // opening quote
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) fail('EOF while parsing a string');
      const c = text.charCodeAt(i);
      if (c === 34) {
        out += text.slice(start, i);
        i++;
        return out;
      }
      if (c < 0x20) fail('control character (\\u0000-\\u001F) found while parsing a string');
      if (c !== 92) {
        i++;
        continue;
      }
      out += text.slice(start, i);
      i++;
      const e = text[i++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const hex = text.slice(i, i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('invalid escape');
          i += 4;
          const u = parseInt(hex, 16);
          if (u >= 0xd800 && u <= 0xdbff) {
            const lo = text.slice(i + 2, i + 6);
            if (text[i] !== '\\' || text[i + 1] !== 'u' || !/^[0-9a-fA-F]{4}$/.test(lo)) {
              fail('unexpected end of hex escape');
            }
            const l = parseInt(lo, 16);
            if (l < 0xdc00 || l > 0xdfff) fail('lone leading surrogate in hex escape');
            i += 6;
            out += String.fromCharCode(u, l);
          } else if (u >= 0xdc00 && u <= 0xdfff) {
            fail('lone leading surrogate in hex escape');
          } else out += String.fromCharCode(u);
          break;
        }
        default:
          fail('invalid escape');
      }
      start = i;
    }
  };
  const number = () => {
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) fail('invalid number');
    const lexeme = m[0];
    i += lexeme.length;
    if (m[2] === undefined && m[3] === undefined) {
      // serde_json: non-negative integers up to u64::MAX and negative ones down to i64::MIN are
      // integers; `-0` and anything out of range become floats.
      const b = BigInt(lexeme);
      if (lexeme[0] !== '-' && b <= U64_MAX) return new JNum('int', b);
      if (lexeme[0] === '-' && b !== 0n && b >= I64_MIN) return new JNum('int', b);
    }
    const f = serdeF64(lexeme);
    if (f === null) fail('number out of range');
    return new JNum('float', f);
  };
  const v = value(0);
  ws();
  if (i < n) fail('trailing characters');
  return v;
}

const POW10 = Array.from({ length: 309 }, (_, k) => Number(`1e${k}`));
const I32_MIN = -(2 ** 31);
const I32_MAX = 2 ** 31 - 1;

/**
 * A JSON number's f64 as serde_json computes it without its `float_roundtrip` feature (the Rust
 * guest's build): at most a u64 of significant digits (later ones are dropped), converted to f64,
 * then one multiplication or division by a power of ten. Not always the nearest f64 (JS `Number()`
 * is), so the Rust guest can print `1.2345678901234568e+300` for `1.2345678901234567e300`.
 * Null when out of range.
 */
export function serdeF64(lexeme) {
  let i = 0;
  const neg = lexeme[0] === '-';
  if (neg) i++;
  const digit = () => (i < lexeme.length ? lexeme.charCodeAt(i) - 48 : -1);
  let sig = 0n;
  let exp = 0;
  let full = false; // the significand stopped taking digits
  const take = (d, scale) => {
    const next = sig * 10n + BigInt(d);
    if (!full && next <= U64_MAX) {
      sig = next;
      exp -= scale;
    } else {
      full = true;
      exp += 1 - scale;
    }
  };
  for (let d = digit(); d >= 0 && d <= 9; i++, d = digit()) take(d, 0);
  if (lexeme[i] === '.') {
    i++;
    // serde_json tries the fraction's digits again even if the integer part overflowed; once one
    // does not fit, the rest are ignored.
    let fracFull = false;
    for (let d = digit(); d >= 0 && d <= 9; i++, d = digit()) {
      const next = sig * 10n + BigInt(d);
      if (!fracFull && next <= U64_MAX) {
        sig = next;
        exp -= 1;
      } else fracFull = true;
    }
  }
  if (lexeme[i] === 'e' || lexeme[i] === 'E') {
    i++;
    let positive = true;
    if (lexeme[i] === '+' || lexeme[i] === '-') positive = lexeme[i++] === '+';
    let e = 0;
    for (let d = digit(); d >= 0 && d <= 9; i++, d = digit()) {
      e = e * 10 + d;
      if (e > I32_MAX) {
        if (sig !== 0n && positive) return null;
        return neg ? -0 : 0;
      }
    }
    exp = Math.min(I32_MAX, Math.max(I32_MIN, positive ? exp + e : exp - e));
  }
  let f = Number(sig);
  for (;;) {
    const a = Math.abs(exp);
    if (a <= 308) {
      if (exp >= 0) {
        f *= POW10[a];
        if (!Number.isFinite(f)) return null;
      } else f /= POW10[a];
      break;
    }
    if (f === 0) break;
    if (exp >= 0) return null;
    f /= 1e308;
    exp += 308;
  }
  return neg ? -f : f;
}

/** Serializes what `parse` returns, plus plain objects and BigInts, as compact JSON with sorted
 * object keys (serde_json's default map is a BTreeMap, so this is byte-for-byte what the Rust
 * guest writes). */
export function stringify(v) {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'string':
      return JSON.stringify(v);
    case 'bigint':
      return v.toString();
    case 'number':
      return formatFloat(v);
  }
  if (v instanceof JNum) return v.kind === 'int' ? v.int.toString() : formatFloat(v.float);
  if (Array.isArray(v)) return `[${v.map(stringify).join(',')}]`;
  const entries = v instanceof Map ? [...v.entries()] : Object.entries(v);
  entries.sort(([a], [b]) => compareUtf8(a, b));
  return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${stringify(x)}`).join(',')}}`;
}

/** Orders strings as Rust does (by UTF-8 bytes, i.e. by code point). */
export function compareUtf8(a, b) {
  const x = [...a];
  const y = [...b];
  for (let k = 0; k < x.length && k < y.length; k++) {
    const d = x[k].codePointAt(0) - y[k].codePointAt(0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** An f64 as serde_json (zmij) writes it: shortest round-trip digits, `1.0` not `1`,
 * exponent form outside 1e-5 ..= 1e15 (`1e+16`, `1.5e-7`). */
export function formatFloat(f) {
  if (!Number.isFinite(f)) return 'null';
  if (f === 0) return Object.is(f, -0) ? '-0.0' : '0.0';
  const sign = f < 0 ? '-' : '';
  const [mant, exp] = Math.abs(f).toExponential().split('e');
  const digits = mant.replace('.', '');
  const e = Number(exp);
  const len = digits.length;
  if (e >= -5 && e <= 15) {
    if (len - 1 <= e) return `${sign}${digits}${'0'.repeat(e - (len - 1))}.0`;
    if (e >= 0) return `${sign}${digits.slice(0, e + 1)}.${digits.slice(e + 1)}`;
    return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
  }
  const frac = len > 1 ? `.${digits.slice(1)}` : '';
  return `${sign}${digits[0]}${frac}e${e >= 0 ? '+' : '-'}${Math.abs(e)}`;
}
