/* The reconcile logic (see plugin.h); JSON through the small library in json.h. */
#include "plugin.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

static char *copy(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static int fail(plugin_result *out, const char *message, int retry) {
    out->ok = 0;
    out->retry = retry;
    out->warning = 1;
    out->reason = "InvalidSpec";
    out->message = copy(message);
    out->event = copy(message);
    return out->message && out->event;
}

int plugin_reconcile(const char *primary, size_t len, const plugin_host *host, plugin_result *out) {
    memset(out, 0, sizeof *out);
    sb_t err, name, cm, msg;
    sb_init(&err);
    json_value *foo = json_parse(primary, len, &err);
    sb_free(&err);
    if (!foo) return fail(out, "the primary object is not JSON", 0);
    const json_value *meta = json_get(foo, "metadata"), *spec = json_get(foo, "spec");
    const json_value *fname = json_get(meta, "name"), *ns = json_get(meta, "namespace");
    const json_value *deployment = json_get(spec, "deploymentName"), *replicas = json_get(spec, "replicas");
    if (!deployment || deployment->type != JSON_STRING || deployment->len == 0) {
        json_free(foo);
        return fail(out, "spec.deploymentName is required", 0);
    }
    sb_init(&name);
    sb_putn(&name, fname ? fname->str : "", fname ? fname->len : 0);
    sb_puts(&name, "-info");

    size_t n = 0;
    char *existing = host->get(host->ctx, "", "v1", "ConfigMap", ns && ns->type == JSON_STRING ? ns->str : NULL,
                               name.ptr, &n);
    sb_init(&msg);
    sb_puts(&msg, existing ? "updating ConfigMap " : "creating ConfigMap ");
    sb_puts(&msg, name.ptr);
    host->log(host->ctx, LOG_DEBUG, msg.ptr);
    free(existing);
    sb_free(&msg);

    /* The namespace defaults to the Foo's; the host sets the owner reference. */
    sb_init(&cm);
    sb_puts(&cm, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
    sb_put_json_string(&cm, name.ptr, name.len);
    sb_puts(&cm, "},\"data\":{\"foo\":");
    sb_put_json_string(&cm, fname ? fname->str : "", fname ? fname->len : 0);
    sb_puts(&cm, ",\"deploymentName\":");
    sb_put_json_string(&cm, deployment->str, deployment->len);
    sb_puts(&cm, ",\"replicas\":\""); /* ConfigMap data values are strings */
    int64_t r = 1;
    if (replicas && !json_as_i64(replicas, &r)) r = 1;
    sb_put_i64(&cm, r);
    sb_puts(&cm, "\"}}");

    sb_init(&msg);
    sb_puts(&msg, "ConfigMap ");
    sb_puts(&msg, name.ptr);
    sb_puts(&msg, " is up to date");
    int ok = !cm.oom && !msg.oom && !name.oom;
    out->ok = 1;
    out->apply = sb_take(&cm, &out->apply_len);
    out->reason = "Synced";
    out->event = sb_take(&msg, &n);
    sb_free(&name);
    json_free(foo);
    return ok && out->apply && out->event;
}

void plugin_result_free(plugin_result *r) {
    free(r->apply);
    free(r->message);
    free(r->event);
    memset(r, 0, sizeof *r);
}
