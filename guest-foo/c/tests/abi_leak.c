/* Native check of the canonical-ABI memory contract (tests/abi_leak.sh): runs the generated
 * export glue (gen/reconciler.c), the C SDK's glue (wit/c/kwop_wasm.c) and src/component.c as the
 * host would — arguments allocated
 * with cabi_realloc and handed over, results read and then released by the post-return
 * functions, cache.get answers allocated with cabi_realloc — under LeakSanitizer. Any
 * allocation not freed by the end is reported and fails the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reconciler.h"

void *cabi_realloc(void *ptr, size_t old_size, size_t align, size_t new_size);
uint8_t *__wasm_export_exports_reconciler_info(void);
void __wasm_export_exports_reconciler_info_post_return(uint8_t *);
uint8_t *__wasm_export_exports_reconciler_reconcile(uint8_t *, size_t, uint8_t *, size_t, int64_t, int32_t);
void __wasm_export_exports_reconciler_reconcile_post_return(uint8_t *);
uint8_t *__wasm_export_exports_reconciler_finalize(uint8_t *, size_t, uint8_t *, size_t, int64_t, int32_t);
void __wasm_export_exports_reconciler_finalize_post_return(uint8_t *);
uint8_t *__wasm_export_exports_reconciler_validate(int32_t, uint8_t *, size_t, int32_t, uint8_t *, size_t, uint8_t *,
                                                   size_t, int32_t, int64_t, int32_t);
void __wasm_export_exports_reconciler_validate_post_return(uint8_t *);

/* normally in gen/reconciler_component_type.o, a wasm object */
void __component_type_object_force_link_reconciler(void) {}

static const char *cached; /* what cache.get answers, NULL for none */
static int gets, logs;

static uint8_t *host_string(const char *s, size_t *len) {
    *len = strlen(s);
    uint8_t *p = cabi_realloc(NULL, 0, 1, *len);
    if (*len) memcpy(p, s, *len);
    return p;
}

void __wasm_import_kwop_reconciler_cache_get(uint8_t *g, size_t gl, uint8_t *v, size_t vl,
                                              uint8_t *k, size_t kl, int32_t has_ns, uint8_t *ns,
                                              size_t nsl, uint8_t *name, size_t namel,
                                              uint8_t *ret) {
    (void)g, (void)gl, (void)v, (void)vl, (void)k, (void)kl, (void)has_ns, (void)ns, (void)nsl;
    (void)name, (void)namel;
    gets++;
    if (!cached) {
        *ret = 0;
        return;
    }
    size_t len;
    uint8_t *p = host_string(cached, &len);
    *ret = 1;
    *(uint8_t **)(ret + sizeof(void *)) = p;
    *(size_t *)(ret + 2 * sizeof(void *)) = len;
}

void __wasm_import_kwop_reconciler_cache_query(uint8_t *a, size_t b, uint8_t *c, size_t d,
                                                uint8_t *e, size_t f, int32_t g, uint8_t *h,
                                                size_t i, int32_t j, uint8_t *k, size_t l,
                                                uint8_t *ret) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)i, (void)j;
    (void)k, (void)l, (void)ret;
    abort(); /* not used by this plugin */
}

void __wasm_import_kwop_reconciler_log_log(int32_t level, uint8_t *msg, size_t len) {
    (void)level;
    logs++;
    fprintf(stderr, "log: %.*s\n", (int)len, (const char *)msg);
}

