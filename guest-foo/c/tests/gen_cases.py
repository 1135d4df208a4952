#!/usr/bin/env python3
"""Writes differential test cases for tests/diff.sh to stdout, one per line:
<primary JSON text, as a JSON string> TAB <cached Deployment JSON text as a JSON string, or null>.

Hand-picked cases (valid Foos, every serde type error, odd names, odd Deployments, malformed
JSON) plus seeded random mutations of a valid Foo's text. Usage: gen_cases.py [N_RANDOM [SEED]]
"""
import json
import random
import sys


def case(primary, deployment=None):
    if not isinstance(primary, str):
        primary = json.dumps(primary, ensure_ascii=False)
    if deployment is not None and not isinstance(deployment, str):
        deployment = json.dumps(deployment, ensure_ascii=False)
    print(json.dumps(primary) + "\t" + json.dumps(deployment))


def foo(name="test", ns="default", uid="uid-test", spec=None, **extra):
    meta = {}
    if name is not None:
        meta["name"] = name
    if ns is not None:
        meta["namespace"] = ns
    if uid is not None:
        meta["uid"] = uid
    obj = {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": meta,
           "spec": {"deploymentName": "test", "replicas": 1} if spec is None else spec}
    obj.update(extra)
    return obj


def deploy(owner_uid=None, controller=True, available=None, **extra):
    d = {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "test", "namespace": "default"}, "spec": {"replicas": 1}}
    if owner_uid is not None:
        d["metadata"]["ownerReferences"] = [{"apiVersion": "samplecontroller.k8s.io/v1alpha1",
                                             "kind": "Foo", "name": "test", "uid": owner_uid,
                                             "controller": controller,
                                             "blockOwnerDeletion": True}]
    if available is not None:
        d["status"] = {"availableReplicas": available}
    d.update(extra)
    return d


ODD_VALUES_TEXT = [
    "null", "true", "false", "0", "-0", "5", "-5", "1.5", "3.0", "-0.0", "1e2", "1E2", "1e+2",
    "1.5e-7", "1e300", "-1e300", "1e-7", "1e-5", "1e-6", "123456789012345.6", "1e15", "1e16",
    "1e17", "0.1", "5e-324", "2.2250738585072014e-308", "1.7976931348623157e308",
    "18446744073709551615", "18446744073709551616", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "123456789012345678901234567890", "1.00000000000000000000000001",
    "0.30000000000000000000000000000000000001e1", "1e-400", "0e999999999999", "1e-999999999999",
    "12345678901234567890.123e-5", "9007199254740993", "-18446744073709551616",
    "\"3\"", "\"\"", "\"x at line 5 column 3\"", "[]", "[1]", "{}", "{\"a\":1}",
    "\"t\\u00e9\\u0301\\u0000\\n\\\"\"", "\"\\ud83d\\ude00\"",
]

NAMES = [
    "test", "", "Has_Upper", "-lead", "trail-", "a..b", ".a", "a.", "a.b-c.d9", "x" * 253,
    "x" * 254, "a" * 64, "café", "a\u0301", "tab\there", "quote\"s", "back\\slash", "nul\u0000",
    "del\u007f", "soft\u00adhyphen", "emoji😀", "\u2028line", "\ufeffbom", "\u200bzw",
    "\U000e0001tag", "\U0010ffff", "it's", "new\nline", "\u0085nel", "\u0300", "ok-name",
    "0", "9a", "a-", "a_b", "A", "with space", "ümlaut", "\u3000ideo", "\ud7ff\ue000",
]


