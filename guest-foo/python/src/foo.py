"""The Foo -> Deployment logic, a port of guest-foo/src/foo.rs (itself a port of
sample-controller's syncHandler). Plain Python over parsed JSON (see jsonv.py), no WIT:
unit-tested with CPython (tests/), wrapped for the component by app.py.

The Rust guest is the reference, down to its error messages: a Foo that does not parse is
reported with serde's wording ('invalid type: string "x", expected a string'), and names are
quoted as Rust's `{:?}` quotes them. Both are reproduced here.
"""

from bisect import bisect_right

from jsonv import I64_MAX, format_float
from unicode_table import ESCAPED_RUNS

#: Event reason when a Foo is synced (sample-controller's `SuccessSynced`).
SUCCESS_SYNCED = "Synced"
#: Message of the `Synced` event (sample-controller's `MessageResourceSynced`).
MESSAGE_RESOURCE_SYNCED = "Foo synced successfully"
#: Event reason when the Deployment exists but is not ours (sample-controller's `ErrResourceExists`).
ERR_RESOURCE_EXISTS = "ErrResourceExists"
#: Event reason for a Foo whose spec cannot be acted on.
INVALID_SPEC = "InvalidSpec"

NORMAL = "normal"
WARNING = "warning"


class Event:
    """An event to record on the Foo."""

    __slots__ = ("severity", "reason", "message")

    def __init__(self, severity, reason, message):
        self.severity = severity
        self.reason = reason
        self.message = message

    def __eq__(self, other):
        return isinstance(other, Event) and (self.severity, self.reason, self.message) == (
            other.severity,
            other.reason,
            other.message,
        )

    def __repr__(self):
        return "Event(%r, %r, %r)" % (self.severity, self.reason, self.message)


class Decision:
    """A successful sync: the Deployment intent, the Foo's status, the events."""

    def __init__(self, apply, status, events):
        self.apply = apply
        self.status = status
        self.events = events


class Failure(Exception):
    """A sync that could not proceed."""

    def __init__(self, message, events, retry):
        super().__init__(message)
        self.message = message
        self.events = events
        self.retry = retry


def sync(foo, deployment):
    """One sync of a Foo, as sample-controller's `syncHandler` does it.

    `foo` is the parsed Foo (jsonv.loads); `deployment(namespace, name)` returns the parsed
    Deployment from the cache, or None. Returns a Decision or raises Failure.
    """
    try:
        meta, spec = _FOO(foo)
    except _DeError as e:
        raise _invalid("Foo does not parse: %s" % e) from None
    name_, namespace, uid = meta
    name, replicas = spec

    if name is None or name == "":
        # sample-controller logs "Deployment name missing from object reference" and drops the
        # item (no retry): the user has to fix the Foo, which triggers a new sync.
        raise _invalid("spec.deploymentName is missing or empty: no Deployment to manage")
    why = check_dns_subdomain(name)
    if why is not None:
        raise _invalid(
            "spec.deploymentName %s is not a valid Deployment name: %s" % (debug_str(name), why)
        )

    observed = deployment(namespace, name)
    if observed is not None and not _is_controlled_by(observed, uid):
        msg = "Resource %s already exists and is not managed by Foo" % debug_str(name)
        raise Failure(msg, [Event(WARNING, ERR_RESOURCE_EXISTS, msg)], True)

    available = 0
    if observed is not None:
        a = _field(_field(observed, "status"), "availableReplicas")
        if _is_int(a) and a <= I64_MAX:
            available = a

    return Decision(
        [_new_deployment(name_, namespace, replicas, name)],
        {"availableReplicas": available},
        [Event(NORMAL, SUCCESS_SYNCED, MESSAGE_RESOURCE_SYNCED)],
    )


def admit(foo, old, deployment):
    """guest-foo's admission, as the Rust guest's `foo::admit`: a Foo whose spec.deploymentName is
    missing, invalid or names a Deployment this Foo does not control is refused on CREATE and
    whenever an UPDATE changes `spec`; an UPDATE leaving `spec` as it was is warned, not refused,
    so a Foo that went wrong can still be labelled, fixed or deleted.

    Returns (warnings, violations), each violation a (field, message) pair.
    """
    field = "spec.deploymentName"
    try:
        (_, namespace, uid), spec = _FOO(foo)
        old_spec = _FOO(old)[1] if old is not None else None
    except _DeError as e:
        return [], [(None, "Foo does not parse: %s" % e)]
    name = spec[0]
    problem = None
    if name is None or name == "":
        problem = "is required: the name of the Deployment this Foo manages"
    else:
        why = check_dns_subdomain(name)
        if why is not None:
            problem = "%s is not a valid Deployment name: %s" % (debug_str(name), why)
        else:
            d = deployment(namespace, name)
            if d is not None and not _is_controlled_by(d, uid):
                problem = (
                    "Deployment %s already exists in namespace %s and is not managed by this Foo; "
                    "choose another name" % (debug_str(name), debug_str(namespace))
                )
    if problem is None:
        return [], []
    if old_spec is not None and old_spec == spec:
        return ["%s: %s" % (field, problem)], []
    return [], [(field, problem)]


