/*
 * kwop.h: the C SDK for kwop plugins on the world kwop:reconciler@0.2 (wit/v0.2/reconciler.wit).
 *
 * A plugin is plain C over JSON text. It defines one constant and up to three functions:
 *
 *     const kwop_info kwop_plugin = {.name = "my-plugin", .version = "0.1.0",
 *         .primary = {"samplecontroller.k8s.io", "v1alpha1", "Foo"}, .owns = owns, .owns_len = 1,
 *         .finalizes = true, .validates = true};
 *     int kwop_reconcile(const kwop_request *req, kwop_result *out);
 *     int kwop_finalize(const kwop_request *req, kwop_result *out);       (optional: done at once)
 *     int kwop_validate(const kwop_admission *req, kwop_result *out);     (optional: allows all)
 *
 * Each returns KWOP_OK after filling `out` with the kwop_apply/kwop_event/... helpers below, or
 * the value of `kwop_fail(out, retry, "format", ...)`: the error a C function returns. From
 * reconcile and finalize it becomes the WIT `failure` with exactly that message (the host adds a
 * Warning ReconcileFailed / FinalizeFailed event with it unless the plugin added a Warning of its
 * own); from validate it is not a refusal (use kwop_refuse for that): the call fails, so the
 * webhook's failurePolicy decides (Fail refuses with the message, Ignore admits and logs it).
 *
 * Bugs: kwop_panic("format", ...), kwop_assert(cond) and the standard assert() print a Rust-style
 * "panicked at src/file.c:LINE in function:" record with the message to stderr and trap; the host
 * shows that message and place on the Warning event and in its log. C has no unwinding, so a
 * panic ends the call (reconcile/finalize: retried with backoff; validate: failurePolicy).
 *
 * Memory: every string handed to a helper is copied; every `char *` the SDK returns is malloc'd
 * and the caller's to free(). Allocation failure inside the SDK panics ("out of memory").
 *
 * The same code runs natively for unit tests: kwop_testing.h gives a fake cache and log, and
 * kwop_wasm.c (compiled only into the component) connects these functions to the WIT exports.
 */
#ifndef KWOP_H
#define KWOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KWOP_OK 0
#define KWOP_FAILED 1

/* ---- what the plugin is (plugin-info) ------------------------------------------------------ */

/* A group/version/kind; the core group is "" (ConfigMap: {"", "v1", "ConfigMap"}). */
typedef struct {
    const char *group, *version, *kind;
} kwop_gvk;

/* A kind the plugin creates and controls. across_namespaces: its objects may live in other
 * namespaces (tracked by kwop.dev/ labels; the plugin must finalize to delete them). */
typedef struct {
    kwop_gvk kind;
    bool across_namespaces;
} kwop_owned;

typedef struct {
    const char *name;    /* a DNS label: names the field manager and the finalizer kwop.dev/<name> */
    const char *version;
    kwop_gvk primary;
    const kwop_owned *owns;
    size_t owns_len;
    const kwop_gvk *reads;
    size_t reads_len;
    bool finalizes;      /* the host adds kwop.dev/<name> and calls kwop_finalize on deletion */
    bool validates;      /* the host's admission webhook calls kwop_validate */
} kwop_info;

/* Defined by the plugin. */
extern const kwop_info kwop_plugin;

/* ---- the host: cache and log (the real one in WASM, kwop_testing.h's fake natively) --------- */

typedef enum { KWOP_TRACE, KWOP_DEBUG, KWOP_INFO, KWOP_WARN, KWOP_ERROR } kwop_level;

typedef struct kwop_host {
    /* One object as malloc'd JSON text, or NULL when not cached. ns NULL: the primary's. */
    char *(*get)(void *self, const kwop_gvk *kind, const char *ns, const char *name);
    /* Objects of a kind (ns NULL: all granted; selector NULL: all), a malloc'd array of malloc'd
     * JSON texts, its length in *len. */
    char **(*query)(void *self, const kwop_gvk *kind, const char *ns, const char *selector, size_t *len);
    void (*log)(void *self, kwop_level level, const char *message);
    void *self;
} kwop_host;

/* An instant: seconds and nanoseconds since the Unix epoch, UTC. */
typedef struct {
    uint64_t seconds;
    uint32_t nanoseconds;
} kwop_instant;

/* The input of reconcile and finalize. Strings are NUL-terminated JSON text. */
typedef struct {
    const char *primary;        /* the primary object */
    const char *const *owned;   /* the owned objects that belong to it, in the order of `owns` */
    size_t owned_len;
    kwop_instant now;           /* the call's instant: use it for lastTransitionTime */
    const kwop_host *host;
} kwop_request;

typedef enum { KWOP_CREATE, KWOP_UPDATE } kwop_operation;

/* The input of validate: one admission request. */
typedef struct {
    kwop_operation operation;
    const char *object;         /* as it would be stored */
    const char *old_object;     /* UPDATE: as stored now; CREATE: NULL */
    const char *user;
    bool dry_run;
    kwop_instant now;
    const kwop_host *host;
} kwop_admission;

