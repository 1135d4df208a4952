// A JavaScript test plugin whose code throws where a Foo asks it to (tests/tests/lang_js.rs):
// spec.deploymentName "throw-in-reconcile" makes reconcile throw, "throw-in-validate" makes
// validate throw, "deny-me" is refused; finalize throws while the Foo carries the annotation `test.kwop.dev/fail-cleanup`.
// Otherwise it applies a ConfigMap `<name>-seen`, admits everything and finalizes at once. The
// errors are thrown in faults.js, so their stacks must name that file.
import * as cache from 'kwop:reconciler/cache@0.2.0';
import * as log from 'kwop:reconciler/log@0.2.0';
import { Finalize, Outcome, deny, gvk, normal, plugin, violation } from './kwop.js';
import { cleanUp, check, decide } from './faults.js';

const configMaps = gvk('', 'v1', 'ConfigMap');

export const { info, reconcile, finalize, validate } = plugin(
  {
    info: { name: 'js-faults', version: '0.1.0', primary: gvk('samplecontroller.k8s.io', 'v1alpha1', 'Foo'), owns: [configMaps] },
    reconcile(foo) {
      decide(foo);
      return new Outcome()
        .applyAs(configMaps, { metadata: { name: `${foo.metadata.name}-seen` }, data: { seen: 'yes' } })
        .event(normal('Seen', 'reconciled'));
    },
    finalize(foo) {
      cleanUp(foo);
      return Finalize.done();
    },
    validate({ object }) {
      check(object);
      if (object.spec?.deploymentName === 'deny-me') return deny(violation('spec.deploymentName', 'js-faults denies deny-me'));
      return [];
    },
  },
  { cache, log },
);
