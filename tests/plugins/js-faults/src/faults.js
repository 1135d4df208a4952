// Where the js-faults plugin's errors come from (see component.js).
export function decide(foo) {
  if (foo.spec?.deploymentName === 'throw-in-reconcile') throw new Error(`reconcile exploded for ${foo.metadata.name}`);
}

export function cleanUp(foo) {
  if (foo.metadata.annotations?.['test.kwop.dev/fail-cleanup']) throw new Error('cleanup backend unavailable');
}

export function check(foo) {
  if (foo.spec?.deploymentName === 'throw-in-validate') throw new TypeError(`validate exploded for ${foo.metadata.name}`);
}