/* cache.get / cache.query / log through the request's host (see kwop_host). */
char *kwop_get(const kwop_host *host, const kwop_gvk *kind, const char *ns, const char *name);
char **kwop_query(const kwop_host *host, const kwop_gvk *kind, const char *ns, const char *selector, size_t *len);
void kwop_strings_free(char **list, size_t len);
void kwop_log(const kwop_host *host, kwop_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- what a call decided ------------------------------------------------------------------- */

typedef enum { KWOP_NORMAL, KWOP_WARNING } kwop_event_type;

typedef struct {
    kwop_event_type type;
    char *reason, *message;
} kwop_event;

typedef struct {
    kwop_gvk kind;  /* strings owned by the result */
    char *ns;       /* NULL: the primary's namespace (or cluster-scoped) */
    char *name;
} kwop_ref;

typedef struct {
    char *field;    /* NULL when no one field is at fault */
    char *message;
} kwop_violation;

/* One result type for the three calls; each reads the fields it has in the WIT. */
typedef struct {
    /* reconcile (outcome) */
    char **apply;
    size_t apply_len;
    /* reconcile and finalize */
    kwop_ref *deletes;
    size_t deletes_len;
    char *status;               /* the value of `status`; NULL leaves it alone */
    kwop_event *events;
    size_t events_len;
    bool requeue;               /* requeue after requeue_after_ms */
    uint64_t requeue_after_ms;
    bool done;                  /* finalize: the cleanup is complete */
    /* validate: allowed with warnings, or refused with violations */
    char **warnings;
    size_t warnings_len;
    kwop_violation *violations;
    size_t violations_len;
    /* kwop_fail */
    char *failure;
    bool retry;
    const char *file, *function; /* where kwop_fail was called */
    int line;
} kwop_result;

void kwop_result_init(kwop_result *r);
void kwop_result_free(kwop_result *r);

/* Adds a server-side apply intent (JSON text, copied). */
void kwop_apply(kwop_result *r, const char *json);
/* Takes over a malloc'd intent. */
void kwop_apply_take(kwop_result *r, char *json);
/* Deletes an object that belongs to the primary (ns NULL: the primary's namespace). */
void kwop_delete(kwop_result *r, const kwop_gvk *kind, const char *ns, const char *name);
/* Sets the primary's new status (the value of `status`, JSON text, copied). */
void kwop_set_status(kwop_result *r, const char *json);
void kwop_add_event(kwop_result *r, kwop_event_type type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void kwop_requeue_after(kwop_result *r, uint64_t ms);
/* validate: allow with a warning (kubectl prints "Warning: ...") / refuse. */
void kwop_warn(kwop_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kwop_refuse(kwop_result *r, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The error a call returns: `return kwop_fail(out, retry, "cannot reach %s", url);`. retry:
 * retried with backoff (true) or not until something changes (false). Returns KWOP_FAILED. */
#define kwop_fail(r, retry, ...) kwop_fail_at((r), (retry), __FILE__, __LINE__, __func__, __VA_ARGS__)
int kwop_fail_at(kwop_result *r, bool retry, const char *file, int line, const char *function, const char *fmt,
                 ...) __attribute__((format(printf, 6, 7)));

/* A bug: prints "panicked at FILE:LINE in FUNCTION:\nmessage" to stderr and traps. */
#define kwop_panic(...) kwop_panic_at(__FILE__, __LINE__, __func__, __VA_ARGS__)
#define kwop_assert(cond) ((cond) ? (void)0 : kwop_panic("assertion failed: %s", #cond))
_Noreturn void kwop_panic_at(const char *file, int line, const char *function, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- conditions and observedGeneration (status.conditions as metav1.Condition) ------------- */

typedef struct {
    char *type, *status, *reason, *message, *last_transition_time;
    int64_t observed_generation;
} kwop_condition;

typedef struct {
    kwop_condition *items;
    size_t len;
} kwop_conditions;

/* metadata.generation of an object (JSON text), 0 when absent or not JSON. */
int64_t kwop_generation(const char *object);
/* The object's status.conditions (empty when none or not JSON). */
kwop_conditions kwop_conditions_of(const char *object);
/* Sets the condition of `type`: status "True", "False" or "Unknown". lastTransitionTime becomes
 * `now` when the status changes (or the condition is new) and is kept otherwise. */
void kwop_condition_set(kwop_conditions *c, const char *type, const char *status, const char *reason,
                        const char *message, int64_t observed_generation, kwop_instant now);
/* The condition of `type`, or NULL. */
const kwop_condition *kwop_condition_find(const kwop_conditions *c, const char *type);
/* The conditions as a JSON array (malloc'd). */
char *kwop_conditions_json(const kwop_conditions *c);
void kwop_conditions_free(kwop_conditions *c);
/* `now` as RFC 3339 with seconds (2026-01-02T03:04:05Z); buf needs 21 bytes. */
void kwop_rfc3339(kwop_instant now, char buf[21]);

/* ---- the plugin's functions (kwop_finalize and kwop_validate have defaults) ----------------- */

int kwop_reconcile(const kwop_request *req, kwop_result *out);
int kwop_finalize(const kwop_request *req, kwop_result *out);
int kwop_validate(const kwop_admission *req, kwop_result *out);

#endif
