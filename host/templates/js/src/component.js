// The WASM shell: WIT values in, src/plugin.js in the middle, WIT values out. componentize-js
// maps the world's exports to this module's exports and its imports to `kwop:reconciler/...`.
//
// WIT in JavaScript (componentize-js): records are objects with camelCase fields
// (`requeue-after-ms` is `requeueAfterMs`), enums are lowercase strings ('normal', 'warning'),
// `option<T>` is T or undefined, u64 is a BigInt, `json` is a string of JSON text (use
// JSON.stringify), and `result<outcome, failure>` is "return the outcome, throw the failure".

import { get } from 'kwop:reconciler/cache@0.1.0';
import { log } from 'kwop:reconciler/log@0.1.0';
import * as plugin from './plugin.js';

export function info() {
  return plugin.info;
}

export function reconcile(req) {
  const host = {
    get: (gvk, ns, name) => {
      const text = get(gvk, ns, name);
      return text === undefined ? undefined : JSON.parse(text);
    },
    log: (level, message) => log(level, String(message)),
  };
  let out;
  try {
    out = plugin.reconcile(JSON.parse(req.primary), host);
  } catch (e) {
    if (e instanceof Error) {
      // A bug, not a decision: report it (message and stack) as a failure that is retried.
      throw {
        message: `${e.name}: ${e.message}\n${e.stack ?? ''}`.trim(),
        events: [{ severity: 'warning', reason: 'ReconcileError', message: `${e.name}: ${e.message}` }],
        retry: true,
      };
    }
    throw e; // a failure from plugin.failure()
  }
  return {
    apply: out.apply.map((o) => JSON.stringify(o)),
    delete: [],
    status: out.status === undefined ? undefined : JSON.stringify(out.status),
    events: out.events,
    requeueAfterMs: undefined,
  };
}
