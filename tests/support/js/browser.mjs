// The browser side of the JavaScript test drivers (tests/transceiver/e2e, realtime_e2e,
// sdp/tools, tests/golden/tools, bench/session_loadgen): where playwright-core comes from, the
// headless Chromium flags, one fresh profile per run and its teardown, the fake microphone's
// WAV, and the blank loopback page that gives a page an origin. Written once so every driver
// runs the same browser the same way. Nothing runs on import.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sleep, withTimeout } from './driver.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// playwright-core from tests/golden/tools/node_modules (`npm ci` there; or PLAYWRIGHT_CORE /
// NODE_PATH), so no test folder needs a second copy.
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

// The flags every browser driver takes (for parseArgs in driver.mjs) and their defaults: the
// Chromium binary, loopback candidates (auto|yes|no, see wantLoopback) and the fake
// microphone's WAV and tone frequency; checkBrowserOpts refuses a bad --allow-loopback.
export const BROWSER_DEFAULTS = { chromium: '/usr/bin/chromium', allowLoopback: 'auto', toneWav: null, toneHz: 440 };
export const BROWSER_FLAGS = {
  '--chromium': ['chromium', String], '--allow-loopback': ['allowLoopback', String],
  '--tone-wav': ['toneWav', String], '--tone-hz': ['toneHz', Number],
};
export function checkBrowserOpts(opts, usage) {
  if (!['auto', 'yes', 'no'].includes(opts.allowLoopback)) usage('--allow-loopback must be auto, yes or no');
}

// Chromium gathers no loopback candidates unless told; only needed on a machine whose only
// IPv4 address is loopback (`auto`).
export function wantLoopback(mode) {
  const hasNonLoopbackV4 = Object.values(os.networkInterfaces()).flat()
    .some((i) => i && !i.internal && (i.family === 'IPv4' || i.family === 4));
  return mode === 'yes' || (mode === 'auto' && !hasNonLoopbackV4);
}

// Headless Chromium with a fake microphone (the device's own beep, or `toneFile`, a WAV
// played in a loop: no %noloop suffix, so the sound lasts however long the call does; the
// received audio may then autoplay) and, with `allowLoopback`, loopback candidates.
export function chromiumArgs({ toneFile = null, allowLoopback = false } = {}) {
  return [
    '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
    ...(toneFile ? [`--use-file-for-fake-audio-capture=${toneFile}`, '--autoplay-policy=no-user-gesture-required'] : []),
    ...(allowLoopback ? ['--allow-loopback-in-peer-connection'] : []),
  ];
}

export const browserVersion = (context) => (context.browser() ? context.browser().version() : null);

// One browser run's resources: a persistent context on a fresh profile and the temporary
// directories made for it; close() is safe to call twice (watchdog, signal, finally).
export class BrowserRun {
  constructor() {
    this.context = null;
    this.dirs = [];
  }

  tempDir(prefix) {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }

  // Launches Chromium on a profile made under `profilePrefix`, grants `permissions` to
  // `origin` when one is given, and returns the first page.
  async launch({ executablePath, args, profilePrefix, viewport, origin, permissions = ['microphone'], chromium }) {
    const browserType = chromium || (await loadPlaywright()).chromium;
    const userDataDir = this.tempDir(profilePrefix);
    // headless:false so playwright adds no --headless of its own; args carry --headless=new.
    this.context = await withTimeout(browserType.launchPersistentContext(userDataDir, {
      executablePath, headless: false, args, timeout: 30000, ...(viewport ? { viewport } : {}),
    }), 35000, 'launching chromium');
    if (origin) await this.context.grantPermissions(permissions, { origin }).catch(() => {});
    return this.context.pages()[0] || await this.context.newPage();
  }

  async close() {
    const { context, dirs } = this;
    this.context = null;
    this.dirs = [];
    if (context) await Promise.race([context.close().catch(() => {}), sleep(5000)]);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}

// The fake microphone's WAV: opts.toneWav when given (usage() when it does not exist), else
// an opts.toneHz tone written by tests/transceiver/e2e/generate_tone.py into a temp dir of
// `run`'s.
export function fakeMicWav(run, { toneWav, toneHz }, usage) {
  if (toneWav) {
    if (!fs.existsSync(toneWav)) usage(`--tone-wav ${toneWav} does not exist`);
    return toneWav;
  }
  const out = path.join(run.tempDir('rtcedge-tone-'), 'tone.wav');
  const generator = path.join(REPO_ROOT, 'tests', 'transceiver', 'e2e', 'generate_tone.py');
  execFileSync('python3', [generator, out, '--hz', String(toneHz)], { stdio: 'ignore' });
  return out;
}

// A blank page on 127.0.0.1 (an ephemeral port): an origin secure enough for getUserMedia
// that sends nothing off the machine. Returns { origin, close() }.
export async function serveBlankPage(title, body = '') {
  const srv = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>${title}</title>${body}`);
  });
  await new Promise((res, rej) => { srv.once('error', rej); srv.listen(0, '127.0.0.1', res); });
  return {
    origin: `http://127.0.0.1:${srv.address().port}`,
    port: srv.address().port,
    close() { srv.closeAllConnections?.(); srv.close(); },
  };
}