static int reconcile(const char *primary, const char *deployment, int owned) {
    cached = deployment;
    size_t len;
    uint8_t *p = host_string(primary, &len);
    /* `owned`: also hand over a list of owned objects (the guest must free it too) */
    uint8_t *list = NULL;
    size_t n = 0;
    if (owned) {
        n = 2;
        list = cabi_realloc(NULL, 0, sizeof(void *), n * 2 * sizeof(void *));
        for (size_t i = 0; i < n; i++) {
            size_t l;
            uint8_t *s = host_string(i ? "" : "{\"kind\":\"Deployment\"}", &l);
            memcpy(list + i * 2 * sizeof(void *), &s, sizeof s);
            memcpy(list + i * 2 * sizeof(void *) + sizeof(void *), &l, sizeof l);
        }
    }
    uint8_t *ret = __wasm_export_exports_reconciler_reconcile(p, len, list, n, 1767323045, 0);
    int is_err = ret[0];
    __wasm_export_exports_reconciler_reconcile_post_return(ret);
    return is_err;
}

static int finalize(const char *primary) {
    size_t len;
    uint8_t *p = host_string(primary, &len);
    uint8_t *ret = __wasm_export_exports_reconciler_finalize(p, len, NULL, 0, 1767323045, 0);
    int is_err = ret[0];
    __wasm_export_exports_reconciler_finalize_post_return(ret);
    return is_err;
}

/* 1: refused (an err with violations), 0: allowed */
static int validate(const char *object, const char *old, const char *deployment) {
    cached = deployment;
    size_t len, old_len = 0, user_len;
    uint8_t *p = host_string(object, &len), *o = old ? host_string(old, &old_len) : NULL;
    uint8_t *u = host_string("tester", &user_len);
    uint8_t *ret = __wasm_export_exports_reconciler_validate(old != NULL, p, len, old != NULL, o, old_len, u,
                                                             user_len, 0, 1767323045, 0);
    int is_err = ret[0];
    __wasm_export_exports_reconciler_validate_post_return(ret);
    return is_err;
}

int main(void) {
    uint8_t *info = __wasm_export_exports_reconciler_info();
    __wasm_export_exports_reconciler_info_post_return(info);

    const char *foo = "{\"metadata\":{\"name\":\"test\",\"namespace\":\"default\",\"uid\":\"u\"},"
                      "\"spec\":{\"deploymentName\":\"test\",\"replicas\":1}}";
    const char *ours = "{\"metadata\":{\"ownerReferences\":[{\"controller\":true,\"uid\":\"u\"}]},"
                       "\"status\":{\"availableReplicas\":2}}";
    int failures = 0;
    failures += reconcile(foo, NULL, 0) != 0;                      /* outcome */
    failures += reconcile(foo, ours, 1) != 0;                      /* outcome, owned list */
    failures += reconcile(foo, "{}", 0) != 1;                      /* ErrResourceExists */
    failures += reconcile(foo, "", 0) != 0;                        /* not JSON: logged, as absent */
    failures += reconcile(foo, "{not json", 0) != 0;               /* likewise */
    failures += reconcile("{\"spec\":{}}", NULL, 0) != 1;          /* InvalidSpec */
    failures += reconcile("{\"spec\":{\"deploymentName\":\"A\"}}", NULL, 0) != 1;
    failures += reconcile("", NULL, 0) != 1;                       /* not JSON, no events */
    failures += reconcile("{\"spec\":7}", NULL, 1) != 1;           /* does not parse */
    failures += finalize(foo) != 0;                                /* the SDK's default: done */
    failures += validate(foo, NULL, NULL) != 0;                    /* allowed */
    failures += validate(foo, NULL, "{}") != 1;                    /* someone else's Deployment */
    failures += validate(foo, foo, "{}") != 0;                     /* an old problem: a warning */
    failures += validate("{\"spec\":{}}", NULL, NULL) != 1;        /* missing */
    failures += validate("{\"spec\":7}", NULL, NULL) != 1;         /* does not parse */
    /* 5 gets by reconcile, 3 by validate; 2 logs by foo.c, 5 places of kwop_fail */
    if (failures || gets != 8 || logs != 7) {
        fprintf(stderr, "unexpected results: %d failures, %d gets, %d logs\n", failures, gets, logs);
        return 1;
    }
    printf("abi: info + 9 reconciles + 1 finalize + 5 validates, every allocation freed\n");
    return 0;
}
