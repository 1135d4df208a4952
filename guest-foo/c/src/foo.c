/* The Foo -> Deployment logic, ported from guest-foo's src/foo.rs. See foo.h. */
#include "foo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* sample-controller's names and messages, as guest-foo has them */
#define SUCCESS_SYNCED "Synced"
#define MESSAGE_RESOURCE_SYNCED "Foo synced successfully"
#define ERR_RESOURCE_EXISTS "ErrResourceExists"
#define INVALID_SPEC "InvalidSpec"

typedef struct {
    const char *ptr;
    size_t len;
} str_t;

static const str_t EMPTY = {"", 0};

typedef struct {
    str_t name, namespace_, uid;         /* metadata, "" when absent */
    int has_deployment_name;
    str_t deployment_name;
    int has_replicas;
    int64_t replicas;
} foo_t;

/* ---- serde-style typed reading of the Foo ---------------------------------------------------
 *
 * guest-foo reads the Foo with `#[derive(Deserialize)]` structs over a serde_json Value; a type
 * mismatch fails the reconcile with serde's message ("invalid type: integer `5`, expected a
 * string"). These helpers give the same results and messages. */

/* serde's `Unexpected`, as serde_json prints it */
static void put_unexpected(sb_t *b, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: sb_puts(b, "null"); break;
    case JSON_BOOL: sb_puts(b, v->boolean ? "boolean `true`" : "boolean `false`"); break;
    case JSON_NUMBER:
        if (v->num == JSON_FLOAT) {
            sb_puts(b, "floating point `");
            sb_put_float(b, v->f);
        } else {
            sb_puts(b, "integer `");
            if (v->num == JSON_POS_INT)
                sb_put_u64(b, v->u);
            else
                sb_put_i64(b, v->i);
        }
        sb_putc(b, '`');
        break;
    case JSON_STRING:
        sb_puts(b, "string ");
        sb_put_debug_string(b, v->str, v->len);
        break;
    case JSON_ARRAY: sb_puts(b, "sequence"); break;
    case JSON_OBJECT: sb_puts(b, "map"); break;
    }
}

static int invalid_type(sb_t *err, const json_value *v, const char *expected) {
    sb_puts(err, "invalid type: ");
    put_unexpected(err, v);
    sb_puts(err, ", expected ");
    sb_puts(err, expected);
    return 0;
}

static int de_string(const json_value *v, str_t *out, sb_t *err) {
    if (v->type != JSON_STRING) return invalid_type(err, v, "a string");
    out->ptr = v->str;
    out->len = v->len;
    return 1;
}

static int de_opt_string(const json_value *v, int *has, str_t *out, sb_t *err) {
    *has = 0;
    if (v->type == JSON_NULL) return 1;
    if (!de_string(v, out, err)) return 0;
    *has = 1;
    return 1;
}

static int de_opt_i64(const json_value *v, int *has, int64_t *out, sb_t *err) {
    *has = 0;
    if (v->type == JSON_NULL) return 1;
    if (v->type != JSON_NUMBER || v->num == JSON_FLOAT) return invalid_type(err, v, "i64");
    if (v->num == JSON_NEG_INT) {
        *out = v->i;
    } else if (v->u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)v->u;
    } else {
        sb_puts(err, "invalid value: integer `");
        sb_put_u64(err, v->u);
        sb_puts(err, "`, expected i64");
        return 0;
    }
    *has = 1;
    return 1;
}

/* A struct whose fields all have `#[serde(default)]` and whose field names are in sorted order
 * (so serde_json's sorted map visits them in declaration order). Reads field `k` from the
 * object member of that name, or from element `k` of an array (serde's sequence form of a
 * struct); a missing field keeps its default. */
typedef int (*field_fn)(const json_value *v, size_t k, void *out, sb_t *err);

static int de_struct(const json_value *v, const char *expected, const char *const *fields,
                     size_t nfields, field_fn field, void *out, sb_t *err) {
    size_t k;
    switch (v->type) {
    case JSON_OBJECT:
        for (k = 0; k < nfields; k++) {
            const json_value *f = json_get(v, fields[k]);
            if (f && !field(f, k, out, err)) return 0;
        }
        return 1;
    case JSON_ARRAY:
        for (k = 0; k < nfields && k < v->len; k++)
            if (!field(&v->items[k], k, out, err)) return 0;
        if (v->len > nfields) {
            sb_puts(err, "invalid length ");
            sb_put_u64(err, v->len);
            sb_puts(err, ", expected fewer elements in array");
            return 0;
        }
        return 1;
    default: return invalid_type(err, v, expected);
    }
}

