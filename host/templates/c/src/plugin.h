/*
 * The reconcile logic: plain C over JSON text, no WIT types, so tests/test_plugin.c runs it
 * natively with a fake cache and log (./test.sh). src/component.c connects it to the host.
 *
 * A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it.
 */
#ifndef PLUGIN_H
#define PLUGIN_H

#include <stddef.h>

#define PLUGIN_NAME "{{name}}"
#define PLUGIN_VERSION "0.1.0"

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } plugin_level;

/* What the plugin can ask of the host. `get` returns malloc'd JSON text (and its length) of one
 * cached object, or NULL; `ns` NULL means the primary's namespace. */
typedef struct {
    char *(*get)(void *ctx, const char *group, const char *version, const char *kind, const char *ns,
                 const char *name, size_t *len);
    void (*log)(void *ctx, plugin_level level, const char *message);
    void *ctx;
} plugin_host;

typedef struct {
    int ok;              /* 1: an outcome, 0: a failure (nothing is written) */
    char *apply;         /* ok: the ConfigMap intent, JSON (malloc'd) */
    size_t apply_len;
    char *message;       /* failure: why (malloc'd) */
    int retry;           /* failure: retry with backoff? */
    int warning;         /* the event: 1 Warning, 0 Normal */
    const char *reason;  /* static */
    char *event;         /* the event's message (malloc'd) */
} plugin_result;

/* One reconcile of the primary given as JSON text. Returns 0 only when out of memory. */
int plugin_reconcile(const char *primary, size_t len, const plugin_host *host, plugin_result *out);
void plugin_result_free(plugin_result *r);

#endif
