// The WASM shell: the world's exports (kwop:reconciler@0.2: info, reconcile, finalize, validate)
// from kwop's helper module (src/kwop.js), src/plugin.js in
// the middle. componentize-js maps the world's exports to this module's exports and its imports
// to `kwop:reconciler/...`. kwop.js turns the WIT into plain JavaScript: the request's JSON text
// is parsed, the Outcome's objects are sent as JSON text, a thrown Failure is the WIT `failure`,
// and any other thrown error becomes a retried failure with its message and stack (in validate:
// a failed call, so the webhook's failurePolicy applies).
//
// Without the helper, WIT in JavaScript (componentize-js) is: records are objects with camelCase
// fields (`requeue-after-ms` is `requeueAfterMs`), enums are lowercase strings ('normal'),
// `option<T>` is T or undefined, u64 is a BigInt, `json` is a string of JSON text, and
// `result<outcome, failure>` is "return the outcome, throw the failure record" (validate's
// `result<list<string>, list<violation>>`: return the warnings, throw the violations).

import * as cache from 'kwop:reconciler/cache@0.2.0';
import * as log from 'kwop:reconciler/log@0.2.0';
import { plugin } from './kwop.js';
import * as definition from './plugin.js';

export const { info, reconcile, finalize, validate } = plugin(definition, { cache, log });
