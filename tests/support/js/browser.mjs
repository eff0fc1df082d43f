// The browser side of the JavaScript test drivers (tests/transceiver/e2e, realtime_e2e,
// sdp/tools, tests/golden/tools, bench/session_loadgen): where playwright-core comes from, the
// headless Chromium flags, one fresh profile per run and its teardown, the fake microphone's
// WAV, and the blank loopback page that gives a page an origin. Written once so every driver
// runs the same browser the same way. Firefox ESR (browser_e2e.mjs --browser firefox) runs
// through puppeteer-core over WebDriver BiDi, its page wrapped in the few playwright Page calls
// the drivers use (PlaywrightLikePage). Nothing runs on import.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sleep, withTimeout } from './driver.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// A package from tests/golden/tools/node_modules (`npm ci` there; or the directory in the
// environment variable `envVar` / NODE_PATH), so no test folder needs a second copy. `pick`
// chooses between the module and its default export (a CommonJS entry arrives as the latter).
async function loadTool(name, envVar, pick) {
  const candidates = [];
  if (process.env[envVar]) candidates.push(process.env[envVar]);
  candidates.push(path.join(REPO_ROOT, 'tests', 'golden', 'tools', 'package.json'));
  for (const c of candidates) {
    try {
      const resolved = createRequire(c.endsWith('.json') ? c : path.join(c, 'package.json')).resolve(name);
      return pick(await import(pathToFileURL(resolved).href));
    } catch { /* try the next one */ }
  }
  return import(name); // NODE_PATH or a global install
}

// playwright-core (or PLAYWRIGHT_CORE): drives Chromium over CDP.
export const loadPlaywright = () => loadTool('playwright-core', 'PLAYWRIGHT_CORE', (mod) => (mod.chromium ? mod : mod.default));

// puppeteer-core (or PUPPETEER_CORE): drives Debian's stock Firefox ESR over WebDriver BiDi,
// which playwright-core cannot (it needs its own patched Firefox build).
export const loadPuppeteer = () => loadTool('puppeteer-core', 'PUPPETEER_CORE', (mod) => (mod.launch ? mod : mod.default));

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

// Firefox needs its loopback candidates whenever the server may be on loopback, not only on a
// loopback-only machine: its ICE agent never pairs a non-loopback host candidate with a
// loopback remote one (Chromium does, and sends from eth0's address to 127.0.0.1). So only
// `no` turns them off.
export const wantLoopbackFirefox = (mode) => mode !== 'no';

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

// The flags of a driver that can run either browser (browser_e2e.mjs): which one, and the
// Firefox binary. Not in BROWSER_FLAGS, so drivers that only know Chromium refuse them.
export const BROWSER_CHOICE_DEFAULTS = { browser: 'chromium', firefox: '/usr/bin/firefox-esr' };
export const BROWSER_CHOICE_FLAGS = { '--browser': ['browser', String], '--firefox': ['firefox', String] };

// Firefox's preferences for a call from a test, the counterpart of chromiumArgs:
// - media.navigator.streams.fake: fake devices; the fake microphone is a continuous sine at
//   media.navigator.audio.fake_frequency (1000 Hz unless set), set to `toneHz` here. Firefox
//   cannot play a WAV as its microphone (Chromium's --use-file-for-fake-audio-capture).
// - media.navigator.permission.disabled: getUserMedia without the permission prompt.
// - media.navigator.permission.fake: a fake device then counts as capturing. Without it the
//   page is "not capturing, no permission", and Firefox gathers only the default route's
//   address ("use only default local addresses"): no loopback candidate, no call to 127.0.0.1.
// - media.peerconnection.ice.loopback (`allowLoopback`, see wantLoopbackFirefox): host
//   candidates on loopback, as --allow-loopback-in-peer-connection.
// - media.autoplay.default 0: the received audio may play without a gesture, as Chromium's
//   --autoplay-policy=no-user-gesture-required (a capturing page is allowed anyway).
// No audio output device is faked: without one the page's AudioContext stays 'suspended' and
// the page's captureReceived records the track instead (transceiver/web/index.html).
// media.cubeb.force_mock_context would run it, but its clock runs ~4 % slow and drives the
// fake microphone too, so the server's real-time playout runs dry every ~220 ms (gaps in the
// echo, tone SNR ~10 dB instead of ~39).
export function firefoxPrefs({ toneHz, allowLoopback = false }) {
  return {
    'media.navigator.streams.fake': true,
    'media.navigator.audio.fake_frequency': toneHz,
    'media.navigator.permission.disabled': true,
    'media.navigator.permission.fake': true,
    'media.peerconnection.ice.loopback': allowLoopback,
    'media.autoplay.default': 0,
  };
}

