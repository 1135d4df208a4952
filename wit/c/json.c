/* A small JSON library for the C Foo reconciler: see json.h. */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "debug_escape_table.h"

/* ---- growable byte buffer ------------------------------------------------------------------ */

void sb_init(sb_t *b) {
    b->ptr = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = 0;
}

void sb_free(sb_t *b) {
    free(b->ptr);
    sb_init(b);
}

static int sb_reserve(sb_t *b, size_t extra) {
    if (b->oom) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    char *p = realloc(b->ptr, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->ptr = p;
    b->cap = cap;
    return 1;
}

char *sb_take(sb_t *b, size_t *len) {
    if (!b->ptr && !b->oom) sb_reserve(b, 0);
    if (b->ptr) b->ptr[b->len] = '\0';
    char *p = b->ptr;
    if (len) *len = b->len;
    sb_init(b);
    return p;
}

void sb_putn(sb_t *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    if (n) memcpy(b->ptr + b->len, s, n);
    b->len += n;
    b->ptr[b->len] = '\0';
}

void sb_puts(sb_t *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_putc(sb_t *b, char c) { sb_putn(b, &c, 1); }

void sb_put_u64(sb_t *b, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    sb_putn(b, tmp + sizeof tmp - n, n);
}

void sb_put_i64(sb_t *b, int64_t v) {
    if (v < 0) {
        sb_putc(b, '-');
        sb_put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        sb_put_u64(b, (uint64_t)v);
    }
}

static const char HEX[] = "0123456789abcdef";

void sb_put_json_string(sb_t *b, const char *s, size_t n) {
    sb_putc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[6];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c >= 0x20) continue;
            break;
        }
        sb_putn(b, s + start, i - start);
        start = i + 1;
        if (esc) {
            sb_puts(b, esc);
        } else {
            memcpy(u, "\\u00", 4);
            u[4] = HEX[c >> 4];
            u[5] = HEX[c & 15];
            sb_putn(b, u, 6);
        }
    }
    sb_putn(b, s + start, n - start);
    sb_putc(b, '"');
}

/* Decodes one UTF-8 scalar at s[*i] (input is valid UTF-8). */
static uint32_t utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    size_t extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    if (extra) c &= 0x3F >> extra;
    (*i)++;
    while (extra-- && *i < n) c = (c << 6) | (u[(*i)++] & 0x3F);
    return c;
}

