"""The WASM shell: componentize-py calls this module's class `WitWorld` (that exact name) for the
world's exports. kwop's helper module (src/kwop.py) writes that class from the plain Python
plugin in src/plugin.py: the request's JSON text is parsed, the Outcome's objects are sent as
JSON text (json.dumps), a raised kwop.Failure is the WIT `failure`, and any other exception
becomes a retried failure with its traceback.

Without the helper, WIT in Python (componentize-py) is: records are dataclasses with snake_case
fields (`requeue-after-ms` is `requeue_after_ms`), enums are `types.EventType.NORMAL`,
`option<T>` is T or None, `json` is a str of JSON text, and `result<outcome, failure>` is "return
the Outcome, raise Err(Failure)". `./build.sh bindings` writes the generated `wit_world` package
to bindings/ for your editor.
"""

import kwop
import plugin

WitWorld = kwop.export(plugin.Plugin())