def _invalid(message):
    return Failure(message, [Event(WARNING, INVALID_SPEC, message)], False)


def _new_deployment(foo_name, namespace, replicas, name):
    """sample-controller's `newDeployment`, as a server-side apply intent (no owner reference:
    the host sets the controller reference itself)."""
    labels = {"app": "nginx", "controller": foo_name}
    spec = {
        "selector": {"matchLabels": dict(labels)},
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
        },
    }
    # Unset replicas stay unset (the API server defaults them to 1), as in sample-controller.
    if replicas is not None:
        spec["replicas"] = replicas
    metadata = {"name": name}
    if namespace != "":
        metadata["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _field(v, key):
    """A member of a JSON object; None for anything else (serde_json's `pointer`)."""
    return v.get(key) if isinstance(v, dict) else None


def _is_controlled_by(obj, uid):
    """`metav1.IsControlledBy`: the object's controller owner reference has the Foo's UID."""
    refs = _field(_field(obj, "metadata"), "ownerReferences")
    if not isinstance(refs, list):
        return False
    return any(
        _field(r, "controller") is True and uid != "" and _field(r, "uid") == uid for r in refs
    )


_DNS_MESSAGE = (
    "must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
    "with an alphanumeric character"
)
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def check_dns_subdomain(s):
    """RFC 1123 subdomain, as the API server checks a Deployment name. None when valid."""
    if len(s.encode("utf-8")) > 253:
        return "must be no more than 253 characters"

    def ok_label(label):
        return (
            label != ""
            and all(c in _LABEL_CHARS for c in label)
            and not label.startswith("-")
            and not label.endswith("-")
        )

    return None if all(ok_label(label) for label in s.split(".")) else _DNS_MESSAGE


# ---------------------------------------------------------------------------------------------
# Rust's `{:?}` for a string.


def _run_starts():
    starts = []
    at = 0
    for r in ESCAPED_RUNS.split(","):
        starts.append(at)
        at += int(r, 36)
    return starts


_RUN_STARTS = _run_starts()  # odd indices start runs that are escaped
_SIMPLE = {"\0": "\\0", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"'}


def debug_str(s):
    """`format!("{s:?}")`: double quotes; `\\0 \\t \\r \\n \\\\ \\"`; `\\u{..}` for
    Grapheme_Extend and unprintable chars; everything else as is."""
    out = ['"']
    for ch in s:
        simple = _SIMPLE.get(ch)
        if simple is not None:
            out.append(simple)
        elif (bisect_right(_RUN_STARTS, ord(ch)) - 1) & 1:
            out.append("\\u{%x}" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# The Foo as serde reads it into the Rust guest's structs:
#   struct Foo  { #[serde(default)] metadata: Meta, #[serde(default)] spec: Spec }
#   struct Meta { #[serde(default)] name: String, namespace: String, uid: String }
#   struct Spec { #[serde(default)] deployment_name: Option<String>, replicas: Option<i64> }
# Unknown fields are ignored, missing ones default, a wrong type is an error with serde's wording.
# A struct also reads from an array (fields in declaration order), as serde allows.


class _DeError(Exception):
    pass


def _unexpected(v):
    """serde_json's description of an unexpected value."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean `%s`" % ("true" if v else "false")
    if isinstance(v, str):
        return "string %s" % debug_str(v)
    if isinstance(v, int):
        return "integer `%d`" % v
    if isinstance(v, float):
        return "floating point `%s`" % format_float(v)
    if isinstance(v, list):
        return "sequence"
    return "map"


def _invalid_type(v, expected):
    return _DeError("invalid type: %s, expected %s" % (_unexpected(v), expected))


def _string(v):
    if isinstance(v, str):
        return v
    raise _invalid_type(v, "a string")


def _option_string(v):
    return None if v is None else _string(v)


def _option_i64(v):
    if v is None:
        return None
    if not _is_int(v):
        raise _invalid_type(v, "i64")
    if v > I64_MAX:
        raise _DeError("invalid value: integer `%d`, expected i64" % v)
    return v


def _struct(name, fields):
    """A struct reader: `fields` is [(json_key, read, default)] in declaration order; returns
    the values as a tuple in that order."""
    keys = [f[0] for f in fields]

    def read(v):
        out = [f[2] for f in fields]
        if isinstance(v, dict):
            # serde_json's map is a BTreeMap: fields are read in key order.
            for key in sorted(k for k in keys if k in v):
                k = keys.index(key)
                out[k] = fields[k][1](v[key])
        elif isinstance(v, list):
            for k, item in enumerate(v[: len(fields)]):
                out[k] = fields[k][1](item)
            if len(v) > len(fields):
                raise _DeError("invalid length %d, expected fewer elements in array" % len(v))
        else:
            raise _invalid_type(v, "struct %s" % name)
        return tuple(out)

    return read


_META = _struct("Meta", [("name", _string, ""), ("namespace", _string, ""), ("uid", _string, "")])
_SPEC = _struct("Spec", [("deploymentName", _option_string, None), ("replicas", _option_i64, None)])
_FOO = _struct("Foo", [("metadata", _META, ("", "", "")), ("spec", _SPEC, (None, None))])
