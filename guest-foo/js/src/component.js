// The WASM shell: WIT types in, foo.js `sync` in the middle, WIT types out. The component's entry
// module (componentize-js maps the world's exports to this module's exports and its imports to
// the `kwop:reconciler/...` modules).
//
// WIT in JS (componentize-js): records are objects with camelCase fields, enums are their
// lowercase names, `option<T>` is T or undefined, u64 is a BigInt, and a thrown object is the
// `err` of a `result`.

import { get } from 'kwop:reconciler/cache@0.1.0';
import { log } from 'kwop:reconciler/log@0.1.0';
import { parse, stringify } from './json.js';
import { sync } from './foo.js';

const deploymentGvk = () => ({ group: 'apps', version: 'v1', kind: 'Deployment' });

export function info() {
  return {
    name: 'guest-foo-js',
    version: '0.1.0',
    primary: { group: 'samplecontroller.k8s.io', version: 'v1alpha1', kind: 'Foo' },
    owns: [deploymentGvk()],
    reads: [],
  };
}

export function reconcile(req) {
  let foo;
  try {
    foo = parse(req.primary);
  } catch (e) {
    throw { message: `primary is not JSON: ${e.message}`, events: [], retry: false };
  }
  // sample-controller's deploymentsLister.Deployments(ns).Get(name), from the host's cache.
  const lookup = (ns, name) => {
    const json = get(deploymentGvk(), ns, name);
    if (json === undefined || json === null) return undefined;
    try {
      return parse(json);
    } catch (e) {
      log('error', `cached Deployment ${ns}/${name} is not JSON: ${e.message}`);
      return undefined;
    }
  };
  const r = sync(foo, lookup);
  if (r.err) throw r.err;
  return {
    apply: r.ok.apply.map(stringify),
    delete: [],
    status: stringify(r.ok.status),
    events: r.ok.events,
    requeueAfterMs: undefined,
  };
}
