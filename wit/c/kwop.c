/*
 * kwop.c: the portable part of the C SDK (kwop.h): results, errors, panics, conditions and the
 * default finalize and validate. Runs natively (unit tests) and in the component alike.
 */
#include "kwop.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static void *grow(void *ptr, size_t len, size_t size) {
    void *p = realloc(ptr, (len + 1) * size);
    if (!p) kwop_panic("out of memory");
    return p;
}

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (!c) kwop_panic("out of memory");
    memcpy(c, s, n);
    return c;
}

static char *vformat(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        va_end(again);
        return dup(fmt);
    }
    char *s = malloc((size_t)n + 1);
    if (!s) kwop_panic("out of memory");
    vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

/* ---- host ---------------------------------------------------------------------------------- */

char *kwop_get(const kwop_host *host, const kwop_gvk *kind, const char *ns, const char *name) {
    return host && host->get ? host->get(host->self, kind, ns, name) : NULL;
}

char **kwop_query(const kwop_host *host, const kwop_gvk *kind, const char *ns, const char *selector, size_t *len) {
    *len = 0;
    return host && host->query ? host->query(host->self, kind, ns, selector, len) : NULL;
}

void kwop_strings_free(char **list, size_t len) {
    for (size_t i = 0; i < len; i++) free(list[i]);
    free(list);
}

void kwop_log(const kwop_host *host, kwop_level level, const char *fmt, ...) {
    if (!host || !host->log) return;
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    host->log(host->self, level, m);
    free(m);
}

/* ---- results ------------------------------------------------------------------------------- */

void kwop_result_init(kwop_result *r) { memset(r, 0, sizeof *r); }

void kwop_result_free(kwop_result *r) {
    kwop_strings_free(r->apply, r->apply_len);
    for (size_t i = 0; i < r->deletes_len; i++) {
        kwop_ref *d = &r->deletes[i];
        free((char *)d->kind.group);
        free((char *)d->kind.version);
        free((char *)d->kind.kind);
        free(d->ns);
        free(d->name);
    }
    free(r->deletes);
    free(r->status);
    for (size_t i = 0; i < r->events_len; i++) {
        free(r->events[i].reason);
        free(r->events[i].message);
    }
    free(r->events);
    kwop_strings_free(r->warnings, r->warnings_len);
    for (size_t i = 0; i < r->violations_len; i++) {
        free(r->violations[i].field);
        free(r->violations[i].message);
    }
    free(r->violations);
    free(r->failure);
    kwop_result_init(r);
}

void kwop_apply_take(kwop_result *r, char *json) {
    r->apply = grow(r->apply, r->apply_len, sizeof *r->apply);
    r->apply[r->apply_len++] = json;
}

void kwop_apply(kwop_result *r, const char *json) { kwop_apply_take(r, dup(json)); }

void kwop_delete(kwop_result *r, const kwop_gvk *kind, const char *ns, const char *name) {
    r->deletes = grow(r->deletes, r->deletes_len, sizeof *r->deletes);
    kwop_ref *d = &r->deletes[r->deletes_len++];
    d->kind.group = dup(kind->group);
    d->kind.version = dup(kind->version);
    d->kind.kind = dup(kind->kind);
    d->ns = ns ? dup(ns) : NULL;
    d->name = dup(name);
}

void kwop_set_status(kwop_result *r, const char *json) {
    free(r->status);
    r->status = dup(json);
}

void kwop_add_event(kwop_result *r, kwop_event_type type, const char *reason, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    r->events = grow(r->events, r->events_len, sizeof *r->events);
    r->events[r->events_len++] = (kwop_event){type, dup(reason), m};
}

void kwop_requeue_after(kwop_result *r, uint64_t ms) {
    r->requeue = true;
    r->requeue_after_ms = ms;
}

void kwop_warn(kwop_result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    r->warnings = grow(r->warnings, r->warnings_len, sizeof *r->warnings);
    r->warnings[r->warnings_len++] = m;
}

void kwop_refuse(kwop_result *r, const char *field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    r->violations = grow(r->violations, r->violations_len, sizeof *r->violations);
    r->violations[r->violations_len++] = (kwop_violation){field ? dup(field) : NULL, m};
}

int kwop_fail_at(kwop_result *r, bool retry, const char *file, int line, const char *function, const char *fmt,
                 ...) {
    va_list ap;
    va_start(ap, fmt);
    free(r->failure);
    r->failure = vformat(fmt, ap);
    va_end(ap);
    r->retry = retry;
    r->file = file;
    r->line = line;
    r->function = function;
    return KWOP_FAILED;
}

