"""Runs conformance fixtures (folders with primary.yaml, observed.yaml, expected.json, as
`kwop plugin test` reads them) against foo.py with CPython, without building the component.
Only JSON-syntax primary/observed files are supported (YAML needs the host).

    python3 tests/fixtures.py DIR...     (a fixture folder, or a folder of them)
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import foo  # noqa: E402
import jsonv  # noqa: E402


def _events(events):
    return [
        {"type": "Normal" if e.severity == foo.NORMAL else "Warning", "reason": e.reason, "message": e.message}
        for e in events
    ]


def render(primary, lookup):
    """What `kwop plugin reconcile` prints for one sync (without the host's write fence)."""
    try:
        d = foo.sync(primary, lookup)
    except foo.Failure as f:
        return {"error": {"message": f.message, "retry": f.retry, "events": _events(f.events)}}
    return {
        "apply": [jsonv.loads(jsonv.dumps(a)) for a in d.apply],
        "delete": [],
        "status": jsonv.loads(jsonv.dumps(d.status)),
        "events": _events(d.events),
        "requeueAfterMs": None,
    }


def _host_json(v):
    """serde_json's serialization: like jsonv.dumps, floats as zmij writes them."""
    if isinstance(v, float):
        return jsonv.format_float(v)
    if isinstance(v, list):
        return "[%s]" % ",".join(_host_json(x) for x in v)
    if isinstance(v, dict):
        return "{%s}" % ",".join("%s:%s" % (jsonv.dumps(k), _host_json(v[k])) for k in sorted(v))
    return jsonv.dumps(v)


def run_fixture(d):
    with open(os.path.join(d, "primary.yaml"), encoding="utf-8") as f:
        # The host parses the file and hands the guest its own serialization (serde_json).
        primary = jsonv.loads(_host_json(jsonv.loads(f.read())))
    observed = []
    if os.path.exists(os.path.join(d, "observed.yaml")):
        with open(os.path.join(d, "observed.yaml"), encoding="utf-8") as f:
            o = jsonv.loads(_host_json(jsonv.loads(f.read())))
        observed = o if isinstance(o, list) else [o]

    def meta(o, k):
        m = o.get("metadata") if isinstance(o, dict) else None
        return m.get(k) if isinstance(m, dict) else None

    def lookup(ns, name):
        for o in observed:
            if o.get("kind") == "Deployment" and meta(o, "name") == name and (meta(o, "namespace") or "") == ns:
                return o
        return None

    got = jsonv.dumps(render(primary, lookup))
    with open(os.path.join(d, "expected.json"), encoding="utf-8") as f:
        expected = jsonv.dumps(jsonv.loads(f.read()))
    # The host's write fence is not simulated here.
    skipped = '"outcome rejected by the host: ' in expected
    return got, expected, skipped


def collect(d, out):
    if os.path.exists(os.path.join(d, "expected.json")):
        out.append(d)
        return
    for e in sorted(os.listdir(d)):
        if os.path.isdir(os.path.join(d, e)):
            collect(os.path.join(d, e), out)


def main(args):
    dirs = []
    for a in args:
        collect(a, dirs)
    failed = skipped = 0
    for d in dirs:
        try:
            got, expected, skip = run_fixture(d)
        except Exception as e:  # noqa: BLE001 - report and go on
            got, expected, skip = "exception: %r" % e, "?", False
        if skip:
            skipped += 1
            print("skip %s (the host's write fence decides)" % d)
        elif got == expected:
            print("ok   %s" % d)
        else:
            failed += 1
            print("FAIL %s\n  expected: %s\n  got:      %s" % (d, expected, got))
    print("%d passed, %d failed, %d skipped" % (len(dirs) - failed - skipped, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