static const char *const META_FIELDS[] = {"name", "namespace", "uid"};
static int meta_field(const json_value *v, size_t k, void *out, sb_t *err) {
    foo_t *foo = out;
    str_t *dst = k == 0 ? &foo->name : k == 1 ? &foo->namespace_ : &foo->uid;
    return de_string(v, dst, err);
}

static const char *const SPEC_FIELDS[] = {"deploymentName", "replicas"};
static int spec_field(const json_value *v, size_t k, void *out, sb_t *err) {
    foo_t *foo = out;
    if (k == 0) return de_opt_string(v, &foo->has_deployment_name, &foo->deployment_name, err);
    return de_opt_i64(v, &foo->has_replicas, &foo->replicas, err);
}

static const char *const FOO_FIELDS[] = {"metadata", "spec"};
static int foo_field(const json_value *v, size_t k, void *out, sb_t *err) {
    if (k == 0) return de_struct(v, "struct Meta", META_FIELDS, 3, meta_field, out, err);
    return de_struct(v, "struct Spec", SPEC_FIELDS, 2, spec_field, out, err);
}

/* ---- the logic -------------------------------------------------------------------------------- */

/* RFC 1123 subdomain, as the API server checks a Deployment name. NULL when valid. */
static const char *check_dns_subdomain(str_t s) {
    if (s.len > 253) return "must be no more than 253 characters";
    size_t start = 0;
    for (size_t i = 0; i <= s.len; i++) {
        if (i < s.len && s.ptr[i] != '.') continue;
        /* label s[start..i) */
        int ok = i > start && s.ptr[start] != '-' && s.ptr[i - 1] != '-';
        for (size_t k = start; ok && k < i; k++) {
            char c = s.ptr[k];
            ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        }
        if (!ok)
            return "must consist of lower case alphanumeric characters, '-' or '.', and must "
                   "start and end with an alphanumeric character";
        start = i + 1;
    }
    return NULL;
}

/* metav1.IsControlledBy: a controller owner reference with the Foo's UID */
static int is_controlled_by(const json_value *obj, str_t uid) {
    const json_value *refs = json_get(json_get(obj, "metadata"), "ownerReferences");
    if (!refs || refs->type != JSON_ARRAY) return 0;
    for (size_t k = 0; k < refs->len; k++) {
        const json_value *r = &refs->items[k];
        const json_value *controller = json_get(r, "controller");
        const json_value *ruid = json_get(r, "uid");
        if (controller && controller->type == JSON_BOOL && controller->boolean && uid.len > 0 &&
            ruid && ruid->type == JSON_STRING && ruid->len == uid.len &&
            memcmp(ruid->str, uid.ptr, uid.len) == 0)
            return 1;
    }
    return 0;
}

/* sample-controller's newDeployment as an apply intent, keys in serde_json's (sorted) order */
static void put_labels(sb_t *b, const foo_t *foo) {
    sb_puts(b, "{\"app\":\"nginx\",\"controller\":");
    sb_put_json_string(b, foo->name.ptr, foo->name.len);
    sb_putc(b, '}');
}

static void put_deployment(sb_t *b, const foo_t *foo, str_t name) {
    sb_puts(b, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":");
    sb_put_json_string(b, name.ptr, name.len);
    if (foo->namespace_.len > 0) {
        sb_puts(b, ",\"namespace\":");
        sb_put_json_string(b, foo->namespace_.ptr, foo->namespace_.len);
    }
    sb_puts(b, "},\"spec\":{");
    /* unset replicas stay unset (the API server defaults them to 1), as in sample-controller */
    if (foo->has_replicas) {
        sb_puts(b, "\"replicas\":");
        sb_put_i64(b, foo->replicas);
        sb_putc(b, ',');
    }
    sb_puts(b, "\"selector\":{\"matchLabels\":");
    put_labels(b, foo);
    sb_puts(b, "},\"template\":{\"metadata\":{\"labels\":");
    put_labels(b, foo);
    sb_puts(b, "},\"spec\":{\"containers\":[{\"image\":\"nginx:latest\",\"name\":\"nginx\"}]}}}}");
}

