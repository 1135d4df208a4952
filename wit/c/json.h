/*
 * A small JSON library for the C Foo reconciler.
 *
 * The parser mirrors what serde_json (as the Rust guest uses it: `serde_json::from_str::<Value>`)
 * accepts and rejects, including its error messages with line and column, its recursion limit,
 * its integer/float split (u64, i64, f64) and its float parsing without `float_roundtrip`. Object
 * members keep their order; a duplicate key means the last one, as in serde_json's map.
 *
 * Strings are UTF-8 with explicit lengths (a JSON string may contain `\u0000`); each is also
 * NUL-terminated for convenience.
 */
#ifndef KWOP_JSON_H
#define KWOP_JSON_H

#include <stddef.h>
#include <stdint.h>

/* ---- growable byte buffer ------------------------------------------------------------------ */

typedef struct {
    char *ptr;  /* NUL-terminated once anything was written; NULL before */
    size_t len;
    size_t cap;
    int oom;    /* an allocation failed; the content is truncated */
} sb_t;

void sb_init(sb_t *b);
void sb_free(sb_t *b);
/* Hands the buffer over (malloc'd, NUL-terminated, never NULL unless out of memory). */
char *sb_take(sb_t *b, size_t *len);
void sb_putn(sb_t *b, const char *s, size_t n);
void sb_puts(sb_t *b, const char *s);
void sb_putc(sb_t *b, char c);
void sb_put_u64(sb_t *b, uint64_t v);
void sb_put_i64(sb_t *b, int64_t v);

/* Writes a JSON string literal, escaped exactly as serde_json does. */
void sb_put_json_string(sb_t *b, const char *s, size_t n);
/* Writes a string quoted as Rust's `{:?}` (Debug for str) does. `s` must be valid UTF-8. */
void sb_put_debug_string(sb_t *b, const char *s, size_t n);
/* Writes a finite double the way serde_json reports it in errors (shortest round-trip digits). */
void sb_put_float(sb_t *b, double f);

/* ---- values ---------------------------------------------------------------------------------- */

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;
typedef enum { JSON_POS_INT, JSON_NEG_INT, JSON_FLOAT } json_num_kind;

typedef struct json_value json_value;
typedef struct json_member json_member;

struct json_value {
    json_type type;
    json_num_kind num;  /* JSON_NUMBER */
    int boolean;        /* JSON_BOOL */
    uint64_t u;         /* JSON_POS_INT */
    int64_t i;          /* JSON_NEG_INT (always < 0) */
    double f;           /* JSON_FLOAT */
    char *str;          /* JSON_STRING */
    size_t len;         /* string bytes, array items or object members */
    json_value *items;  /* JSON_ARRAY */
    json_member *members; /* JSON_OBJECT, in document order */
};

struct json_member {
    char *key;
    size_t key_len;
    json_value value;
};

/* Parses `text` (exactly `len` bytes). On success returns a value to free with json_free(). On
 * failure returns NULL and writes serde_json's message ("expected value at line 1 column 1") to
 * `err`. */
json_value *json_parse(const char *text, size_t len, sb_t *err);
void json_free(json_value *v);

/* Object member by key (the last one of that name), or NULL if `v` is no object or lacks it. */
const json_value *json_get(const json_value *v, const char *key);
/* serde_json's Value::as_i64: integers that fit in i64, else 0 with *ok = 0. */
int json_as_i64(const json_value *v, int64_t *out);

#endif
