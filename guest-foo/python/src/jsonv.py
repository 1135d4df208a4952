"""JSON as the Rust guest sees it (serde_json::Value).

`json.loads` already tells integers from floats and keeps big integers exact. Two things differ
from serde_json and are fixed here with its hooks:

- serde_json keeps an integer only in i64 ∪ u64; `-0` and anything out of range is a float.
- serde_json (without its `float_roundtrip` feature, as the Rust guest is built) computes a
  float as (u64 significand) × or ÷ 10^k, which is not always the nearest f64. The Rust guest
  quotes that value in its error messages, so it is reproduced exactly.

Output is compact with sorted keys: serde_json's map is a BTreeMap, so `dumps` writes what the
Rust guest writes, byte for byte.
"""

import json
import math

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1
_I32_MIN = -(2**31)
_I32_MAX = 2**31 - 1
_POW10 = [float("1e%d" % k) for k in range(309)]


class JsonError(ValueError):
    """Invalid JSON."""


def serde_f64(lexeme):
    """A JSON number's f64 as serde_json computes it. Raises JsonError when out of range."""
    i = 0
    n = len(lexeme)
    neg = lexeme.startswith("-")
    if neg:
        i = 1
    sig = 0
    exp = 0
    full = False  # the integer part overflowed u64: later digits only scale
    while i < n and lexeme[i].isdigit():
        nxt = sig * 10 + int(lexeme[i])
        if not full and nxt <= U64_MAX:
            sig = nxt
        else:
            full = True
            exp += 1
        i += 1
    if i < n and lexeme[i] == ".":
        i += 1
        # serde_json tries the fraction's digits even if the integer part overflowed; once one
        # does not fit, the rest are ignored.
        frac_full = False
        while i < n and lexeme[i].isdigit():
            nxt = sig * 10 + int(lexeme[i])
            if not frac_full and nxt <= U64_MAX:
                sig = nxt
                exp -= 1
            else:
                frac_full = True
            i += 1
    if i < n and lexeme[i] in "eE":
        i += 1
        positive = True
        if i < n and lexeme[i] in "+-":
            positive = lexeme[i] == "+"
            i += 1
        e = 0
        while i < n and lexeme[i].isdigit():
            e = e * 10 + int(lexeme[i])
            if e > _I32_MAX:
                if sig != 0 and positive:
                    raise JsonError("number out of range")
                return -0.0 if neg else 0.0
            i += 1
        exp = min(_I32_MAX, max(_I32_MIN, exp + e if positive else exp - e))
    f = float(sig)
    while True:
        a = abs(exp)
        if a <= 308:
            if exp >= 0:
                f *= _POW10[a]
                if math.isinf(f):
                    raise JsonError("number out of range")
            else:
                f /= _POW10[a]
            break
        if f == 0.0:
            break
        if exp >= 0:
            raise JsonError("number out of range")
        f /= 1e308
        exp += 308
    return -f if neg else f


def _int(lexeme):
    v = int(lexeme)
    if lexeme.startswith("-"):
        if v != 0 and v >= I64_MIN:
            return v
    elif v <= U64_MAX:
        return v
    return serde_f64(lexeme)


def _constant(name):
    raise JsonError("expected value (%s)" % name)


def loads(text):
    """Parses JSON text into None/bool/int/float/str/list/dict, numbers as serde_json has them."""
    try:
        return json.loads(text, parse_int=_int, parse_float=serde_f64, parse_constant=_constant)
    except JsonError:
        raise
    except (ValueError, RecursionError) as e:
        raise JsonError(str(e)) from None


def dumps(v):
    """Compact JSON with sorted keys (the Rust guest's serde_json output)."""
    return json.dumps(v, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


def format_float(f):
    """An f64 as serde_json (zmij) writes it: shortest round-trip digits, `1.0` not `1`, and the
    exponent form outside 1e-5 ..= 1e15 (`1e+16`, `1.5e-7`)."""
    if f == 0.0:
        return "-0.0" if math.copysign(1.0, f) < 0 else "0.0"
    sign = "-" if f < 0 else ""
    r = repr(abs(f))  # shortest round-trip, e.g. '123.456', '1e-05', '1.5e+16'
    mant, _, e = r.partition("e")
    e = int(e) if e else 0
    ip, _, fp = mant.partition(".")
    digits = ip + fp
    e += len(ip) - 1
    stripped = digits.lstrip("0")
    e -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    n = len(digits)
    if -5 <= e <= 15:
        if n - 1 <= e:
            return "%s%s%s.0" % (sign, digits, "0" * (e - (n - 1)))
        if e >= 0:
            return "%s%s.%s" % (sign, digits[: e + 1], digits[e + 1 :])
        return "%s0.%s%s" % (sign, "0" * (-e - 1), digits)
    frac = "." + digits[1:] if n > 1 else ""
    return "%s%s%se%s%d" % (sign, digits[0], frac, "+" if e >= 0 else "-", abs(e))
