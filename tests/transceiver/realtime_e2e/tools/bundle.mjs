#!/usr/bin/env node
// Bundles a page module and its npm imports (the unchanged @openai/agents-realtime) into one
// browser ES module with esbuild's JS API, which works whether or not npm ran esbuild's
// postinstall (that step swaps bin/esbuild for the native binary).
//   node tools/bundle.mjs ENTRY.mjs OUT.js
import { build } from 'esbuild';

const [entry, outfile] = process.argv.slice(2);
if (!entry || !outfile) {
  console.error('usage: node bundle.mjs ENTRY.mjs OUT.js');
  process.exit(2);
}
const result = await build({
  entryPoints: [entry], outfile, bundle: true, format: 'esm', platform: 'browser', target: 'chrome120',
  logLevel: 'warning', metafile: true,
  // The entry lives outside tools/, so tell esbuild where its packages are.
  nodePaths: [new URL('./node_modules', import.meta.url).pathname],
});
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(JSON.stringify({ outfile, bytes, inputs: Object.keys(result.metafile.inputs).length }));