def main():
    n_random = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rnd = random.Random(seed)

    # the fixtures' shapes
    case(foo())
    case(foo(spec={"deploymentName": "test"}))
    case(foo(spec={"deploymentName": "test", "replicas": 3}), deploy("uid-test", available=3))
    case(foo(), deploy())
    case(foo(), deploy("uid-other"))
    case(foo(), deploy("uid-test", controller=False))
    case(foo(), deploy("uid-test", controller="true"))
    case(foo(), deploy("uid-test", controller=None))
    case(foo(uid=""), deploy(""))
    case(foo(uid=None), deploy(""))
    case(foo(spec={"deploymentName": ""}))
    case(foo(spec={"replicas": 1}))
    case(foo(spec={}))
    case(foo(spec={"deploymentName": None, "replicas": None}))
    case(foo(ns=None))
    case(foo(ns=""))
    case(foo(name=None, ns=None, uid=None))
    case({"spec": {"deploymentName": "d"}})
    case({})
    case({"spec": "nope"})
    for p in ["[]", "5", "\"s\"", "null", "true", "[{}]", "[{}, {\"deploymentName\": \"x\"}]",
              "[{}, {}, 1]", "[[\"n\", \"ns\", \"uid\"], [\"dn\", 7]]",
              "[[\"n\", \"ns\", \"uid\", \"extra\"], []]", "[null]", "[{}, null]",
              "{\"metadata\": null}", "{\"metadata\": []}", "{\"metadata\": [\"a\"]}",
              "{\"spec\": [\"dn\"]}", "{\"spec\": [\"dn\", 2, 3]}", "{\"spec\": [null, null]}",
              "{\"spec\": {\"deploymentName\": \"a\"}, \"spec\": {\"deploymentName\": \"b\"}}",
              "{\"metadata\": {\"name\": 1, \"name\": \"ok\"}, \"spec\": {\"deploymentName\": \"a\"}}",
              "{\"spec\": {\"deploymentName\": 5, \"replicas\": \"x\"}, \"metadata\": {\"uid\": 1}}",
              "{\"spec\": {\"replicas\": \"x\", \"deploymentName\": 5}}",
              " \n\t\r{\"spec\":{\"deploymentName\":\"w\"}} \n\t\r"]:
        case(p)

    # every odd value in every field we read
    for v in ODD_VALUES_TEXT:
        for field in ["name", "namespace", "uid"]:
            meta = {"name": "\"test\"", "namespace": "\"default\"", "uid": "\"u\""}
            meta[field] = v
            m = ",".join(f"\"{k}\":{x}" for k, x in meta.items())
            case("{\"metadata\":{" + m + "},\"spec\":{\"deploymentName\":\"test\",\"replicas\":1}}")
        case("{\"metadata\":{\"name\":\"n\"},\"spec\":{\"deploymentName\":" + v + "}}")
        case("{\"metadata\":{\"name\":\"n\"},\"spec\":{\"deploymentName\":\"d\",\"replicas\":" + v + "}}")
        case("{\"metadata\":" + v + "}")
        case("{\"spec\":" + v + "}")
        case(v)
        d = json.dumps(deploy("uid-test"))[:-1] + ",\"status\":{\"availableReplicas\":" + v + "}}"
        case(foo(), d)
        d = json.dumps(deploy())[:-1]
        case(foo(), d.replace("\"metadata\": {", "\"metadata\": {\"ownerReferences\": " + v + ", ", 1) + "}")
        case(foo(), "{\"metadata\":{\"ownerReferences\":[{\"controller\":true,\"uid\":" + v + "}]}}")
        case(foo(), "{\"metadata\":{\"ownerReferences\":[{\"controller\":" + v + ",\"uid\":\"uid-test\"}]}}")
        case(foo(), "{\"status\":" + v + ",\"metadata\":{\"ownerReferences\":[{\"controller\":true,\"uid\":\"uid-test\"}]}}")
        case(foo(), v)

    # names: as deploymentName, Foo name, namespace
    for n in NAMES:
        case(foo(spec={"deploymentName": n, "replicas": 2}))
        case(foo(name=n))
        case(foo(ns=n))
        case(foo(ns=n, uid=n), deploy(n))
        case(foo(spec={"deploymentName": n}), deploy("uid-test"))

    # Deployments
    for d in [deploy("uid-test", available=2), deploy("uid-test", available=-1),
              deploy("uid-test", available=None), "null", "[]", "5", "{}", "{\"metadata\":[]}",
              "[{\"metadata\":{}}]", "{", "not json", "{\"a\":1,}", "",
              {"metadata": {"ownerReferences": [{"controller": False, "uid": "uid-test"},
                                                {"controller": True, "uid": "uid-test"}]},
               "status": {"availableReplicas": 7}},
              {"metadata": {"ownerReferences": [{"controller": True, "uid": "other"},
                                                {"controller": True, "uid": "uid-test"}]}},
              {"metadata": {"ownerReferences": [5, None, [], {"controller": True, "uid": "uid-test"}]}},
              {"metadata": {"ownerReferences": {"controller": True, "uid": "uid-test"}}},
              ]:
        case(foo(), d)

    # malformed JSON
    bad = ["", " ", "{", "[", "{\"a\"", "{\"a\":", "{\"a\" 1}", "{\"a\":1,}", "[1,]", "[1 2]",
           "{1:2}", "{,}", "[,]", "[,1]", "nul", "nulx", "tru", "fals", "01", "-", "-a", "1.",
           "1.a", "1e", "1e+", "1ex", ".5", "+1", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"",
           "\"\\uD800\"", "\"\\uD800\\u0041\"", "\"\\uDC00\"", "\"\\uD800x\"", "\"\\uD800\\x\"",
           "\"\\uD800\\", "\"\\uD800", "\"\\", "\"a\u0001\"", "\"a\u001f\"", "{} x", "{}\n\n  x",
           "{}}", "1e400", "-1e400", "1e309", "17976931348623157e292", "17976931348623159e292",
           "1e99999999999", "-1e99999999999", "[1e400]", "{\"a\":[1,\n2,\n}", "[\n\n  1\n  2]",
           "\u00e9", "{\"\u00e9\u00e9\":\u00e9}", "\"\u00e9\u00e9\u00e9\u0001\"", "{\"a\":nulL}",
           "[" * 126 + "]" * 126, "[" * 127 + "]" * 127, "[" * 128 + "]" * 128,
           "{\"a\":" * 127 + "1" + "}" * 127, "{\"a\":" * 128 + "1" + "}" * 128,
           "[" * 200, "123456789012345678901234567890e-10", "1.0e", "-01", "-0.e1", "0.0e-0",
           "[1]  ,", "[\"a\"\"b\"]", "{\"a\":1 \"b\":2}", "{\"a\":1:2}", "tRue", "nan", "Infinity",
           "[-]", "\"\\/\\b\\f\\n\\r\\t\"", "[true,false,null]", "{\"k\":\"\\u0000\"}"]
    for b in bad:
        case(b)
        case(foo(), b)

    # random mutations of a Foo's text
    base = [json.dumps(foo()), json.dumps(foo(), indent=2),
            json.dumps(foo(spec={"deploymentName": "a.b", "replicas": 12345678901234567890})),
            json.dumps(foo(name="é\"\\n", spec={"deploymentName": "x-y"}), indent=1)]
    alphabet = "{}[]\":,.-+eE0123456789 \n\t\\/u abcnlrtf\u00e9\u0001\u0301\U0001f600"
    for _ in range(n_random):
        s = list(rnd.choice(base))
        for _ in range(rnd.randint(1, 4)):
            op = rnd.random()
            pos = rnd.randrange(len(s) + 1)
            if op < 0.33 and s:
                del s[min(pos, len(s) - 1)]
            elif op < 0.66:
                s.insert(pos, rnd.choice(alphabet))
            elif s:
                s[min(pos, len(s) - 1)] = rnd.choice(alphabet)
        text = "".join(s)
        if rnd.random() < 0.5:
            case(text)
        else:
            case(foo(), text)


if __name__ == "__main__":
    main()