static int debug_escapes(uint32_t c) {
    size_t lo = 0, hi = sizeof debug_escape_ranges / sizeof debug_escape_ranges[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < debug_escape_ranges[mid][0])
            hi = mid;
        else if (c > debug_escape_ranges[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

void sb_put_debug_string(sb_t *b, const char *s, size_t n) {
    sb_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        size_t at = i;
        uint32_t c = utf8_next(s, n, &i);
        switch (c) {
        case 0: sb_puts(b, "\\0"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '"': sb_puts(b, "\\\""); break;
        default:
            if (debug_escapes(c)) {
                char tmp[8];
                int k = 0;
                for (int shift = 20; shift >= 0; shift -= 4)
                    if ((c >> shift) || shift == 0 || k) tmp[k++] = HEX[(c >> shift) & 15];
                sb_puts(b, "\\u{");
                sb_putn(b, tmp, (size_t)k);
                sb_putc(b, '}');
            } else {
                sb_putn(b, s + at, i - at);
            }
        }
    }
    sb_putc(b, '"');
}

/* The exact decimal expansion of a finite f > 0: its significant digits (no leading zeros) into
 * `out` (malloc'd, NUL-terminated) and the exponent of the first one. A double is m * 2^e with
 * an integer m, so it is the integer m * 2^e (e >= 0) or m * 5^-e shifted by -e decimal places;
 * a small base-10^9 big integer computes that integer. At most about 770 digits. */
static char *exact_digits(double f, int *exp10) {
    int e2;
    double fr = frexp(f, &e2); /* f = fr * 2^e2, 0.5 <= fr < 1 */
    uint64_t m = (uint64_t)ldexp(fr, 53);
    int e = e2 - 53;
    while (m % 2 == 0 && e < 0) { /* keep the big integer small */
        m /= 2;
        e++;
    }
    uint32_t limbs[100]; /* little-endian base 1e9 */
    size_t n = 0;
    do {
        limbs[n++] = (uint32_t)(m % 1000000000u);
        m /= 1000000000u;
    } while (m);
    int k = e >= 0 ? e : -e;
    uint32_t factor = e >= 0 ? 2 : 5;
    while (k > 0) {
        /* multiply by factor^j in one pass, j as large as fits */
        uint64_t mul = 1;
        while (k > 0 && mul * factor <= 1000000000u) {
            mul *= factor;
            k--;
        }
        uint64_t carry = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = (uint64_t)limbs[i] * mul + carry;
            limbs[i] = (uint32_t)(v % 1000000000u);
            carry = v / 1000000000u;
        }
        if (carry) limbs[n++] = (uint32_t)carry;
    }
    char *out = malloc(n * 9 + 1);
    if (!out) return NULL;
    size_t len = 0;
    for (size_t i = n; i-- > 0;) {
        uint32_t v = limbs[i];
        char tmp[9];
        for (int d = 8; d >= 0; d--) {
            tmp[d] = (char)('0' + v % 10);
            v /= 10;
        }
        size_t skip = 0;
        if (i == n - 1)
            while (skip < 8 && tmp[skip] == '0') skip++;
        memcpy(out + len, tmp + skip, 9 - skip);
        len += 9 - skip;
    }
    out[len] = '\0';
    /* value = out * 10^(e < 0 ? e : 0) */
    *exp10 = (int)len - 1 + (e < 0 ? e : 0);
    return out;
}

/* Whether digits d[0..p) * 10^(x - p + 1) reads back as f. */
static int reads_back(const char *d, int p, int x, double f) {
    char num[40]; /* at most 17 digits, 'e' and a 5-character exponent: never grows */
    sb_t b = {num, 0, sizeof num, 0};
    memcpy(num, d, (size_t)p);
    b.len = (size_t)p;
    sb_putc(&b, 'e');
    sb_put_i64(&b, (int64_t)x - p + 1);
    return strtod(num, NULL) == f;
}

/* Adds one to the p digits in d; returns 1 if they overflowed to 10^p (d is then 100...0). */
static int digits_inc(char *d, int p) {
    for (int i = p - 1; i >= 0; i--) {
        if (d[i] < '9') {
            d[i]++;
            return 0;
        }
        d[i] = '0';
    }
    d[0] = '1';
    return 1;
}

static int digits_dec(char *d, int p) { /* d > 10^(p-1); returns 0 if it would lose a digit */
    for (int i = p - 1; i >= 0; i--) {
        if (d[i] > '0') {
            d[i]--;
            return d[0] != '0';
        }
        d[i] = '9';
    }
    return 0;
}

/* The shortest digits that read back as f (f finite, > 0), as Schubfach-style formatters find
 * them: for each length p, the correctly rounded p digits, then their neighbours (which matter
 * where the rounding interval is asymmetric, just above a power of two). digits[0..n), exp10
 * the exponent of the first digit. */
static int shortest_digits(double f, char digits[18], int *exp10) {
    int x;
    char *ex = exact_digits(f, &x);
    if (!ex) {
        digits[0] = '0';
        *exp10 = 0;
        return 1;
    }
    int total = (int)strlen(ex);
    for (int p = 1; p <= 17; p++) {
        char d[18];
        int xp = x;
        for (int i = 0; i < p; i++) d[i] = i < total ? ex[i] : '0';
        /* round half to even on the exact expansion */
        if (p < total) {
            int up = ex[p] > '5';
            if (ex[p] == '5') {
                up = (d[p - 1] - '0') % 2;
                for (int i = p + 1; i < total; i++)
                    if (ex[i] != '0') up = 1;
            }
            if (up && digits_inc(d, p)) xp++;
        }
        char c[18];
        memcpy(c, d, (size_t)p);
        int ok = reads_back(c, p, xp, f);
        if (!ok) {
            memcpy(c, d, (size_t)p);
            ok = !digits_inc(c, p) && reads_back(c, p, xp, f);
        }
        if (!ok) {
            memcpy(c, d, (size_t)p);
            ok = digits_dec(c, p) && reads_back(c, p, xp, f);
        }
        if (ok) {
            memcpy(digits, c, (size_t)p);
            *exp10 = xp;
            free(ex);
            /* trailing zeros are not significant */
            while (p > 1 && digits[p - 1] == '0') p--;
            return p;
        }
    }
    /* unreachable: 17 digits always read back */
    memcpy(digits, ex, 17);
    *exp10 = x;
    free(ex);
    return 17;
}

void sb_put_float(sb_t *b, double f) {
    if (signbit(f)) sb_putc(b, '-');
    f = fabs(f);
    if (f == 0) {
        sb_puts(b, "0.0");
        return;
    }
    char d[18];
    int e;
    int n = shortest_digits(f, d, &e);
    if (e >= -5 && e <= 15) {
        if (n - 1 <= e) { /* 1234e7 -> 12340000000.0 */
            sb_putn(b, d, (size_t)n);
            for (int k = n; k <= e; k++) sb_putc(b, '0');
            sb_puts(b, ".0");
        } else if (e >= 0) { /* 1234e-2 -> 12.34 */
            sb_putn(b, d, (size_t)e + 1);
            sb_putc(b, '.');
            sb_putn(b, d + e + 1, (size_t)(n - e - 1));
        } else { /* 1234e-6 -> 0.001234 */
            sb_puts(b, "0.");
            for (int k = 0; k < -e - 1; k++) sb_putc(b, '0');
            sb_putn(b, d, (size_t)n);
        }
        return;
    }
    sb_putc(b, d[0]);
    if (n > 1) {
        sb_putc(b, '.');
        sb_putn(b, d + 1, (size_t)n - 1);
    }
    sb_putc(b, 'e');
    sb_putc(b, e >= 0 ? '+' : '-');
    sb_put_u64(b, (uint64_t)(e >= 0 ? e : -e));
}

/* ---- parser ---------------------------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len;
    size_t i;
    int depth; /* serde_json's remaining_depth */
    sb_t *err;
    sb_t scratch;
} parser;

static int fail_at(parser *p, const char *msg, size_t at) {
    size_t line = 1, start = 0;
    for (size_t k = 0; k < at; k++)
        if (p->s[k] == '\n') {
            line++;
            start = k + 1;
        }
    if (p->err) {
        sb_puts(p->err, msg);
        sb_puts(p->err, " at line ");
        sb_put_u64(p->err, line);
        sb_puts(p->err, " column ");
        sb_put_u64(p->err, at - start);
    }
    return 0;
}

/* serde_json's error(): the position after what was consumed */
static int fail(parser *p, const char *msg) { return fail_at(p, msg, p->i); }
/* serde_json's peek_error(): the position of the next byte */
static int peek_fail(parser *p, const char *msg) {
    return fail_at(p, msg, p->i + 1 < p->len ? p->i + 1 : p->len);
}

static int peek(parser *p) { return p->i < p->len ? (unsigned char)p->s[p->i] : -1; }
static int peek_or_null(parser *p) { return p->i < p->len ? (unsigned char)p->s[p->i] : 0; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int whitespace(parser *p) {
    while (p->i < p->len) {
        char c = p->s[p->i];
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r') break;
        p->i++;
    }
    return peek(p);
}

static int oom(parser *p) {
    if (p->err) sb_puts(p->err, "out of memory");
    return 0;
}

/* ---- numbers ---- */

static double pow10_table(int k) { /* 0 <= k <= 308, correctly rounded like a literal */
    static double table[309];
    static int ready;
    if (!ready) {
        char buf[16]; /* "1e308" at most: never grows */
        for (int j = 0; j <= 308; j++) {
            sb_t b = {buf, 0, sizeof buf, 0};
            sb_puts(&b, "1e");
            sb_put_u64(&b, (uint64_t)j);
            table[j] = strtod(buf, NULL);
        }
        ready = 1;
    }
    return table[k];
}

static int from_parts(parser *p, int positive, uint64_t sig, int32_t exponent, double *out) {
    double f = (double)sig;
    int64_t e = exponent;
    for (;;) {
        int64_t a = e < 0 ? -e : e;
        if (a <= 308) {
            if (e >= 0) {
                f *= pow10_table((int)a);
                if (isinf(f)) return fail(p, "number out of range");
            } else {
                f /= pow10_table((int)a);
            }
            break;
        }
        if (f == 0.0) break;
        if (e >= 0) return fail(p, "number out of range");
        f /= 1e308;
        e += 308;
    }
    *out = positive ? f : -f;
    return 1;
}

static int exponent_overflow(parser *p, int positive, int zero_significand, int positive_exp,
                             double *out) {
    if (!zero_significand && positive_exp) return fail(p, "number out of range");
    while (is_digit(peek_or_null(p))) p->i++;
    *out = positive ? 0.0 : -0.0;
    return 1;
}

static int overflows_u64(uint64_t a, uint64_t d) {
    const uint64_t c = UINT64_MAX;
    return a >= c / 10 && (a > c / 10 || d > c % 10);
}

static int parse_exponent(parser *p, int positive, uint64_t sig, int32_t start, double *out) {
    p->i++; /* e or E */
    int positive_exp = 1;
    int c = peek_or_null(p);
    if (c == '+') {
        p->i++;
    } else if (c == '-') {
        p->i++;
        positive_exp = 0;
    }
    if (p->i >= p->len) return fail(p, "EOF while parsing a value");
    c = (unsigned char)p->s[p->i++];
    if (!is_digit(c)) return fail(p, "invalid number");
    int32_t exp = c - '0';
    while (is_digit(c = peek_or_null(p))) {
        p->i++;
        int32_t d = c - '0';
        if (exp >= INT32_MAX / 10 && (exp > INT32_MAX / 10 || d > INT32_MAX % 10))
            return exponent_overflow(p, positive, sig == 0, positive_exp, out);
        exp = exp * 10 + d;
    }
    int64_t final = positive_exp ? (int64_t)start + exp : (int64_t)start - exp;
    if (final > INT32_MAX) final = INT32_MAX;
    if (final < INT32_MIN) final = INT32_MIN;
    return from_parts(p, positive, sig, (int32_t)final, out);
}

static int parse_decimal(parser *p, int positive, uint64_t sig, int32_t before, double *out) {
    p->i++; /* '.' */
    int32_t after = 0;
    int c;
    while (is_digit(c = peek_or_null(p))) {
        uint64_t d = (uint64_t)(c - '0');
        if (overflows_u64(sig, d)) {
            /* ignore all further digits */
            while (is_digit(peek_or_null(p))) p->i++;
            c = peek_or_null(p);
            if (c == 'e' || c == 'E') return parse_exponent(p, positive, sig, before + after, out);
            return from_parts(p, positive, sig, before + after, out);
        }
        p->i++;
        sig = sig * 10 + d;
        after--;
    }
    if (after == 0) {
        if (p->i < p->len) return peek_fail(p, "invalid number");
        return peek_fail(p, "EOF while parsing a value");
    }
    c = peek_or_null(p);
    if (c == 'e' || c == 'E') return parse_exponent(p, positive, sig, before + after, out);
    return from_parts(p, positive, sig, before + after, out);
}

static int parse_number(parser *p, int positive, json_value *v) {
    if (p->i >= p->len) return fail(p, "EOF while parsing a value");
    int c = (unsigned char)p->s[p->i++];
    uint64_t sig = 0;
    v->type = JSON_NUMBER;
    if (c == '0') {
        if (is_digit(peek_or_null(p))) return peek_fail(p, "invalid number");
    } else if (c >= '1' && c <= '9') {
        sig = (uint64_t)(c - '0');
        while (is_digit(c = peek_or_null(p))) {
            uint64_t d = (uint64_t)(c - '0');
            if (overflows_u64(sig, d)) {
                /* a long integer: further digits only scale it */
                int32_t exponent = 0;
                v->num = JSON_FLOAT;
                for (;;) {
                    c = peek_or_null(p);
                    if (is_digit(c)) {
                        p->i++;
                        exponent++;
                    } else if (c == '.') {
                        return parse_decimal(p, positive, sig, exponent, &v->f);
                    } else if (c == 'e' || c == 'E') {
                        return parse_exponent(p, positive, sig, exponent, &v->f);
                    } else {
                        return from_parts(p, positive, sig, exponent, &v->f);
                    }
                }
            }
            p->i++;
            sig = sig * 10 + d;
        }
    } else {
        return fail(p, "invalid number");
    }
    c = peek_or_null(p);
    if (c == '.') {
        v->num = JSON_FLOAT;
        return parse_decimal(p, positive, sig, 0, &v->f);
    }
    if (c == 'e' || c == 'E') {
        v->num = JSON_FLOAT;
        return parse_exponent(p, positive, sig, 0, &v->f);
    }
    if (positive) {
        v->num = JSON_POS_INT;
        v->u = sig;
    } else {
        int64_t neg = (int64_t)((uint64_t)0 - sig);
        if (neg >= 0) { /* -0, or below i64::MIN */
            v->num = JSON_FLOAT;
            v->f = -(double)sig;
        } else {
            v->num = JSON_NEG_INT;
            v->i = neg;
        }
    }
    return 1;
}

/* ---- strings ---- */

static void push_utf8(sb_t *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) {
        u[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        u[0] = (char)(0xC0 | (c >> 6));
        u[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        u[0] = (char)(0xE0 | (c >> 12));
        u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        u[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (c >> 18));
        u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        u[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    sb_putn(b, u, n);
}

static int hex_val(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(parser *p, uint32_t *out) {
    if (p->i + 4 > p->len) {
        p->i = p->len;
        return fail(p, "EOF while parsing a string");
    }
    uint32_t n = 0;
    int bad = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex_val((unsigned char)p->s[p->i + (size_t)k]);
        if (h < 0) bad = 1;
        n = (n << 4) | (uint32_t)(h & 15);
    }
    p->i += 4;
    if (bad) return fail(p, "invalid escape");
    *out = n;
    return 1;
}

static int unicode_escape(parser *p, sb_t *b) {
    uint32_t n, n2;
    if (!hex4(p, &n)) return 0;
    if (n >= 0xDC00 && n <= 0xDFFF) return fail(p, "lone leading surrogate in hex escape");
    if (n < 0xD800 || n > 0xDBFF) {
        push_utf8(b, n);
        return 1;
    }
    if (p->i >= p->len) return fail(p, "EOF while parsing a string");
    if (p->s[p->i++] != '\\') return fail(p, "unexpected end of hex escape");
    if (p->i >= p->len) return fail(p, "EOF while parsing a string");
    if (p->s[p->i++] != 'u') return fail(p, "unexpected end of hex escape");
    if (!hex4(p, &n2)) return 0;
    if (n2 < 0xDC00 || n2 > 0xDFFF) return fail(p, "lone leading surrogate in hex escape");
    push_utf8(b, (((n - 0xD800) << 10) | (n2 - 0xDC00)) + 0x10000);
    return 1;
}

/* After the opening quote. Leaves the text in p->scratch. */
static int parse_string(parser *p) {
    sb_t *b = &p->scratch;
    b->len = 0;
    for (;;) {
        size_t start = p->i;
        while (p->i < p->len) {
            unsigned char c = (unsigned char)p->s[p->i];
            if (c == '"' || c == '\\' || c < 0x20) break;
            p->i++;
        }
        sb_putn(b, p->s + start, p->i - start);
        if (p->i >= p->len) return fail(p, "EOF while parsing a string");
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') break;
        if (c != '\\')
            return fail(p, "control character (\\u0000-\\u001F) found while parsing a string");
        if (p->i >= p->len) return fail(p, "EOF while parsing a string");
        c = (unsigned char)p->s[p->i++];
        switch (c) {
        case '"': sb_putc(b, '"'); break;
        case '\\': sb_putc(b, '\\'); break;
        case '/': sb_putc(b, '/'); break;
        case 'b': sb_putc(b, '\b'); break;
        case 'f': sb_putc(b, '\f'); break;
        case 'n': sb_putc(b, '\n'); break;
        case 'r': sb_putc(b, '\r'); break;
        case 't': sb_putc(b, '\t'); break;
        case 'u':
            if (!unicode_escape(p, b)) return 0;
            break;
        default: return fail(p, "invalid escape");
        }
    }
    if (b->oom) return oom(p);
    return 1;
}

static int take_scratch(parser *p, char **out, size_t *len) {
    *out = malloc(p->scratch.len + 1);
    if (!*out) return oom(p);
    if (p->scratch.len) memcpy(*out, p->scratch.ptr, p->scratch.len);
    (*out)[p->scratch.len] = '\0';
    *len = p->scratch.len;
    return 1;
}

/* ---- values ---- */

static void free_inner(json_value *v);

static int parse_ident(parser *p, const char *rest) {
    for (; *rest; rest++) {
        if (p->i >= p->len) return fail(p, "EOF while parsing a value");
        if (p->s[p->i++] != *rest) return fail(p, "expected ident");
    }
    return 1;
}

static int parse_value(parser *p, json_value *v);

static int parse_array(parser *p, json_value *v) {
    size_t cap = 0;
    int first = 1;
    v->type = JSON_ARRAY;
    p->i++; /* '[' */
    for (;;) {
        int c = whitespace(p);
        if (c == ']') {
            p->i++;
            return 1;
        }
        if (c == ',' && !first) {
            p->i++;
            c = whitespace(p);
        } else if (c >= 0) {
            if (!first) return peek_fail(p, "expected `,` or `]`");
            first = 0;
        } else {
            return peek_fail(p, "EOF while parsing a list");
        }
        if (c == ']') return peek_fail(p, "trailing comma");
        if (c < 0) return peek_fail(p, "EOF while parsing a value");
        if (v->len == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            json_value *items = realloc(v->items, ncap * sizeof *items);
            if (!items) return oom(p);
            v->items = items;
            cap = ncap;
        }
        json_value *item = &v->items[v->len];
        memset(item, 0, sizeof *item);
        v->len++;
        if (!parse_value(p, item)) return 0;
    }
}

static int parse_object(parser *p, json_value *v) {
    size_t cap = 0;
    int first = 1;
    v->type = JSON_OBJECT;
    p->i++; /* '{' */
    for (;;) {
        int c = whitespace(p);
        if (c == '}') {
            p->i++;
            return 1;
        }
        if (c == ',' && !first) {
            p->i++;
            c = whitespace(p);
        } else if (c >= 0) {
            if (!first) return peek_fail(p, "expected `,` or `}`");
            first = 0;
        } else {
            return peek_fail(p, "EOF while parsing an object");
        }
        if (c == '}') return peek_fail(p, "trailing comma");
        if (c < 0) return peek_fail(p, "EOF while parsing a value");
        if (c != '"') return peek_fail(p, "key must be a string");
        p->i++;
        if (!parse_string(p)) return 0;
        if (v->len == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            json_member *m = realloc(v->members, ncap * sizeof *m);
            if (!m) return oom(p);
            v->members = m;
            cap = ncap;
        }
        json_member *m = &v->members[v->len];
        memset(m, 0, sizeof *m);
        v->len++;
        if (!take_scratch(p, &m->key, &m->key_len)) return 0;
        c = whitespace(p);
        if (c == ':') {
            p->i++;
        } else if (c >= 0) {
            return peek_fail(p, "expected `:`");
        } else {
            return peek_fail(p, "EOF while parsing an object");
        }
        if (!parse_value(p, &m->value)) return 0;
    }
}

static int parse_value(parser *p, json_value *v) {
    int c = whitespace(p);
    int ok;
    switch (c) {
    case -1: return peek_fail(p, "EOF while parsing a value");
    case 'n':
        p->i++;
        v->type = JSON_NULL;
        return parse_ident(p, "ull");
    case 't':
        p->i++;
        v->type = JSON_BOOL;
        v->boolean = 1;
        return parse_ident(p, "rue");
    case 'f':
        p->i++;
        v->type = JSON_BOOL;
        return parse_ident(p, "alse");
    case '-': p->i++; return parse_number(p, 0, v);
    case '"':
        p->i++;
        v->type = JSON_STRING;
        return parse_string(p) && take_scratch(p, &v->str, &v->len);
    case '[':
    case '{':
        if (--p->depth == 0) return peek_fail(p, "recursion limit exceeded");
        ok = c == '[' ? parse_array(p, v) : parse_object(p, v);
        p->depth++;
        return ok;
    default:
        if (is_digit(c)) return parse_number(p, 1, v);
        return peek_fail(p, "expected value");
    }
}

json_value *json_parse(const char *text, size_t len, sb_t *err) {
    parser p = {text, len, 0, 128, err, {0}};
    sb_init(&p.scratch);
    json_value *v = calloc(1, sizeof *v);
    int ok = v ? parse_value(&p, v) : oom(&p);
    if (ok && whitespace(&p) >= 0) ok = peek_fail(&p, "trailing characters");
    sb_free(&p.scratch);
    if (!ok) {
        json_free(v);
        return NULL;
    }
    return v;
}

static void free_inner(json_value *v) {
    size_t k;
    switch (v->type) {
    case JSON_STRING: free(v->str); break;
    case JSON_ARRAY:
        for (k = 0; k < v->len; k++) free_inner(&v->items[k]);
        free(v->items);
        break;
    case JSON_OBJECT:
        for (k = 0; k < v->len; k++) {
            free(v->members[k].key);
            free_inner(&v->members[k].value);
        }
        free(v->members);
        break;
    default: break;
    }
}

void json_free(json_value *v) {
    if (!v) return;
    free_inner(v);
    free(v);
}

const json_value *json_get(const json_value *v, const char *key) {
    if (!v || v->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t k = v->len; k-- > 0;) {
        const json_member *m = &v->members[k];
        if (m->key_len == n && memcmp(m->key, key, n) == 0) return &m->value;
    }
    return NULL;
}

int json_as_i64(const json_value *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER) return 0;
    if (v->num == JSON_POS_INT && v->u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)v->u;
        return 1;
    }
    if (v->num == JSON_NEG_INT) {
        *out = v->i;
        return 1;
    }
    return 0;
}
