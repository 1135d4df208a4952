/*
 * The Foo -> Deployment logic: kubernetes/sample-controller's syncHandler, ported line by line
 * from guest-foo's Rust (src/foo.rs and src/component.rs). No WIT types here, so the same code
 * runs natively in the differential tests.
 */
#ifndef KWOP_FOO_H
#define KWOP_FOO_H

#include <stddef.h>

typedef enum { FOO_NORMAL, FOO_WARNING } foo_severity;

typedef struct {
    foo_severity severity;
    const char *reason;  /* static */
    char *message;       /* malloc'd */
    size_t message_len;
} foo_event;

typedef struct {
    int ok;                 /* 1: an outcome, 0: a failure */
    /* ok */
    char *apply;            /* the one Deployment intent, JSON (malloc'd) */
    size_t apply_len;
    char *status;           /* the Foo's status, JSON (malloc'd) */
    size_t status_len;
    /* failure */
    char *message;          /* malloc'd */
    size_t message_len;
    int retry;
    /* both: zero or one event */
    foo_event event;
    int has_event;
} foo_result;

/* Looks a Deployment up by namespace and name. Returns malloc'd JSON text (and its length) or
 * NULL when the cache has none. */
typedef char *(*foo_lookup_fn)(void *ctx, const char *ns, size_t ns_len, const char *name,
                               size_t name_len, size_t *json_len);
/* Logs an error line. */
typedef void (*foo_log_fn)(void *ctx, const char *msg, size_t len);

/* One reconcile of the Foo given as JSON text. Returns 0 only when out of memory. */
int foo_reconcile(const char *primary, size_t primary_len, foo_lookup_fn lookup, foo_log_fn log,
                  void *ctx, foo_result *out);
void foo_result_free(foo_result *r);

/* guest-foo's admission: allowed, allowed with a warning (an UPDATE that leaves an old problem in
 * spec alone), or refused. `message` (malloc'd, NULL when allowed) says why; `field` 1 means it is
 * about spec.deploymentName (a warning then reads "spec.deploymentName: <message>"). */
typedef enum { FOO_ALLOWED, FOO_WARNED, FOO_REFUSED } foo_verdict;
typedef struct {
    foo_verdict verdict;
    int field;
    char *message;
} foo_admission;

/* Checks a Foo (JSON text, NUL-terminated) and, on UPDATE, the stored one (else NULL). Returns 0
 * only when out of memory. */
int foo_admit(const char *object, const char *old_object, foo_lookup_fn lookup, void *ctx, foo_admission *out);

#endif
