/*
 * kwop_wasm.c: connects kwop.h to the WIT world kwop:reconciler@0.2, over the bindings
 * `wit-bindgen c wit/v0.2 --world reconciler` generates (reconciler.h). Compiled only into the
 * component (build.sh); native tests use kwop_testing.h instead.
 *
 * Memory, by the canonical ABI as those bindings implement it: the export's arguments are ours
 * once called (freed before returning); what we return is freed by the generated post-return
 * functions with free(), only where the length is non-zero, so every returned string or list is
 * malloc'd and none of length zero is allocated; what an import returns is ours to free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kwop.h"
#include "reconciler.h"

/* ---- values out ------------------------------------------------------------------------------ */

static void *must(void *p) {
    if (!p) kwop_panic("out of memory");
    return p;
}

/* A malloc'd copy for the host to free (nothing allocated when empty). */
static reconciler_string_t owned(const char *s) {
    reconciler_string_t r = {NULL, s ? strlen(s) : 0};
    if (r.len) r.ptr = memcpy(must(malloc(r.len)), s, r.len);
    return r;
}

/* Takes over a malloc'd NUL-terminated string. */
static reconciler_string_t take(char *s) {
    reconciler_string_t r = {(uint8_t *)s, s ? strlen(s) : 0};
    if (r.len == 0) {
        free(s);
        r.ptr = NULL;
    }
    return r;
}

static kwop_reconciler_types_gvk_t gvk(const kwop_gvk *k) {
    return (kwop_reconciler_types_gvk_t){owned(k->group), owned(k->version), owned(k->kind)};
}

/* n elements of `size`, malloc'd, or NULL when n is 0. */
static void *array(size_t n, size_t size) { return n ? must(calloc(n, size)) : NULL; }

void exports_reconciler_info(reconciler_plugin_info_t *ret) {
    const kwop_info *p = &kwop_plugin;
    ret->name = owned(p->name);
    ret->version = owned(p->version);
    ret->primary = gvk(&p->primary);
    ret->owns.len = p->owns_len;
    ret->owns.ptr = array(p->owns_len, sizeof *ret->owns.ptr);
    for (size_t i = 0; i < p->owns_len; i++) {
        ret->owns.ptr[i].kind = gvk(&p->owns[i].kind);
        ret->owns.ptr[i].across_namespaces = p->owns[i].across_namespaces;
    }
    ret->reads.len = p->reads_len;
    ret->reads.ptr = array(p->reads_len, sizeof *ret->reads.ptr);
    for (size_t i = 0; i < p->reads_len; i++) ret->reads.ptr[i] = gvk(&p->reads[i]);
    ret->finalizes = p->finalizes;
    ret->validates = p->validates;
}

static kwop_reconciler_types_list_event_t events(kwop_result *r) {
    kwop_reconciler_types_list_event_t list = {array(r->events_len, sizeof(kwop_reconciler_types_event_t)),
                                               r->events_len};
    for (size_t i = 0; i < r->events_len; i++) {
        list.ptr[i].severity = r->events[i].type == KWOP_WARNING ? KWOP_RECONCILER_TYPES_EVENT_TYPE_WARNING
                                                                 : KWOP_RECONCILER_TYPES_EVENT_TYPE_NORMAL;
        list.ptr[i].reason = take(r->events[i].reason);
        list.ptr[i].message = take(r->events[i].message);
        r->events[i].reason = r->events[i].message = NULL;
    }
    return list;
}

static kwop_reconciler_types_list_object_ref_t deletes(kwop_result *r) {
    kwop_reconciler_types_list_object_ref_t list = {
        array(r->deletes_len, sizeof(kwop_reconciler_types_object_ref_t)), r->deletes_len};
    for (size_t i = 0; i < r->deletes_len; i++) {
        kwop_ref *d = &r->deletes[i];
        list.ptr[i].gvk = gvk(&d->kind);
        list.ptr[i].namespace_.is_some = d->ns != NULL;
        list.ptr[i].namespace_.val = owned(d->ns);
        list.ptr[i].name = owned(d->name);
    }
    return list;
}

