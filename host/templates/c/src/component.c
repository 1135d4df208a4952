/*
 * The WASM shell: WIT values in, plugin_reconcile() in the middle, WIT values out, over the
 * bindings `wit-bindgen c` generates into gen/reconciler.h (./build.sh).
 *
 * WIT in C (wit-bindgen c): a record is a struct, `string` and `json` are reconciler_string_t
 * (pointer + length, not NUL-terminated), `list<T>` is {ptr, len}, `option<T>` is {is_some, val},
 * an enum is an integer constant (KWOP_RECONCILER_TYPES_EVENT_TYPE_NORMAL), and
 * `result<outcome, failure>` is the export's bool return: true fills `ret`, false fills `err`.
 * Memory: what we return is freed by the generated post-return code with free(), so every
 * returned string or list is malloc'd (and none of length 0 is allocated); the request is ours
 * to free; a string an import returns was allocated in our memory and is ours to free.
 */
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "reconciler.h"

static reconciler_string_t owned(const char *s) {
    reconciler_string_t r = {NULL, strlen(s)};
    if (r.len == 0) return r;
    r.ptr = malloc(r.len);
    if (!r.ptr) abort();
    memcpy(r.ptr, s, r.len);
    return r;
}

/* Takes over a malloc'd string. */
static reconciler_string_t take(char *s, size_t len) {
    reconciler_string_t r = {(uint8_t *)s, len};
    if (len == 0) {
        free(s);
        r.ptr = NULL;
    }
    return r;
}

static kwop_reconciler_types_gvk_t gvk(const char *group, const char *version, const char *kind) {
    kwop_reconciler_types_gvk_t g = {owned(group), owned(version), owned(kind)};
    return g;
}

void exports_reconciler_info(reconciler_plugin_info_t *ret) {
    ret->name = owned(PLUGIN_NAME);
    ret->version = owned(PLUGIN_VERSION);
    ret->primary = gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    ret->owns.ptr = malloc(sizeof *ret->owns.ptr); /* what it creates: the host lets it write only these */
    if (!ret->owns.ptr) abort();
    ret->owns.ptr[0] = gvk("", "v1", "ConfigMap");
    ret->owns.len = 1;
    ret->reads.ptr = NULL; /* kinds it only reads through the cache */
    ret->reads.len = 0;
}

static reconciler_string_t borrowed(const char *s) {
    reconciler_string_t r = {(uint8_t *)s, strlen(s)};
    return r;
}

static char *host_get(void *ctx, const char *group, const char *version, const char *kind, const char *ns,
                      const char *name, size_t *len) {
    (void)ctx;
    /* borrowed for the call: the import copies them out of our memory */
    kwop_reconciler_cache_gvk_t k = {borrowed(group), borrowed(version), borrowed(kind)};
    reconciler_string_t nsv = ns ? borrowed(ns) : borrowed("");
    reconciler_string_t namev = borrowed(name);
    kwop_reconciler_cache_json_t json;
    if (!kwop_reconciler_cache_get(&k, ns ? &nsv : NULL, &namev, &json)) return NULL;
    char *text = malloc(json.len + 1); /* NUL-terminated copy for the logic */
    if (!text) abort();
    if (json.len) memcpy(text, json.ptr, json.len);
    text[json.len] = '\0';
    free(json.ptr);
    *len = json.len;
    return text;
}

static void host_log(void *ctx, plugin_level level, const char *message) {
    (void)ctx;
    static const kwop_reconciler_log_level_t levels[] = {
        KWOP_RECONCILER_LOG_LEVEL_DEBUG, KWOP_RECONCILER_LOG_LEVEL_INFO, KWOP_RECONCILER_LOG_LEVEL_WARN,
        KWOP_RECONCILER_LOG_LEVEL_ERROR};
    reconciler_string_t m = borrowed(message);
    kwop_reconciler_log_log(levels[level], &m);
}

static kwop_reconciler_types_list_event_t events(plugin_result *r) {
    kwop_reconciler_types_list_event_t list = {malloc(sizeof *list.ptr), 1};
    if (!list.ptr) abort();
    list.ptr[0].severity = r->warning ? KWOP_RECONCILER_TYPES_EVENT_TYPE_WARNING : KWOP_RECONCILER_TYPES_EVENT_TYPE_NORMAL;
    list.ptr[0].reason = owned(r->reason);
    list.ptr[0].message = take(r->event, strlen(r->event));
    r->event = NULL;
    return list;
}

bool exports_reconciler_reconcile(reconciler_request_t *req, reconciler_outcome_t *ret, reconciler_failure_t *err) {
    plugin_host host = {host_get, host_log, NULL};
    plugin_result r;
    if (!plugin_reconcile((const char *)req->primary.ptr, req->primary.len, &host, &r))
        abort(); /* out of memory: a trap, which the host reports as a failed reconcile */
    reconciler_request_free(req);
    if (r.ok) {
        memset(ret, 0, sizeof *ret);
        ret->apply.ptr = malloc(sizeof *ret->apply.ptr);
        if (!ret->apply.ptr) abort();
        ret->apply.ptr[0] = take(r.apply, r.apply_len);
        ret->apply.len = 1;
        r.apply = NULL;
        ret->status.is_some = false; /* e.g. {"availableReplicas":1}: the value of status, not {"status":...} */
        ret->events = events(&r);
        ret->requeue_after_ms.is_some = false;
        plugin_result_free(&r);
        return true;
    }
    memset(err, 0, sizeof *err);
    err->message = take(r.message, strlen(r.message));
    r.message = NULL;
    err->events = events(&r);
    err->retry = r.retry != 0;
    plugin_result_free(&r);
    return false;
}
