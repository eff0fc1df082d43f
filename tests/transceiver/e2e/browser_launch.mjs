// Headless Chromium for the browser end-to-end drivers (browser_e2e.mjs here,
// ../realtime_e2e/realtime_e2e.mjs): where playwright-core comes from and the fake-media
// flags, written once so both tests run the same browser the same way.
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// playwright-core from tests/golden/tools/node_modules (or PLAYWRIGHT_CORE / NODE_PATH), so
// no test folder needs a second copy.
export async function loadPlaywright() {
  const candidates = [];
  if (process.env.PLAYWRIGHT_CORE) candidates.push(process.env.PLAYWRIGHT_CORE);
  candidates.push(path.join(REPO_ROOT, 'tests', 'golden', 'tools', 'package.json'));
  for (const c of candidates) {
    try {
      const resolved = createRequire(c.endsWith('.json') ? c : path.join(c, 'package.json')).resolve('playwright-core');
      const mod = await import(pathToFileURL(resolved).href);
      return mod.chromium ? mod : mod.default; // a CommonJS entry arrives as the default export
    } catch { /* try the next one */ }
  }
  return import('playwright-core'); // NODE_PATH or a global install
}

// Chromium gathers no loopback candidates unless told; only needed on a machine whose only
// IPv4 address is loopback (`auto`).
export function wantLoopback(mode) {
  const hasNonLoopbackV4 = Object.values(os.networkInterfaces()).flat()
    .some((i) => i && !i.internal && (i.family === 'IPv4' || i.family === 4));
  return mode === 'yes' || (mode === 'auto' && !hasNonLoopbackV4);
}

// The fake microphone plays `toneFile` (a WAV) in a loop: no %noloop suffix, so the sound
// lasts however long the call does.
export function chromiumArgs(toneFile, allowLoopback) {
  return [
    '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${toneFile}`,
    '--autoplay-policy=no-user-gesture-required',
    ...(allowLoopback ? ['--allow-loopback-in-peer-connection'] : []),
  ];
}