static kwop_reconciler_types_option_json_t status(kwop_result *r) {
    kwop_reconciler_types_option_json_t s = {r->status != NULL, take(r->status)};
    r->status = NULL;
    return s;
}

static void failure(kwop_result *r, const char *call, reconciler_failure_t *err) {
    memset(err, 0, sizeof *err);
    if (!r->failure) kwop_fail_at(r, r->retry, r->file, r->line, r->function, "%s failed without a message", call);
    /* the place goes to the host's debug log; the message stays exactly what the plugin wrote */
    char where[1200];
    snprintf(where, sizeof where, "%s failed at %s:%d in %s: %s", call, r->file ? r->file : "?", r->line,
             r->function ? r->function : "?", r->failure);
    reconciler_string_t m = owned(where);
    kwop_reconciler_log_log(KWOP_RECONCILER_LOG_LEVEL_DEBUG, &m);
    free(m.ptr);
    err->message = take(r->failure);
    r->failure = NULL;
    err->events = events(r);
    err->retry = r->retry;
}

/* ---- the host: cache and log --------------------------------------------------------------- */

static reconciler_string_t borrowed(const char *s) {
    return (reconciler_string_t){(uint8_t *)s, s ? strlen(s) : 0};
}

/* A NUL-terminated copy; frees s, which was allocated only when non-empty (an empty string's
 * pointer is whatever cabi_realloc answered for 0 bytes, not a heap block). */
static char *text(reconciler_string_t s) {
    char *t = must(malloc(s.len + 1));
    if (s.len) memcpy(t, s.ptr, s.len);
    t[s.len] = '\0';
    if (s.len) free(s.ptr);
    return t;
}

static char *host_get(void *self, const kwop_gvk *kind, const char *ns, const char *name) {
    (void)self;
    kwop_reconciler_cache_gvk_t k = {borrowed(kind->group), borrowed(kind->version), borrowed(kind->kind)};
    reconciler_string_t nsv = borrowed(ns), namev = borrowed(name);
    kwop_reconciler_cache_json_t json;
    if (!kwop_reconciler_cache_get(&k, ns ? &nsv : NULL, &namev, &json)) return NULL;
    return text(json);
}

static char **host_query(void *self, const kwop_gvk *kind, const char *ns, const char *selector, size_t *len) {
    (void)self;
    kwop_reconciler_cache_gvk_t k = {borrowed(kind->group), borrowed(kind->version), borrowed(kind->kind)};
    reconciler_string_t nsv = borrowed(ns), sel = borrowed(selector);
    kwop_reconciler_cache_list_json_t list;
    kwop_reconciler_cache_query(&k, ns ? &nsv : NULL, selector ? &sel : NULL, &list);
    char **out = must(malloc((list.len + 1) * sizeof *out));
    for (size_t i = 0; i < list.len; i++) out[i] = text(list.ptr[i]);
    if (list.len) free(list.ptr);
    *len = list.len;
    return out;
}

static void host_log(void *self, kwop_level level, const char *message) {
    (void)self;
    reconciler_string_t m = borrowed(message);
    kwop_reconciler_log_log((kwop_reconciler_log_level_t)level, &m);
}

static const kwop_host HOST = {host_get, host_query, host_log, NULL};

/* ---- values in ------------------------------------------------------------------------------- */

typedef struct {
    kwop_request req;
    char **owned;
} request_in;

static void request_from(reconciler_request_t *w, request_in *in) {
    in->owned = must(malloc((w->owned.len + 1) * sizeof *in->owned));
    for (size_t i = 0; i < w->owned.len; i++) {
        in->owned[i] = text(w->owned.ptr[i]);
        w->owned.ptr[i] = (reconciler_string_t){NULL, 0};
    }
    in->req.owned = (const char *const *)in->owned;
    in->req.owned_len = w->owned.len;
    in->req.primary = text(w->primary);
    w->primary = (reconciler_string_t){NULL, 0};
    in->req.now = (kwop_instant){w->now.seconds, w->now.nanoseconds};
    in->req.host = &HOST;
    reconciler_request_free(w);
}

static void request_free(request_in *in) {
    kwop_strings_free(in->owned, in->req.owned_len);
    free((char *)in->req.primary);
}

/* ---- exports --------------------------------------------------------------------------------- */