// A puppeteer Page behind the playwright Page calls the drivers make (on console/pageerror/
// request, goto, evaluate, click, uncheck, fill, screenshot), so one run() drives either
// browser. Only the differences are translated: puppeteer's console type 'warn' is
// playwright's 'warning'; a BiDi request's body is only available asynchronously
// (fetchPostData), so the 'request' listener runs once it is there.
export class PlaywrightLikePage {
  constructor(page) { this.page = page; }

  on(event, fn) {
    if (event === 'console') {
      this.page.on('console', (m) => fn({ type: () => (m.type() === 'warn' ? 'warning' : m.type()), text: () => m.text() }));
    } else if (event === 'request') {
      this.page.on('request', async (r) => {
        const body = r.hasPostData() ? await r.fetchPostData().catch(() => null) : null;
        fn({ method: () => r.method(), url: () => r.url(), postData: () => body ?? null });
      });
    } else {
      this.page.on(event, fn);
    }
  }

  goto(url, opts) { return this.page.goto(url, opts); }
  evaluate(fn, arg) { return this.page.evaluate(fn, arg); }
  click(selector) { return this.page.click(selector); }
  fill(selector, value) { return this.page.locator(selector).fill(value); }
  screenshot(opts) { return this.page.screenshot(opts); }

  // As playwright's: clicks a checked box, then insists it is unchecked.
  async uncheck(selector) {
    if (await this.page.$eval(selector, (e) => e.checked)) await this.page.click(selector);
    if (await this.page.$eval(selector, (e) => e.checked)) throw new Error(`${selector} is still checked after a click`);
  }
}

// One browser run's resources: a persistent context on a fresh profile and the temporary
// directories made for it; close() is safe to call twice (watchdog, signal, finally).
export class BrowserRun {
  constructor() {
    this.context = null;
    this.browser = null; // puppeteer's Browser, for Firefox
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

  // Launches Firefox (puppeteer-core, WebDriver BiDi, headless) with `prefs` on a profile made
  // under `profilePrefix`, and returns its first page as a PlaywrightLikePage. No permission is
  // granted here: Firefox's BiDi has no "microphone" permission (firefoxPrefs does it instead).
  async launchFirefox({ executablePath, prefs, profilePrefix, viewport, puppeteer }) {
    const pptr = puppeteer || await loadPuppeteer();
    const userDataDir = this.tempDir(profilePrefix);
    this.browser = await withTimeout(pptr.launch({
      browser: 'firefox', protocol: 'webDriverBiDi', executablePath, headless: true, userDataDir,
      extraPrefsFirefox: prefs, timeout: 30000, defaultViewport: viewport || null,
    }), 35000, 'launching firefox');
    const page = (await this.browser.pages())[0] || await this.browser.newPage();
    return new PlaywrightLikePage(page);
  }

  async close() {
    const { context, browser, dirs } = this;
    this.context = null;
    this.browser = null;
    this.dirs = [];
    if (context) await Promise.race([context.close().catch(() => {}), sleep(5000)]);
    if (browser) {
      await Promise.race([browser.close().catch(() => {}), sleep(5000)]);
      // A Firefox that did not quit in time must not outlive the run (nor keep its profile busy).
      const proc = browser.process();
      if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    }
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
