// The WASM shell: the world's exports (kwop:reconciler@0.2) from wit/js/kwop.js (copied next to
// this file by build.sh), foo.js `sync` and `admit` in the middle. componentize-js maps the
// world's exports to this module's exports and its imports to the `kwop:reconciler/...` modules.
//
// json.js is the JSON codec (numbers as the Rust guest's serde_json sees them), so the helper
// parses the request and the cache answers with it, and prints the intents and the status with it.

import * as cache from 'kwop:reconciler/cache@0.2.0';
import * as log from 'kwop:reconciler/log@0.2.0';
import { Failure, Outcome, allow, deny, gvk, plugin, violation } from './kwop.js';
import { parse, stringify } from './json.js';
import { admit, sync } from './foo.js';

const deployments = gvk('apps', 'v1', 'Deployment');

export const { info, reconcile, finalize, validate } = plugin(
  {
    info: {
      name: 'guest-foo-js',
      version: '0.1.0',
      primary: gvk('samplecontroller.k8s.io', 'v1alpha1', 'Foo'),
      owns: [deployments],
      // Nothing to clean up: the Deployment has the Foo as its controller owner, and Kubernetes'
      // garbage collector deletes it with the Foo (as guest-foo, in Rust, does not finalize).
      finalizes: false,
    },
    reconcile(foo, ctx) {
      // sample-controller's deploymentsLister.Deployments(ns).Get(name), from the host's cache.
      const r = sync(foo, (ns, name) => ctx.get(deployments, ns, name));
      if (r.err) throw new Failure(r.err.message, { retry: r.err.retry, events: r.err.events });
      return new Outcome()
        .apply(...r.ok.apply)
        .status(r.ok.status)
        .event(...r.ok.events);
    },
    // Admission: the Rust guest's rules (invalid, missing and foreign deploymentName refused).
    validate({ object, oldObject }, ctx) {
      const r = admit(object, oldObject, (ns, name) => ctx.get(deployments, ns, name));
      return r.violations ? deny(...r.violations.map((v) => violation(v.field, v.message))) : allow(...r.warnings);
    },
  },
  { cache, log, json: { parse, stringify } },
);