bool exports_reconciler_reconcile(reconciler_request_t *req, reconciler_outcome_t *ret, reconciler_failure_t *err) {
    request_in in;
    request_from(req, &in);
    kwop_result r;
    kwop_result_init(&r);
    int rc = kwop_reconcile(&in.req, &r);
    request_free(&in);
    bool ok = rc == KWOP_OK && !r.failure;
    if (ok) {
        memset(ret, 0, sizeof *ret);
        ret->apply.len = r.apply_len;
        ret->apply.ptr = array(r.apply_len, sizeof *ret->apply.ptr);
        for (size_t i = 0; i < r.apply_len; i++) {
            ret->apply.ptr[i] = take(r.apply[i]);
            r.apply[i] = NULL;
        }
        ret->delete_ = deletes(&r);
        ret->status = status(&r);
        ret->events = events(&r);
        ret->requeue_after_ms = (reconciler_option_u64_t){r.requeue, r.requeue_after_ms};
    } else {
        failure(&r, "reconcile", err);
    }
    kwop_result_free(&r);
    return ok;
}

bool exports_reconciler_finalize(reconciler_request_t *req, reconciler_finalize_outcome_t *ret,
                                 reconciler_failure_t *err) {
    request_in in;
    request_from(req, &in);
    kwop_result r;
    kwop_result_init(&r);
    int rc = kwop_finalize(&in.req, &r);
    request_free(&in);
    bool ok = rc == KWOP_OK && !r.failure;
    if (ok) {
        memset(ret, 0, sizeof *ret);
        ret->delete_ = deletes(&r);
        ret->status = status(&r);
        ret->events = events(&r);
        ret->done = r.done;
        ret->requeue_after_ms = (reconciler_option_u64_t){r.requeue, r.requeue_after_ms};
    } else {
        failure(&r, "finalize", err);
    }
    kwop_result_free(&r);
    return ok;
}

bool exports_reconciler_validate(reconciler_admission_request_t *req, reconciler_list_string_t *ret,
                                 reconciler_list_violation_t *err) {
    kwop_admission a = {
        .operation = req->operation == KWOP_RECONCILER_TYPES_OPERATION_UPDATE ? KWOP_UPDATE : KWOP_CREATE,
        .object = text(req->object),
        .old_object = req->old_object.is_some ? text(req->old_object.val) : NULL,
        .user = text(req->user),
        .dry_run = req->dry_run,
        .now = {req->now.seconds, req->now.nanoseconds},
        .host = &HOST,
    };
    /* the strings were taken over by text() */
    kwop_result r;
    kwop_result_init(&r);
    int rc = kwop_validate(&a, &r);
    free((char *)a.object);
    free((char *)a.old_object);
    free((char *)a.user);
    if (rc != KWOP_OK || r.failure) {
        /* An error is not a refusal: the call fails, and the webhook's failurePolicy decides. */
        kwop_panic_at(r.file ? r.file : "?", r.line, r.function ? r.function : "kwop_validate", "%s",
                      r.failure ? r.failure : "kwop_validate failed without a message");
    }
    if (r.violations_len) {
        err->len = r.violations_len;
        err->ptr = array(r.violations_len, sizeof *err->ptr);
        for (size_t i = 0; i < r.violations_len; i++) {
            err->ptr[i].field.is_some = r.violations[i].field != NULL;
            err->ptr[i].field.val = take(r.violations[i].field);
            err->ptr[i].message = take(r.violations[i].message);
            r.violations[i].field = r.violations[i].message = NULL;
        }
        kwop_result_free(&r);
        return false;
    }
    ret->len = r.warnings_len;
    ret->ptr = array(r.warnings_len, sizeof *ret->ptr);
    for (size_t i = 0; i < r.warnings_len; i++) {
        ret->ptr[i] = take(r.warnings[i]);
        r.warnings[i] = NULL;
    }
    kwop_result_free(&r);
    return true;
}

/* assert() from <assert.h>: a panic record the host reads, instead of wasi-libc's own line. */
_Noreturn void __assert_fail(const char *expr, const char *file, int line, const char *function) {
    kwop_panic_at(file, line, function, "assertion failed: %s", expr);
}
