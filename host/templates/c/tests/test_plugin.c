/* Native unit tests of src/plugin.c with the SDK's fake cache and log (src/kwop_testing.h):
 * ./test.sh (cc, no WASM). One block per export: reconcile, finalize, validate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kwop.h"
#include "kwop_testing.h"

static int failures;
#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                \
            failures++;                                                                              \
        }                                                                                            \
    } while (0)

#define FOO(spec)                                                                                    \
    "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\","                         \
    "\"metadata\":{\"name\":\"example\",\"namespace\":\"default\",\"uid\":\"u1\"},\"spec\":" spec "}"

static const kwop_gvk CONFIG_MAP = {"", "v1", "ConfigMap"};
static const kwop_instant NOW = {1767323045, 0};

static void reconcile(void) {
    kwop_fake fake;
    kwop_fake_init(&fake);
    kwop_request req = kwop_fake_request(&fake, FOO("{\"deploymentName\":\"web\",\"replicas\":3}"), NOW);
    kwop_result out;
    kwop_result_init(&out);
    CHECK(kwop_reconcile(&req, &out) == KWOP_OK);
    CHECK(out.apply_len == 1 && strstr(out.apply[0], "\"name\":\"example-info\""));
    CHECK(out.apply_len == 1 && strstr(out.apply[0], "\"deploymentName\":\"web\",\"replicas\":\"3\""));
    CHECK(out.events_len == 1 && out.events[0].type == KWOP_NORMAL && strcmp(out.events[0].reason, "Synced") == 0);
    CHECK(strcmp(fake.log, "DEBUG creating ConfigMap example-info\n") == 0);
    kwop_result_free(&out);

    kwop_fake_put(&fake, &CONFIG_MAP, "default", "example-info", "{\"kind\":\"ConfigMap\"}");
    req = kwop_fake_request(&fake, FOO("{\"deploymentName\":\"web\"}"), NOW);
    kwop_result_init(&out);
    CHECK(kwop_reconcile(&req, &out) == KWOP_OK && strstr(out.apply[0], "\"replicas\":\"1\""));
    CHECK(strstr(fake.log, "DEBUG updating ConfigMap example-info\n") != NULL);
    kwop_result_free(&out);

    req = kwop_fake_request(&fake, FOO("{}"), NOW);
    kwop_result_init(&out);
    CHECK(kwop_reconcile(&req, &out) == KWOP_FAILED && !out.retry);
    CHECK(out.failure && strcmp(out.failure, "spec.deploymentName is required") == 0);
    CHECK(out.events_len == 1 && out.events[0].type == KWOP_WARNING && strcmp(out.events[0].reason, "InvalidSpec") == 0);
    kwop_result_free(&out);
    kwop_fake_free(&fake);
}

static void finalize(void) {
    kwop_fake fake;
    kwop_fake_init(&fake);
    kwop_request req = kwop_fake_request(&fake, FOO("{\"deploymentName\":\"web\"}"), NOW);
    kwop_result out;
    kwop_result_init(&out);
    CHECK(kwop_finalize(&req, &out) == KWOP_OK && out.done);
    CHECK(out.deletes_len == 1 && strcmp(out.deletes[0].name, "example-info") == 0 && out.deletes[0].ns == NULL);
    CHECK(out.deletes_len == 1 && strcmp(out.deletes[0].kind.kind, "ConfigMap") == 0);
    kwop_result_free(&out);
    kwop_fake_free(&fake);
}

static void validate(void) {
    kwop_fake fake;
    kwop_fake_init(&fake);
    kwop_admission a = kwop_fake_admission(&fake, FOO("{\"deploymentName\":\"web\"}"), NULL);
    kwop_result out;
    kwop_result_init(&out);
    CHECK(kwop_validate(&a, &out) == KWOP_OK && out.violations_len == 0 && out.warnings_len == 0);
    kwop_result_free(&out);

    a = kwop_fake_admission(&fake, FOO("{\"replicas\":2}"), NULL);
    kwop_result_init(&out);
    CHECK(kwop_validate(&a, &out) == KWOP_OK && out.violations_len == 1);
    CHECK(out.violations_len == 1 && strcmp(out.violations[0].field, "spec.deploymentName") == 0);
    kwop_result_free(&out);
    kwop_fake_free(&fake);
}

int main(void) {
    reconcile();
    finalize();
    validate();
    printf("%s: %d failed\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