static void set_event(foo_result *r, foo_severity sev, const char *reason, const char *msg,
                      size_t len) {
    r->has_event = 1;
    r->event.severity = sev;
    r->event.reason = reason;
    r->event.message = malloc(len + 1);
    if (r->event.message) {
        memcpy(r->event.message, msg, len);
        r->event.message[len] = '\0';
        r->event.message_len = len;
    }
}

/* A failure with `msg` (taken over). `reason`: also a Warning event with the same message. */
static int fail_with(foo_result *r, sb_t *msg, const char *reason, int retry) {
    if (msg->oom) return 0;
    r->ok = 0;
    r->retry = retry;
    if (reason) {
        set_event(r, FOO_WARNING, reason, msg->ptr ? msg->ptr : "", msg->len);
        if (!r->event.message) return 0;
    }
    r->message = sb_take(msg, &r->message_len);
    return r->message != NULL;
}

static int invalid(foo_result *r, sb_t *msg) { return fail_with(r, msg, INVALID_SPEC, 0); }

static int sync(const json_value *primary, foo_lookup_fn lookup, foo_log_fn log, void *ctx,
                foo_result *r) {
    foo_t foo = {EMPTY, EMPTY, EMPTY, 0, EMPTY, 0, 0};
    sb_t msg;
    sb_init(&msg);

    sb_t err;
    sb_init(&err);
    if (!de_struct(primary, "struct Foo", FOO_FIELDS, 2, foo_field, &foo, &err)) {
        sb_puts(&msg, "Foo does not parse: ");
        sb_putn(&msg, err.ptr, err.len);
        int ok = !err.oom;
        sb_free(&err);
        return ok && invalid(r, &msg);
    }

    if (!foo.has_deployment_name || foo.deployment_name.len == 0) {
        /* sample-controller logs "Deployment name missing from object reference" and drops the
         * item (no retry): the user has to fix the Foo, which triggers a new sync. */
        sb_puts(&msg, "spec.deploymentName is missing or empty: no Deployment to manage");
        return invalid(r, &msg);
    }
    str_t name = foo.deployment_name;
    const char *why = check_dns_subdomain(name);
    if (why) {
        /* sample-controller would retry a create the API server rejects, forever; say why once */
        sb_puts(&msg, "spec.deploymentName ");
        sb_put_debug_string(&msg, name.ptr, name.len);
        sb_puts(&msg, " is not a valid Deployment name: ");
        sb_puts(&msg, why);
        return invalid(r, &msg);
    }

    /* sample-controller's deploymentsLister.Deployments(ns).Get(name) */
    json_value *observed = NULL;
    size_t json_len = 0;
    char *json = lookup(ctx, foo.namespace_.ptr, foo.namespace_.len, name.ptr, name.len, &json_len);
    if (json) {
        sb_t perr;
        sb_init(&perr);
        observed = json_parse(json, json_len, &perr);
        if (!observed) {
            sb_t line;
            sb_init(&line);
            sb_puts(&line, "cached Deployment ");
            sb_putn(&line, foo.namespace_.ptr, foo.namespace_.len);
            sb_putc(&line, '/');
            sb_putn(&line, name.ptr, name.len);
            sb_puts(&line, " is not JSON: ");
            sb_putn(&line, perr.ptr, perr.len);
            if (!line.oom) log(ctx, line.ptr, line.len);
            sb_free(&line);
        }
        sb_free(&perr);
        free(json);
    }

    if (observed && !is_controlled_by(observed, foo.uid)) {
        json_free(observed);
        sb_puts(&msg, "Resource ");
        sb_put_debug_string(&msg, name.ptr, name.len);
        sb_puts(&msg, " already exists and is not managed by Foo");
        return fail_with(r, &msg, ERR_RESOURCE_EXISTS, 1);
    }

    int64_t available = 0;
    if (observed && !json_as_i64(json_get(json_get(observed, "status"), "availableReplicas"),
                                 &available))
        available = 0;
    json_free(observed);

    sb_t b;
    sb_init(&b);
    put_deployment(&b, &foo, name);
    if (b.oom) {
        sb_free(&b);
        return 0;
    }
    r->ok = 1;
    r->apply = sb_take(&b, &r->apply_len);
    sb_puts(&b, "{\"availableReplicas\":");
    sb_put_i64(&b, available);
    sb_putc(&b, '}');
    if (b.oom) {
        sb_free(&b);
        return 0;
    }
    r->status = sb_take(&b, &r->status_len);
    set_event(r, FOO_NORMAL, SUCCESS_SYNCED, MESSAGE_RESOURCE_SYNCED,
              sizeof MESSAGE_RESOURCE_SYNCED - 1);
    return r->event.message != NULL;
}

