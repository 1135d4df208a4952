/* Native tests of the C SDK (kwop.c, kwop_testing.h): ./test.sh. A small plugin below uses every
 * helper; the checks read its results the way the WIT glue (kwop_wasm.c) does. */
#include <stdio.h>
#include <string.h>

#include "../kwop.h"
#include "../kwop_testing.h"

static const kwop_owned OWNS[] = {{{"", "v1", "ConfigMap"}, true}};
const kwop_info kwop_plugin = {.name = "sdk-test", .version = "1", .primary = {"example.com", "v1", "Thing"},
                               .owns = OWNS, .owns_len = 1, .finalizes = true, .validates = true};

static const kwop_gvk CM = {"", "v1", "ConfigMap"};

int kwop_reconcile(const kwop_request *req, kwop_result *out) {
    char *seen = kwop_get(req->host, &CM, "other", "copy");
    kwop_log(req->host, KWOP_INFO, "copy %s", seen ? "found" : "missing");
    free(seen);
    if (strstr(req->primary, "\"broken\"")) return kwop_fail(out, true, "backend %s unavailable", "db");
    kwop_apply(out, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"copy\",\"namespace\":\"other\"}}");
    kwop_conditions c = kwop_conditions_of(req->primary);
    kwop_condition_set(&c, "Ready", "True", "Copied", "1 copy", kwop_generation(req->primary), req->now);
    char *list = kwop_conditions_json(&c);
    char status[512];
    snprintf(status, sizeof status, "{\"conditions\":%s,\"observedGeneration\":%lld}", list,
             (long long)kwop_generation(req->primary));
    kwop_set_status(out, status);
    free(list);
    kwop_conditions_free(&c);
    kwop_add_event(out, KWOP_NORMAL, "Copied", "%d copy", 1);
    kwop_requeue_after(out, 5000);
    return KWOP_OK;
}

int kwop_finalize(const kwop_request *req, kwop_result *out) {
    if (strstr(req->primary, "\"stuck\"")) return kwop_fail(out, true, "cleanup backend unavailable");
    kwop_delete(out, &CM, "other", "copy");
    out->done = true;
    return KWOP_OK;
}

int kwop_validate(const kwop_admission *req, kwop_result *out) {
    if (strstr(req->object, "\"bad\"")) kwop_refuse(out, "spec.name", "%s is not allowed", "bad");
    if (req->old_object) kwop_warn(out, "updated by %s", req->user);
    return KWOP_OK;
}

static int failures;
#define CHECK(cond)                                                                                              \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                            \
            failures++;                                                                                          \
        }                                                                                                        \
    } while (0)

#define THING(extra) "{\"metadata\":{\"name\":\"t\",\"generation\":3" extra "}}"

int main(void) {
    kwop_fake fake;
    kwop_fake_init(&fake);
    kwop_instant now = {1767323045, 0}; /* 2026-01-02T03:04:05Z */
    kwop_result out;

    /* reconcile: apply, status with a new condition at `now`, an event, a requeue, the log */
    kwop_request req = kwop_fake_request(&fake, THING(""), now);
    kwop_result_init(&out);
    CHECK(kwop_reconcile(&req, &out) == KWOP_OK && !out.failure);
    CHECK(out.apply_len == 1 && strstr(out.apply[0], "\"namespace\":\"other\""));
    CHECK(out.status && strstr(out.status, "\"lastTransitionTime\":\"2026-01-02T03:04:05Z\""));
    CHECK(out.status && strstr(out.status, "\"observedGeneration\":3,\"reason\":\"Copied\",\"status\":\"True\""));
    CHECK(out.events_len == 1 && out.events[0].type == KWOP_NORMAL && strcmp(out.events[0].message, "1 copy") == 0);
    CHECK(out.requeue && out.requeue_after_ms == 5000);
    CHECK(strcmp(fake.log, "INFO copy missing\n") == 0);
    kwop_result_free(&out);

    /* the cache answers; an unchanged condition keeps its transition time */
    kwop_fake_put(&fake, &CM, "other", "copy", "{\"kind\":\"ConfigMap\"}");
    req = kwop_fake_request(&fake,
                            "{\"metadata\":{\"generation\":4},\"status\":{\"conditions\":[{\"type\":\"Ready\","
                            "\"status\":\"True\",\"lastTransitionTime\":\"2020-01-01T00:00:00Z\"}]}}",
                            (kwop_instant){1767323999, 0});
    kwop_result_init(&out);
    CHECK(kwop_reconcile(&req, &out) == KWOP_OK);
    CHECK(out.status && strstr(out.status, "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\""));
    CHECK(out.status && strstr(out.status, "\"observedGeneration\":4"));
    CHECK(strstr(fake.log, "INFO copy found\n") != NULL);
    kwop_result_free(&out);

    /* a status change moves lastTransitionTime */
    kwop_conditions c = kwop_conditions_of("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                                           "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\"}]}}");
    kwop_condition_set(&c, "Ready", "False", "Lost", "gone", 1, now);
    CHECK(c.len == 1 && strcmp(kwop_condition_find(&c, "Ready")->last_transition_time, "2026-01-02T03:04:05Z") == 0);
    kwop_conditions_free(&c);
    char when[21];
    kwop_rfc3339((kwop_instant){951782400, 0}, when); /* a leap day */
    CHECK(strcmp(when, "2000-02-29T00:00:00Z") == 0);

    /* kwop_fail: the message as written, retry, and where */
    req = kwop_fake_request(&fake, THING(",\"labels\":{\"x\":\"broken\"}"), now);
    kwop_result_init(&out);
    CHECK(kwop_reconcile(&req, &out) == KWOP_FAILED);
    CHECK(out.failure && strcmp(out.failure, "backend db unavailable") == 0 && out.retry);
    CHECK(out.file && strstr(out.file, "test_kwop.c") && out.function && strcmp(out.function, "kwop_reconcile") == 0);
    kwop_result_free(&out);

    /* finalize: deletes and done, or a failure */
    kwop_result_init(&out);
    CHECK(kwop_finalize(&req, &out) == KWOP_OK && out.done && out.deletes_len == 1);
    CHECK(strcmp(out.deletes[0].name, "copy") == 0 && strcmp(out.deletes[0].ns, "other") == 0);
    kwop_result_free(&out);
    req = kwop_fake_request(&fake, THING(",\"labels\":{\"x\":\"stuck\"}"), now);
    kwop_result_init(&out);
    CHECK(kwop_finalize(&req, &out) == KWOP_FAILED && strcmp(out.failure, "cleanup backend unavailable") == 0);
    CHECK(!out.done);
    kwop_result_free(&out);

    /* validate: refused with a field, or allowed with a warning on UPDATE */
    kwop_admission a = kwop_fake_admission(&fake, "{\"spec\":{\"name\":\"bad\"}}", NULL);
    kwop_result_init(&out);
    CHECK(kwop_validate(&a, &out) == KWOP_OK && out.violations_len == 1);
    CHECK(strcmp(out.violations[0].field, "spec.name") == 0 && strcmp(out.violations[0].message, "bad is not allowed") == 0);
    kwop_result_free(&out);
    a = kwop_fake_admission(&fake, "{}", "{}");
    kwop_result_init(&out);
    CHECK(kwop_validate(&a, &out) == KWOP_OK && a.operation == KWOP_UPDATE && out.violations_len == 0);
    CHECK(out.warnings_len == 1 && strcmp(out.warnings[0], "updated by tester") == 0);
    kwop_result_free(&out);

    kwop_fake_free(&fake);
    printf("%s: %d failed\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
