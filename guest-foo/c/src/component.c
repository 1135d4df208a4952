/*
 * The C Foo reconciler as a kwop:reconciler@0.2 plugin, over the C SDK (wit/c/kwop.h): the port
 * of guest-foo's src/plugin.rs. foo.c has the logic (no WIT, no SDK: it also runs natively in the
 * differential tests); this file declares the plugin and connects reconcile and validate to it.
 * Finalize is the SDK's default (guest-foo does not finalize: its Deployment goes with the Foo).
 */
#include <stdlib.h>
#include <string.h>

#include "foo.h"
#include "kwop.h"

static const kwop_gvk DEPLOYMENT = {"apps", "v1", "Deployment"};
static const kwop_owned OWNS[] = {{{"apps", "v1", "Deployment"}, false}};

const kwop_info kwop_plugin = {
    .name = "guest-foo-c",
    .version = "0.2.0",
    .primary = {"samplecontroller.k8s.io", "v1alpha1", "Foo"},
    .owns = OWNS,
    .owns_len = 1,
    .validates = true,
};

static char *copy_n(const char *s, size_t n) {
    char *c = malloc(n + 1);
    if (!c) kwop_panic("out of memory");
    if (n) memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* cache.get of a Deployment for foo.c (its strings carry lengths) */
static char *lookup(void *ctx, const char *ns, size_t ns_len, const char *name, size_t name_len, size_t *json_len) {
    char *nsz = copy_n(ns, ns_len), *namez = copy_n(name, name_len);
    char *json = kwop_get(ctx, &DEPLOYMENT, nsz, namez);
    free(nsz);
    free(namez);
    if (json) *json_len = strlen(json);
    return json;
}

static void log_error(void *ctx, const char *msg, size_t len) {
    kwop_log(ctx, KWOP_ERROR, "%.*s", (int)len, msg);
}

int kwop_reconcile(const kwop_request *req, kwop_result *out) {
    foo_result r;
    if (!foo_reconcile(req->primary, strlen(req->primary), lookup, log_error, (void *)req->host, &r))
        kwop_panic("out of memory");
    if (r.has_event)
        kwop_add_event(out, r.event.severity == FOO_NORMAL ? KWOP_NORMAL : KWOP_WARNING, r.event.reason, "%.*s",
                   (int)r.event.message_len, r.event.message);
    int rc = KWOP_OK;
    if (r.ok) {
        kwop_apply_take(out, r.apply);
        r.apply = NULL;
        kwop_set_status(out, r.status);
    } else {
        rc = kwop_fail(out, r.retry != 0, "%.*s", (int)r.message_len, r.message);
    }
    foo_result_free(&r);
    return rc;
}

int kwop_validate(const kwop_admission *req, kwop_result *out) {
    foo_admission a;
    if (!foo_admit(req->object, req->old_object, lookup, (void *)req->host, &a)) kwop_panic("out of memory");
    if (a.verdict == FOO_REFUSED) kwop_refuse(out, a.field ? "spec.deploymentName" : NULL, "%s", a.message);
    if (a.verdict == FOO_WARNED) kwop_warn(out, "spec.deploymentName: %s", a.message);
    free(a.message);
    return KWOP_OK;
}