int foo_reconcile(const char *primary, size_t primary_len, foo_lookup_fn lookup, foo_log_fn log,
                  void *ctx, foo_result *r) {
    memset(r, 0, sizeof *r);
    sb_t err;
    sb_init(&err);
    json_value *foo = json_parse(primary, primary_len, &err);
    if (!foo) {
        sb_t msg;
        sb_init(&msg);
        sb_puts(&msg, "primary is not JSON: ");
        sb_putn(&msg, err.ptr, err.len);
        int ok = !err.oom;
        sb_free(&err);
        return ok && fail_with(r, &msg, NULL, 0);
    }
    sb_free(&err);
    int ok = sync(foo, lookup, log, ctx, r);
    json_free(foo);
    return ok;
}

void foo_result_free(foo_result *r) {
    free(r->apply);
    free(r->status);
    free(r->message);
    free(r->event.message);
    memset(r, 0, sizeof *r);
}

/* ---- admission: guest-foo's `admit` ------------------------------------------------------------ */

static int parse_foo(const char *text, json_value **doc, foo_t *foo, sb_t *err) {
    *foo = (foo_t){EMPTY, EMPTY, EMPTY, 0, EMPTY, 0, 0};
    *doc = json_parse(text, strlen(text), err);
    return *doc && de_struct(*doc, "struct Foo", FOO_FIELDS, 2, foo_field, foo, err);
}

static int str_eq(str_t a, str_t b) { return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0; }

int foo_admit(const char *object, const char *old_object, foo_lookup_fn lookup, void *ctx, foo_admission *out) {
    memset(out, 0, sizeof *out);
    json_value *doc = NULL, *old_doc = NULL;
    foo_t foo, old;
    sb_t err, msg;
    sb_init(&err);
    sb_init(&msg);
    if (!parse_foo(object, &doc, &foo, &err)) {
        sb_puts(&msg, "the Foo does not parse: ");
        sb_putn(&msg, err.ptr, err.len);
        out->verdict = FOO_REFUSED;
        out->field = 0;
    } else {
        str_t n = foo.deployment_name;
        if (!foo.has_deployment_name || n.len == 0) {
            sb_puts(&msg, "is required: the name of the Deployment this Foo manages");
        } else if (check_dns_subdomain(n)) {
            sb_put_debug_string(&msg, n.ptr, n.len);
            sb_puts(&msg, " is not a valid Deployment name: ");
            sb_puts(&msg, check_dns_subdomain(n));
        } else {
            size_t len = 0;
            char *found = lookup(ctx, foo.namespace_.ptr, foo.namespace_.len, n.ptr, n.len, &len);
            if (found) {
                sb_t perr;
                sb_init(&perr);
                json_value *d = json_parse(found, len, &perr);
                sb_free(&perr);
                if (!d || !is_controlled_by(d, foo.uid)) {
                    sb_puts(&msg, "Deployment ");
                    sb_put_debug_string(&msg, n.ptr, n.len);
                    sb_puts(&msg, " already exists in namespace ");
                    sb_put_debug_string(&msg, foo.namespace_.ptr, foo.namespace_.len);
                    sb_puts(&msg, " and is not managed by this Foo; choose another name");
                }
                json_free(d);
                free(found);
            }
        }
        if (msg.len) {
            /* an UPDATE leaving spec alone is only warned about: the problem is not new */
            sb_t oerr;
            sb_init(&oerr);
            int same = old_object && parse_foo(old_object, &old_doc, &old, &oerr) &&
                       old.has_deployment_name == foo.has_deployment_name &&
                       str_eq(old.deployment_name, foo.deployment_name) && old.has_replicas == foo.has_replicas &&
                       (!foo.has_replicas || old.replicas == foo.replicas);
            sb_free(&oerr);
            out->verdict = same ? FOO_WARNED : FOO_REFUSED;
            out->field = 1;
        }
    }
    int ok = !msg.oom && !err.oom;
    size_t n;
    out->message = msg.len ? sb_take(&msg, &n) : NULL;
    sb_free(&msg);
    sb_free(&err);
    json_free(doc);
    json_free(old_doc);
    return ok;
}