_Noreturn void kwop_panic_at(const char *file, int line, const char *function, const char *fmt, ...) {
    char message[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    /* The host reads this record as it reads a Rust panic: the message, then where. */
    fprintf(stderr, "panicked at %s:%d in %s:\n%s\n", file, line, function, message);
    fflush(stderr);
    abort();
}

/* ---- defaults ------------------------------------------------------------------------------ */

/* A plugin that does not finalize (kwop_plugin.finalizes false) is never called for it. */
__attribute__((weak)) int kwop_finalize(const kwop_request *req, kwop_result *out) {
    (void)req;
    out->done = true;
    return KWOP_OK;
}

/* A plugin that does not validate allows everything. */
__attribute__((weak)) int kwop_validate(const kwop_admission *req, kwop_result *out) {
    (void)req;
    (void)out;
    return KWOP_OK;
}

/* ---- conditions ---------------------------------------------------------------------------- */

static json_value *parse(const char *text) {
    if (!text) return NULL;
    sb_t err;
    sb_init(&err);
    json_value *v = json_parse(text, strlen(text), &err);
    sb_free(&err);
    return v;
}

int64_t kwop_generation(const char *object) {
    json_value *v = parse(object);
    int64_t g = 0;
    if (!json_as_i64(json_get(json_get(v, "metadata"), "generation"), &g)) g = 0;
    json_free(v);
    return g;
}

static char *member(const json_value *o, const char *key) {
    const json_value *s = json_get(o, key);
    return dup(s && s->type == JSON_STRING ? s->str : "");
}

kwop_conditions kwop_conditions_of(const char *object) {
    kwop_conditions c = {NULL, 0};
    json_value *v = parse(object);
    const json_value *list = json_get(json_get(v, "status"), "conditions");
    for (size_t i = 0; list && list->type == JSON_ARRAY && i < list->len; i++) {
        const json_value *o = &list->items[i];
        if (o->type != JSON_OBJECT) continue;
        c.items = grow(c.items, c.len, sizeof *c.items);
        kwop_condition *k = &c.items[c.len++];
        k->type = member(o, "type");
        k->status = member(o, "status");
        k->reason = member(o, "reason");
        k->message = member(o, "message");
        k->last_transition_time = member(o, "lastTransitionTime");
        if (!json_as_i64(json_get(o, "observedGeneration"), &k->observed_generation)) k->observed_generation = 0;
    }
    json_free(v);
    return c;
}

const kwop_condition *kwop_condition_find(const kwop_conditions *c, const char *type) {
    for (size_t i = 0; i < c->len; i++)
        if (strcmp(c->items[i].type, type) == 0) return &c->items[i];
    return NULL;
}

static void condition_free(kwop_condition *k) {
    free(k->type);
    free(k->status);
    free(k->reason);
    free(k->message);
    free(k->last_transition_time);
}

void kwop_condition_set(kwop_conditions *c, const char *type, const char *status, const char *reason,
                        const char *message, int64_t observed_generation, kwop_instant now) {
    kwop_condition *k = (kwop_condition *)kwop_condition_find(c, type);
    char when[21];
    kwop_rfc3339(now, when);
    char *time = NULL;
    if (k) {
        time = strcmp(k->status, status) == 0 && k->last_transition_time[0] ? dup(k->last_transition_time) : dup(when);
        condition_free(k);
    } else {
        c->items = grow(c->items, c->len, sizeof *c->items);
        k = &c->items[c->len++];
        time = dup(when);
    }
    *k = (kwop_condition){dup(type), dup(status), dup(reason), dup(message), time, observed_generation};
}

char *kwop_conditions_json(const kwop_conditions *c) {
    sb_t b;
    sb_init(&b);
    sb_putc(&b, '[');
    for (size_t i = 0; i < c->len; i++) {
        const kwop_condition *k = &c->items[i];
        const char *keys[] = {"lastTransitionTime", "message", "reason", "status", "type"};
        const char *vals[] = {k->last_transition_time, k->message, k->reason, k->status, k->type};
        sb_puts(&b, i ? ",{" : "{");
        for (int j = 0; j < 5; j++) {
            if (j == 2) {
                sb_puts(&b, "\"observedGeneration\":");
                sb_put_i64(&b, k->observed_generation);
                sb_putc(&b, ',');
            }
            sb_put_json_string(&b, keys[j], strlen(keys[j]));
            sb_putc(&b, ':');
            sb_put_json_string(&b, vals[j], strlen(vals[j]));
            if (j < 4) sb_putc(&b, ',');
        }
        sb_putc(&b, '}');
    }
    sb_putc(&b, ']');
    size_t n;
    char *s = sb_take(&b, &n);
    if (!s || b.oom) kwop_panic("out of memory");
    return s;
}

void kwop_conditions_free(kwop_conditions *c) {
    for (size_t i = 0; i < c->len; i++) condition_free(&c->items[i]);
    free(c->items);
    c->items = NULL;
    c->len = 0;
}

void kwop_rfc3339(kwop_instant now, char buf[21]) {
    /* civil-from-days (Howard Hinnant), no gmtime: the same natively and in the sandbox */
    int64_t secs = (int64_t)now.seconds, days = secs / 86400, rem = secs % 86400;
    days += 719468;
    int64_t era = days / 146097, doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) y++;
    unsigned v[6] = {(unsigned)(y % 10000), (unsigned)m, (unsigned)d, (unsigned)(rem / 3600),
                     (unsigned)(rem % 3600 / 60), (unsigned)(rem % 60)};
    char *p = buf;
    for (int i = 0; i < 6; i++) {
        if (i == 0) {
            *p++ = (char)('0' + v[0] / 1000), *p++ = (char)('0' + v[0] / 100 % 10);
        }
        *p++ = (char)('0' + v[i] / 10 % 10), *p++ = (char)('0' + v[i] % 10);
        *p++ = "--T::Z"[i];
    }
    *p = '\0';
}
