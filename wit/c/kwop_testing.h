/*
 * kwop_testing.h: native unit tests of a C plugin, with a fake cache and log (header-only; include
 * it in one test file, compile with kwop.c and json.c, not kwop_wasm.c).
 *
 *     kwop_fake fake;
 *     kwop_fake_init(&fake);
 *     kwop_fake_put(&fake, &(kwop_gvk){"", "v1", "ConfigMap"}, "default", "web-info", "{...}");
 *     kwop_request req = kwop_fake_request(&fake, foo_json, (kwop_instant){1700000000, 0});
 *     kwop_result out;
 *     kwop_result_init(&out);
 *     int rc = kwop_reconcile(&req, &out);      (or kwop_finalize; kwop_validate with
 *                                                kwop_fake_admission)
 *     ... check out.apply[0], out.events, out.failure, fake.log (every line "LEVEL message\n") ...
 *     kwop_result_free(&out);
 *     kwop_fake_free(&fake);
 */
#ifndef KWOP_TESTING_H
#define KWOP_TESTING_H

#include <stdlib.h>
#include <string.h>

#include "kwop.h"

typedef struct {
    char *group, *version, *kind, *ns, *name, *json;
} kwop_fake_object;

typedef struct {
    kwop_fake_object *objects;
    size_t len;
    char *log;     /* every log line, "INFO message\n", NUL-terminated */
    size_t log_len;
    kwop_host host;
} kwop_fake;

static char *kwop_fake_dup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static int kwop_fake_eq(const char *a, const char *b) { return a && b ? strcmp(a, b) == 0 : a == b; }

static char *kwop_fake_get(void *self, const kwop_gvk *kind, const char *ns, const char *name) {
    kwop_fake *f = self;
    for (size_t i = 0; i < f->len; i++) {
        kwop_fake_object *o = &f->objects[i];
        if (kwop_fake_eq(o->group, kind->group) && kwop_fake_eq(o->version, kind->version) &&
            kwop_fake_eq(o->kind, kind->kind) && (!ns || kwop_fake_eq(o->ns, ns)) && kwop_fake_eq(o->name, name))
            return kwop_fake_dup(o->json);
    }
    return NULL;
}

/* Label selectors are not evaluated: every object of the kind (in ns) is returned. */
static char **kwop_fake_query(void *self, const kwop_gvk *kind, const char *ns, const char *selector, size_t *len) {
    kwop_fake *f = self;
    (void)selector;
    char **out = malloc((f->len + 1) * sizeof *out);
    *len = 0;
    for (size_t i = 0; out && i < f->len; i++) {
        kwop_fake_object *o = &f->objects[i];
        if (kwop_fake_eq(o->group, kind->group) && kwop_fake_eq(o->version, kind->version) &&
            kwop_fake_eq(o->kind, kind->kind) && (!ns || kwop_fake_eq(o->ns, ns)))
            out[(*len)++] = kwop_fake_dup(o->json);
    }
    return out;
}

static void kwop_fake_log(void *self, kwop_level level, const char *message) {
    static const char *names[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
    kwop_fake *f = self;
    size_t add = strlen(names[level]) + 1 + strlen(message) + 1;
    char *grown = realloc(f->log, f->log_len + add + 1);
    if (!grown) return;
    f->log = grown;
    f->log_len += (size_t)sprintf(f->log + f->log_len, "%s %s\n", names[level], message);
}

static void kwop_fake_init(kwop_fake *f) {
    memset(f, 0, sizeof *f);
    f->log = calloc(1, 1);
    f->host = (kwop_host){kwop_fake_get, kwop_fake_query, kwop_fake_log, f};
}

/* Puts one object (JSON text, copied) into the fake cache; ns NULL for cluster-scoped. */
static void kwop_fake_put(kwop_fake *f, const kwop_gvk *kind, const char *ns, const char *name, const char *json) {
    kwop_fake_object *grown = realloc(f->objects, (f->len + 1) * sizeof *grown);
    if (!grown) return;
    f->objects = grown;
    f->objects[f->len++] = (kwop_fake_object){kwop_fake_dup(kind->group), kwop_fake_dup(kind->version),
                                              kwop_fake_dup(kind->kind), kwop_fake_dup(ns),
                                              kwop_fake_dup(name), kwop_fake_dup(json)};
}

static void kwop_fake_free(kwop_fake *f) {
    for (size_t i = 0; i < f->len; i++) {
        kwop_fake_object *o = &f->objects[i];
        free(o->group), free(o->version), free(o->kind), free(o->ns), free(o->name), free(o->json);
    }
    free(f->objects);
    free(f->log);
    memset(f, 0, sizeof *f);
}

/* A reconcile/finalize request for `primary` (no owned objects; set .owned yourself). */
static kwop_request kwop_fake_request(kwop_fake *f, const char *primary, kwop_instant now) {
    kwop_request r = {primary, NULL, 0, now, &f->host};
    return r;
}

/* An admission request: old_object NULL means CREATE. */
static kwop_admission kwop_fake_admission(kwop_fake *f, const char *object, const char *old_object) {
    kwop_admission a = {old_object ? KWOP_UPDATE : KWOP_CREATE, object, old_object, "tester", false, {0, 0},
                        &f->host};
    return a;
}

#endif
