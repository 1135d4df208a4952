/* Native driver for the differential test (tests/diff.sh): runs the C logic on cases read from
 * stdin, one per line: `<primary JSON text as a JSON string> TAB <cached Deployment JSON text as a
 * JSON string, or null>`, and prints one result line per case in the same format as the Rust
 * oracle (tests/oracle). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/foo.h"
#include "json.h"

typedef struct {
    const json_value *deployment; /* JSON string or null */
    sb_t lookups;                 /* JSON array items, comma separated */
} ctx_t;

static void add_lookup(ctx_t *c, const char *s, size_t n) {
    if (c->lookups.len) sb_putc(&c->lookups, ',');
    sb_put_json_string(&c->lookups, s, n);
}

static char *lookup(void *vctx, const char *ns, size_t ns_len, const char *name, size_t name_len,
                    size_t *json_len) {
    ctx_t *c = vctx;
    sb_t b;
    sb_init(&b);
    sb_putn(&b, ns, ns_len);
    sb_putc(&b, '/');
    sb_putn(&b, name, name_len);
    add_lookup(c, b.ptr, b.len);
    sb_free(&b);
    if (c->deployment->type != JSON_STRING) return NULL;
    char *copy = malloc(c->deployment->len + 1);
    memcpy(copy, c->deployment->str, c->deployment->len + 1);
    *json_len = c->deployment->len;
    return copy;
}

static void log_fn(void *vctx, const char *msg, size_t len) {
    ctx_t *c = vctx;
    sb_t b;
    sb_init(&b);
    sb_puts(&b, "LOG ");
    sb_putn(&b, msg, len);
    add_lookup(c, b.ptr, b.len);
    sb_free(&b);
}

static void put_event(sb_t *o, const foo_result *r) {
    if (!r->has_event) return;
    sb_puts(o, r->event.severity == FOO_NORMAL ? "[\"Normal\"," : "[\"Warning\",");
    sb_put_json_string(o, r->event.reason, strlen(r->event.reason));
    sb_putc(o, ',');
    sb_put_json_string(o, r->event.message, r->event.message_len);
    sb_putc(o, ']');
}

int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) return 2;
        sb_t err;
        sb_init(&err);
        json_value *p = json_parse(line, (size_t)(tab - line), &err);
        json_value *d = json_parse(tab + 1, n - (size_t)(tab + 1 - line), &err);
        if (!p || !d || p->type != JSON_STRING) {
            fprintf(stderr, "bad case line: %s\n", err.ptr ? err.ptr : "");
            return 2;
        }
        ctx_t c = {d, {0}};
        sb_init(&c.lookups);
        foo_result r;
        if (!foo_reconcile(p->str, p->len, lookup, log_fn, &c, &r)) return 3;
        sb_t o;
        sb_init(&o);
        if (r.ok) {
            sb_puts(&o, "{\"apply\":[");
            sb_putn(&o, r.apply, r.apply_len);
            sb_puts(&o, "],\"status\":");
            sb_putn(&o, r.status, r.status_len);
            sb_puts(&o, ",\"events\":[");
            put_event(&o, &r);
            sb_puts(&o, "]");
        } else {
            sb_puts(&o, "{\"err\":");
            sb_put_json_string(&o, r.message, r.message_len);
            sb_puts(&o, ",\"events\":[");
            put_event(&o, &r);
            sb_puts(&o, r.retry ? "],\"retry\":true" : "],\"retry\":false");
        }
        sb_puts(&o, ",\"lookups\":[");
        if (c.lookups.len) sb_putn(&o, c.lookups.ptr, c.lookups.len);
        sb_puts(&o, "]}");
        puts(o.ptr);
        sb_free(&o);
        sb_free(&c.lookups);
        foo_result_free(&r);
        json_free(p);
        json_free(d);
        sb_free(&err);
    }
    return 0;
}
