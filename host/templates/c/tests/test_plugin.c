/* Native unit tests of src/plugin.c with a fake cache and log: ./test.sh (cc, no WASM). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/plugin.h"

static const char *cached;  /* the one ConfigMap the fake cache holds, or NULL */
static char logs[1024];

static char *fake_get(void *ctx, const char *group, const char *version, const char *kind, const char *ns,
                      const char *name, size_t *len) {
    (void)ctx; (void)group; (void)version; (void)ns;
    if (!cached || strcmp(kind, "ConfigMap") != 0 || strcmp(name, "example-info") != 0) return NULL;
    *len = strlen(cached);
    char *c = malloc(*len + 1);
    memcpy(c, cached, *len + 1);
    return c;
}

static void fake_log(void *ctx, plugin_level level, const char *message) {
    (void)ctx;
    snprintf(logs + strlen(logs), sizeof logs - strlen(logs), "%d: %s\n", (int)level, message);
}

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static plugin_result run(const char *foo) {
    plugin_host host = {fake_get, fake_log, NULL};
    plugin_result r;
    logs[0] = '\0';
    CHECK(plugin_reconcile(foo, strlen(foo), &host, &r));
    return r;
}

#define FOO(spec) "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\"," \
    "\"metadata\":{\"name\":\"example\",\"namespace\":\"default\",\"uid\":\"u1\"},\"spec\":" spec "}"

int main(void) {
    plugin_result r = run(FOO("{\"deploymentName\":\"web\",\"replicas\":3}"));
    CHECK(r.ok);
    CHECK(strstr(r.apply, "\"name\":\"example-info\"") != NULL);
    CHECK(strstr(r.apply, "\"deploymentName\":\"web\",\"replicas\":\"3\"") != NULL);
    CHECK(strcmp(r.reason, "Synced") == 0 && !r.warning);
    CHECK(strcmp(logs, "0: creating ConfigMap example-info\n") == 0);
    plugin_result_free(&r);

    cached = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"example-info\"}}";
    r = run(FOO("{\"deploymentName\":\"web\"}"));
    CHECK(r.ok && strstr(r.apply, "\"replicas\":\"1\"") != NULL);
    CHECK(strcmp(logs, "0: updating ConfigMap example-info\n") == 0);
    plugin_result_free(&r);

    r = run(FOO("{}"));
    CHECK(!r.ok && !r.retry && r.warning && strcmp(r.reason, "InvalidSpec") == 0);
    CHECK(strcmp(r.message, "spec.deploymentName is required") == 0);
    plugin_result_free(&r);

    printf("%s: %d failed\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
