/*
 * {{name}}: a kwop plugin in C, on the C SDK (src/kwop.h: read its header once).
 *
 * A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap `<name>-info` that describes it
 * (reconcile); when a Foo is deleted the plugin deletes that ConfigMap itself before the Foo goes
 * (finalize); and a Foo without spec.deploymentName is refused before the API server stores it
 * (validate, when the host serves admission). tests/test_plugin.c runs all three natively.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kwop.h"

static const kwop_gvk CONFIG_MAP = {"", "v1", "ConfigMap"};
/* what it creates: the host lets it write only these (true: in other namespaces too) */
static const kwop_owned OWNS[] = {{{"", "v1", "ConfigMap"}, false}};

const kwop_info kwop_plugin = {
    .name = "{{name}}",
    .version = "0.1.0",
    .primary = {"samplecontroller.k8s.io", "v1alpha1", "Foo"},
    .owns = OWNS,
    .owns_len = 1,
    .finalizes = true, /* the host adds the finalizer kwop.dev/{{name}} and calls kwop_finalize */
    .validates = true, /* a host serving admission calls kwop_validate before a Foo is stored */
};

/* A string member of an object, or NULL. */
static const json_value *string_at(const json_value *o, const char *key) {
    const json_value *v = json_get(o, key);
    return v && v->type == JSON_STRING ? v : NULL;
}

static json_value *parse(const char *text) {
    sb_t err;
    sb_init(&err);
    json_value *v = json_parse(text, strlen(text), &err);
    sb_free(&err);
    return v;
}

int kwop_reconcile(const kwop_request *req, kwop_result *out) {
    json_value *foo = parse(req->primary);
    if (!foo) return kwop_fail(out, false, "the primary object is not JSON");
    const json_value *meta = json_get(foo, "metadata"), *spec = json_get(foo, "spec");
    const json_value *name = string_at(meta, "name"), *deployment = string_at(spec, "deploymentName");
    if (!deployment || deployment->len == 0) {
        json_free(foo);
        /* a failure: nothing is written; retry false waits until the Foo changes */
        kwop_add_event(out, KWOP_WARNING, "InvalidSpec", "spec.deploymentName is required");
        return kwop_fail(out, false, "spec.deploymentName is required");
    }
    sb_t cm_name, cm;
    sb_init(&cm_name);
    sb_puts(&cm_name, name ? name->str : "");
    sb_puts(&cm_name, "-info");

    /* NULL namespace: the primary's */
    char *existing = kwop_get(req->host, &CONFIG_MAP, NULL, cm_name.ptr);
    kwop_log(req->host, KWOP_DEBUG, "%s ConfigMap %s", existing ? "updating" : "creating", cm_name.ptr);
    free(existing);

    /* The namespace defaults to the Foo's; the host sets the owner reference. */
    int64_t replicas = 1;
    if (!json_as_i64(json_get(spec, "replicas"), &replicas)) replicas = 1;
    sb_init(&cm);
    sb_puts(&cm, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
    sb_put_json_string(&cm, cm_name.ptr, cm_name.len);
    sb_puts(&cm, "},\"data\":{\"foo\":");
    sb_put_json_string(&cm, name ? name->str : "", name ? name->len : 0);
    sb_puts(&cm, ",\"deploymentName\":");
    sb_put_json_string(&cm, deployment->str, deployment->len);
    sb_puts(&cm, ",\"replicas\":\""); /* ConfigMap data values are strings */
    sb_put_i64(&cm, replicas);
    sb_puts(&cm, "\"}}");
    if (cm.oom || cm_name.oom) kwop_panic("out of memory");
    kwop_apply(out, cm.ptr);
    kwop_add_event(out, KWOP_NORMAL, "Synced", "ConfigMap %s is up to date", cm_name.ptr);
    sb_free(&cm);
    sb_free(&cm_name);
    json_free(foo);
    return KWOP_OK;
}

/* The Foo is being deleted: delete its ConfigMap, then say done (the host removes its
 * finalizer and the API server deletes the Foo). `return kwop_fail(out, true, "...")` instead
 * keeps the Foo, records a Warning FinalizeFailed with that message and tries again later. */
int kwop_finalize(const kwop_request *req, kwop_result *out) {
    json_value *foo = parse(req->primary);
    const json_value *name = string_at(json_get(foo, "metadata"), "name");
    if (!name) {
        json_free(foo);
        return kwop_fail(out, false, "the primary has no metadata.name");
    }
    sb_t cm_name;
    sb_init(&cm_name);
    sb_puts(&cm_name, name->str);
    sb_puts(&cm_name, "-info");
    kwop_delete(out, &CONFIG_MAP, NULL, cm_name.ptr);
    kwop_add_event(out, KWOP_NORMAL, "Finalized", "deleted ConfigMap %s", cm_name.ptr);
    out->done = true;
    sb_free(&cm_name);
    json_free(foo);
    return KWOP_OK;
}

/* Admission: kwop_refuse refuses (kubectl prints the message), kwop_warn allows with a warning.
 * A kwop_fail here is not a refusal: the call fails and the webhook's failurePolicy decides. */
int kwop_validate(const kwop_admission *req, kwop_result *out) {
    json_value *foo = parse(req->object);
    if (!foo) return kwop_fail(out, false, "the object is not JSON");
    const json_value *deployment = string_at(json_get(foo, "spec"), "deploymentName");
    if (!deployment || deployment->len == 0)
        kwop_refuse(out, "spec.deploymentName", "is required: the name this Foo's ConfigMap records");
    json_free(foo);
    return KWOP_OK;
}
