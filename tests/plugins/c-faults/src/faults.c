/*
 * c-faults: a C plugin (the C SDK, kwop:reconciler@0.2) that fails on request, for
 * tests/tests/lang_c.rs. Its primary is the Foo; the annotation `kwop.test/fault` picks the fault:
 *
 *   reconcile  "panic"  kwop_panic     "reconcile exploded for <name>"
 *              "assert" assert()       the expression, file and line
 *              "fail"   kwop_fail      "backend unreachable for <name>" (retried)
 *   finalize   "finalize-fail"         kwop_fail "cleanup backend unavailable" (deletion waits)
 *   validate   spec.deploymentName "explode": kwop_fail "validator lost its rules for <name>" (an
 *              error, not a refusal: failurePolicy decides); "refuse": refused
 *
 * Without a fault it applies a ConfigMap `<name>-c` and, on deletion, finalizes at once.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kwop.h"

static const kwop_owned OWNS[] = {{{"", "v1", "ConfigMap"}, false}};

const kwop_info kwop_plugin = {
    .name = "c-faults",
    .version = "0.1.0",
    .primary = {"samplecontroller.k8s.io", "v1alpha1", "Foo"},
    .owns = OWNS,
    .owns_len = 1,
    .finalizes = true,
    .validates = true,
};

typedef struct {
    json_value *doc;
    const char *name, *fault, *deployment;
} foo_t;

static const char *str_at(const json_value *o, const char *key) {
    const json_value *v = json_get(o, key);
    return v && v->type == JSON_STRING ? v->str : "";
}

static foo_t read_foo(const char *text) {
    sb_t err;
    sb_init(&err);
    foo_t f = {json_parse(text, strlen(text), &err), "", "", ""};
    sb_free(&err);
    if (!f.doc) kwop_panic("the Foo is not JSON");
    const json_value *meta = json_get(f.doc, "metadata");
    f.name = str_at(meta, "name");
    f.fault = str_at(json_get(meta, "annotations"), "kwop.test/fault");
    f.deployment = str_at(json_get(f.doc, "spec"), "deploymentName");
    return f;
}

int kwop_reconcile(const kwop_request *req, kwop_result *out) {
    foo_t f = read_foo(req->primary);
    int rc = KWOP_OK;
    if (strcmp(f.fault, "panic") == 0) kwop_panic("reconcile exploded for %s", f.name);
    assert(strcmp(f.fault, "assert") != 0);
    if (strcmp(f.fault, "fail") == 0) {
        rc = kwop_fail(out, true, "backend unreachable for %s", f.name);
    } else {
        sb_t cm;
        sb_init(&cm);
        sb_puts(&cm, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"");
        sb_puts(&cm, f.name);
        sb_puts(&cm, "-c\"},\"data\":{\"fault\":");
        sb_put_json_string(&cm, f.fault, strlen(f.fault));
        sb_puts(&cm, "}}");
        kwop_apply(out, cm.ptr);
        sb_free(&cm);
        kwop_add_event(out, KWOP_NORMAL, "Synced", "ConfigMap %s-c is up to date", f.name);
    }
    json_free(f.doc);
    return rc;
}

int kwop_finalize(const kwop_request *req, kwop_result *out) {
    foo_t f = read_foo(req->primary);
    int rc = KWOP_OK;
    if (strcmp(f.fault, "finalize-fail") == 0)
        rc = kwop_fail(out, true, "cleanup backend unavailable");
    else
        out->done = true;
    json_free(f.doc);
    return rc;
}

int kwop_validate(const kwop_admission *req, kwop_result *out) {
    foo_t f = read_foo(req->object);
    int rc = KWOP_OK;
    if (strcmp(f.deployment, "explode") == 0) rc = kwop_fail(out, false, "validator lost its rules for %s", f.name);
    if (strcmp(f.deployment, "refuse") == 0) kwop_refuse(out, "spec.deploymentName", "c-faults refuses %s", f.name);
    json_free(f.doc);
    return rc;
}
