/*
 * The WASM shell of the C Foo reconciler: WIT types in, foo_reconcile() in the middle, WIT types
 * out. The port of guest-foo's src/component.rs, over the bindings `wit-bindgen c` generates
 * (gen/reconciler.h).
 *
 * Memory, by the canonical ABI as those bindings implement it:
 * - the export's arguments (the request) belong to us once called: freed before returning;
 * - everything we return is freed by the generated post-return functions (cabi_post_info,
 *   cabi_post_reconcile) with free(), and only where the length is non-zero: so every returned
 *   string or list is malloc'd, and none of zero length is allocated;
 * - a string the host returns from an import (cache.get) was allocated in our memory through
 *   cabi_realloc and is ours to free; what we pass to an import stays ours.
 */
#include <stdlib.h>
#include <string.h>

#include "foo.h"
#include "reconciler.h"

#define PLUGIN_NAME "guest-foo-c"
#define PLUGIN_VERSION "0.1.0"

/* A malloc'd copy for the host to free after the call (nothing allocated when empty). */
static reconciler_string_t owned(const char *s, size_t len) {
    reconciler_string_t r = {NULL, 0};
    if (len == 0) return r;
    r.ptr = malloc(len);
    if (!r.ptr) abort();
    memcpy(r.ptr, s, len);
    r.len = len;
    return r;
}

static reconciler_string_t owned_str(const char *s) { return owned(s, strlen(s)); }

/* Takes over a malloc'd buffer of `len` bytes. */
static reconciler_string_t take(char *s, size_t len) {
    reconciler_string_t r = {(uint8_t *)s, len};
    if (len == 0) {
        free(s);
        r.ptr = NULL;
    }
    return r;
}

static kwop_reconciler_types_gvk_t gvk(const char *group, const char *version, const char *kind) {
    kwop_reconciler_types_gvk_t g = {owned_str(group), owned_str(version), owned_str(kind)};
    return g;
}

void exports_reconciler_info(reconciler_plugin_info_t *ret) {
    ret->name = owned_str(PLUGIN_NAME);
    ret->version = owned_str(PLUGIN_VERSION);
    ret->primary = gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    ret->owns.ptr = malloc(sizeof *ret->owns.ptr);
    if (!ret->owns.ptr) abort();
    ret->owns.ptr[0] = gvk("apps", "v1", "Deployment");
    ret->owns.len = 1;
    ret->reads.ptr = NULL;
    ret->reads.len = 0;
}

/* cache.get for a Deployment; the host's string becomes foo.c's (malloc'd) */
static char *lookup(void *ctx, const char *ns, size_t ns_len, const char *name, size_t name_len,
                    size_t *json_len) {
    (void)ctx;
    /* borrowed for the call: the import copies them out of our memory */
    kwop_reconciler_cache_gvk_t kind = {
        {(uint8_t *)"apps", 4}, {(uint8_t *)"v1", 2}, {(uint8_t *)"Deployment", 10}};
    reconciler_string_t nsv = {(uint8_t *)ns, ns_len};
    reconciler_string_t namev = {(uint8_t *)name, name_len};
    kwop_reconciler_cache_json_t json;
    if (!kwop_reconciler_cache_get(&kind, &nsv, &namev, &json)) return NULL;
    *json_len = json.len;
    if (json.len == 0) { /* nothing was allocated for an empty string */
        char *empty = malloc(1);
        if (!empty) abort();
        return empty;
    }
    return (char *)json.ptr;
}

static void log_error(void *ctx, const char *msg, size_t len) {
    (void)ctx;
    reconciler_string_t m = {(uint8_t *)msg, len};
    kwop_reconciler_log_log(KWOP_RECONCILER_LOG_LEVEL_ERROR, &m);
}

static kwop_reconciler_types_list_event_t events(foo_result *r) {
    kwop_reconciler_types_list_event_t list = {NULL, 0};
    if (!r->has_event) return list;
    list.ptr = malloc(sizeof *list.ptr);
    if (!list.ptr) abort();
    list.ptr[0].severity = r->event.severity == FOO_NORMAL ? KWOP_RECONCILER_TYPES_EVENT_TYPE_NORMAL
                                                           : KWOP_RECONCILER_TYPES_EVENT_TYPE_WARNING;
    list.ptr[0].reason = owned_str(r->event.reason);
    list.ptr[0].message = take(r->event.message, r->event.message_len);
    r->event.message = NULL;
    list.len = 1;
    return list;
}

bool exports_reconciler_reconcile(reconciler_request_t *req, reconciler_outcome_t *ret,
                                  reconciler_failure_t *err) {
    foo_result r;
    if (!foo_reconcile((const char *)req->primary.ptr, req->primary.len, lookup, log_error, NULL,
                       &r))
        abort(); /* out of memory: trap, as the Rust guest would */
    reconciler_request_free(req);

    if (r.ok) {
        memset(ret, 0, sizeof *ret);
        ret->apply.ptr = malloc(sizeof *ret->apply.ptr);
        if (!ret->apply.ptr) abort();
        ret->apply.ptr[0] = take(r.apply, r.apply_len);
        ret->apply.len = 1;
        r.apply = NULL;
        ret->status.is_some = true;
        ret->status.val = take(r.status, r.status_len);
        r.status = NULL;
        ret->events = events(&r);
        ret->requeue_after_ms.is_some = false;
        foo_result_free(&r);
        return true;
    }
    memset(err, 0, sizeof *err);
    err->message = take(r.message, r.message_len);
    r.message = NULL;
    err->events = events(&r);
    err->retry = r.retry != 0;
    foo_result_free(&r);
    return false;
}
