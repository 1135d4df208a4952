// Regenerates types/ (TypeScript declarations of the WIT world, for a guest) from
// wit/v0.2/reconciler.wit with jco's guest type generator, the jco pinned by guest-foo/js.
//
//   node wit/js/gen-types.mjs [--check]     (after guest-foo/js/build.sh or `npm ci` there)
//
// `jco guest-types` itself fails on jco 1.35.0 ("failed to read path for WIT": its WASI shim
// starts with no preopened directory); this calls the same generator with "/" preopened.
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const modules = process.env.KWOP_JCO_NODE_MODULES ?? join(here, '../../guest-foo/js/node_modules');
const transpile = join(modules, '@bytecodealliance/jco-transpile/dist/index.js');
if (!existsSync(transpile)) {
  console.error(`gen-types: no jco in ${modules} (run guest-foo/js/build.sh once, or set KWOP_JCO_NODE_MODULES)`);
  process.exit(1);
}
const shim = createRequire(transpile).resolve('@bytecodealliance/preview2-shim/filesystem');
(await import(pathToFileURL(shim)))._setPreopens({ '/': '/' });
const { generateGuestTypes } = await import(pathToFileURL(transpile));
const out = join(here, 'types');
const files = await generateGuestTypes(resolve(here, '../v0.2'), { worldName: 'reconciler', outDir: `${out}/` });
const check = process.argv.includes('--check');
let stale = 0;
for (const [path, bytes] of Object.entries(files)) {
  const text = new TextDecoder().decode(bytes);
  if (check) {
    if (!existsSync(path) || readFileSync(path, 'utf8') !== text) {
      console.error(`gen-types: ${path} is stale: run node wit/js/gen-types.mjs`);
      stale++;
    }
  } else {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
}
if (stale) process.exit(1);
console.error(`gen-types: ${Object.keys(files).length} files ${check ? 'up to date' : 'written'} in ${out}`);
