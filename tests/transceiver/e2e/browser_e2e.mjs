#!/usr/bin/env node
// Browser end-to-end test of an rtcedge transceiver through its own demo page.
//
// Headless Chromium opens GET / on the transceiver, clicks Talk (the page's own code path),
// speaks a 440 Hz tone through the fake microphone (--use-file-for-fake-audio-capture) and,
// with the echo-loopback backend, must hear the same tone back. Then it checks getStats, the
// session JSON, /metrics, clicks Hang up and checks the session is gone.
//
// Usage:
//   node browser_e2e.mjs --url http://127.0.0.1:8080 [--expect-path direct|relay]
//        [--timeout-s 60] [--screenshot out.png] [--tone-wav FILE] [--tone-hz 440]
//        [--capture-s 3] [--api-key K] [--chromium /usr/bin/chromium]
//        [--allow-loopback auto|yes|no] [--no-audio-check] [--rtt-sample-s S]
//
// --rtt-sample-s S: after media flows, polls the selected pair's currentRoundTripTime every
// 100 ms for S seconds (summary.pair_rtt_samples_ms; run_global_sim.py takes their median).
//
// stdout: one JSON summary. Exit code 0 = every check passed, 1 = a check failed or timed
// out, 2 = bad usage. playwright-core comes from tests/golden/tools/node_modules (or
// NODE_PATH / PLAYWRIGHT_CORE), so no second node_modules is needed here.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromiumArgs, loadPlaywright, wantLoopback } from './browser_launch.mjs';
import { analyseTone } from './tone_analysis.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------- arguments
function usage(msg) {
  if (msg) console.error(`error: ${msg}`);
  console.error('usage: node browser_e2e.mjs --url URL [--expect-path direct|relay] [--timeout-s S] ' +
    '[--screenshot FILE.png] [--tone-wav FILE] [--tone-hz HZ] [--capture-s S] [--api-key K] ' +
    '[--chromium PATH] [--allow-loopback auto|yes|no] [--no-audio-check]');
  process.exit(2);
}

const opts = {
  url: null, expectPath: null, timeoutS: 60, screenshot: null, toneWav: null, toneHz: 440, captureS: 3,
  apiKey: '', chromium: '/usr/bin/chromium', allowLoopback: 'auto', audioCheck: true, rttSampleS: 0,
};
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    switch (a) {
      case '--url': opts.url = val().replace(/\/+$/, ''); break;
      case '--expect-path': opts.expectPath = val(); break;
      case '--timeout-s': opts.timeoutS = Number(val()); break;
      case '--screenshot': opts.screenshot = val(); break;
      case '--tone-wav': opts.toneWav = val(); break;
      case '--tone-hz': opts.toneHz = Number(val()); break;
      case '--capture-s': opts.captureS = Number(val()); break;
      case '--api-key': opts.apiKey = val(); break;
      case '--chromium': opts.chromium = val(); break;
      case '--allow-loopback': opts.allowLoopback = val(); break;
      case '--no-audio-check': opts.audioCheck = false; break;
      case '--rtt-sample-s': opts.rttSampleS = Number(val()); break;
      case '-h': case '--help': usage();
      default: usage(`unknown argument ${a}`);
    }
  }
}
if (!opts.url || !/^https?:\/\//.test(opts.url)) usage('--url http://HOST:PORT is required');
if (opts.expectPath && !['direct', 'relay'].includes(opts.expectPath)) usage('--expect-path must be direct or relay');
if (!(opts.timeoutS > 0) || !(opts.toneHz > 0) || !(opts.captureS >= 1)) usage('bad --timeout-s, --tone-hz or --capture-s');
if (!(opts.rttSampleS >= 0 && opts.rttSampleS <= 60)) usage('--rtt-sample-s must be 0..60');
if (!['auto', 'yes', 'no'].includes(opts.allowLoopback)) usage('--allow-loopback must be auto, yes or no');

const log = (...a) => console.error('[e2e]', ...a);

// ---------------------------------------------------------------- helpers
const deadlineAt = Date.now() + opts.timeoutS * 1000;
const remainingMs = () => Math.max(0, deadlineAt - Date.now());
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise,
    new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timed out after ${(ms / 1000).toFixed(1)} s: ${what}`)), ms); }),
  ]).finally(() => clearTimeout(t));
}

async function waitFor(what, fn, { intervalMs = 200, limitMs = remainingMs() } = {}) {
  const until = Date.now() + Math.min(limitMs, remainingMs());
  let last;
  for (;;) {
    last = await fn();
    if (last && last.ok) return last;
    if (Date.now() >= until) throw new Error(`timed out waiting for ${what}${last && last.why ? ` (last: ${last.why})` : ''}`);
    await sleep(intervalMs);
  }
}

async function http(method, url, ms = 3000) {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), ms);
  try {
    const headers = opts.apiKey ? { Authorization: `Bearer ${opts.apiKey}` } : {};
    const res = await fetch(url, { method, headers, signal: ctl.signal });
    return { status: res.status, text: await res.text() };
  } catch (e) {
    return { status: 0, text: e.message };
  } finally {
    clearTimeout(t);
  }
}

function parseMetric(text, name) {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m && m[1] === name) return Number(m[3]);
  }
  return null;
}

async function sessionsActive() {
  const r = await http('GET', `${opts.url}/metrics`);
  return r.status === 200 ? parseMetric(r.text, 'rtcedge_transceiver_sessions_active') : null;
}

function ensureToneWav() {
  if (opts.toneWav) {
    if (!fs.existsSync(opts.toneWav)) usage(`--tone-wav ${opts.toneWav} does not exist`);
    return { file: opts.toneWav, tmpDir: null };
  }
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtcedge-tone-'));
  const file = path.join(tmpDir, 'tone.wav');
  execFileSync('python3', [path.join(HERE, 'generate_tone.py'), file, '--hz', String(opts.toneHz)], { stdio: 'ignore' });
  return { file, tmpDir };
}

// ---------------------------------------------------------------- main
const resources = { context: null, userDataDir: null, toneDir: null };

async function cleanup() {
  const { context, userDataDir, toneDir } = resources;
  resources.context = resources.userDataDir = resources.toneDir = null;
  if (context) await Promise.race([context.close().catch(() => {}), sleep(5000)]);
  for (const d of [userDataDir, toneDir]) if (d) fs.rmSync(d, { recursive: true, force: true });
}

async function run(summary) {
  const checks = summary.checks;
  const check = (name, ok, detail) => {
    checks.push({ name, ok: Boolean(ok), detail });
    log(`${ok ? 'PASS' : 'FAIL'} ${name}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
    return ok;
  };

  const { chromium } = await loadPlaywright();
  const tone = ensureToneWav();
  resources.toneDir = tone.tmpDir;

  const args = chromiumArgs(tone.file, wantLoopback(opts.allowLoopback));
  summary.chromium_args = args;
  resources.userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtcedge-e2e-chromium-'));
  // headless:false so playwright adds no --headless of its own; we pass --headless=new.
  const context = await withTimeout(chromium.launchPersistentContext(resources.userDataDir, {
    executablePath: opts.chromium, headless: false, args, timeout: 30000, viewport: { width: 1100, height: 860 },
  }), 35000, 'launching chromium');
  resources.context = context;
  summary.browser_version = context.browser() ? context.browser().version() : null;
  await context.grantPermissions(['microphone'], { origin: new URL(opts.url).origin }).catch(() => {});
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log(`page console.${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  // The page POSTs right after setLocalDescription, before ICE gathering: the offer the
  // server gets has no a=candidate line, and the call must connect anyway (ICE-lite server).
  const offers = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/sessions') offers.push(r.postData() || '');
  });

  // ---- open the demo page and talk
  const resp = await page.goto(`${opts.url}/`, { timeout: Math.min(15000, remainingMs()) });
  if (!check('demo page served', resp && resp.status() === 200, resp ? resp.status() : 'no response')) return;
  if (!check('demo page exposes rtcedgeDebug', await page.evaluate(() => typeof window.rtcedgeDebug === 'object'))) return;
  // The tone must reach the server untouched: noise suppression treats a steady sine as noise.
  await page.uncheck('#voiceproc');
  if (opts.apiKey) await page.fill('#apikey', opts.apiKey);
  const clickedAt = Date.now();
  await page.click('#talk');

  const phase = await waitFor('the page to reach connected', async () => {
    const p = await page.evaluate(() => ({ phase: rtcedgeDebug.phase, error: rtcedgeDebug.error }));
    if (p.phase === 'error') throw new Error(`page reports an error: ${p.error}`);
    return { ok: p.phase === 'connected', why: p.phase };
  });
  void phase;
  summary.connected = true;
  summary.time_to_connected_wall_ms = Date.now() - clickedAt;
  summary.page_timings = await page.evaluate(() => rtcedgeDebug.timings);
  check('the offer was POSTed without waiting for candidates (no a=candidate line)',
        offers.length === 1 && !/^a=candidate:/m.test(offers[0]), `${offers.length} offer(s)`);
  summary.session_url = await page.evaluate(() => rtcedgeDebug.sessionUrl);
  check('connected (iceConnectionState connected)', summary.page_timings.iceConnectedMs != null, summary.page_timings);

  // ---- media flows both ways (1 s of 20 ms packets before listening, to skip codec ramp-up)
  const stats = await waitFor('RTP both ways and an RTT', async () => {
    const s = await page.evaluate(() => rtcedgeDebug.stats());
    const rtt = s && (s.pairRttMs ?? s.rtcpRttMs);
    const ok = s && s.packetsReceived >= 50 && s.packetsSent >= 50 && typeof rtt === 'number' && isFinite(rtt);
    return { ok, why: s && `rx ${s.packetsReceived} tx ${s.packetsSent} rtt ${rtt}`, s };
  }, { limitMs: 15000 }).then((r) => r.s).catch(async (e) => {
    log(e.message);
    return page.evaluate(() => rtcedgeDebug.stats());
  });
  summary.browser_stats = stats;
  check('inbound-rtp packetsReceived > 0', stats && stats.packetsReceived > 0, stats && stats.packetsReceived);
  check('outbound-rtp packetsSent > 0', stats && stats.packetsSent > 0, stats && stats.packetsSent);
  const rtt = stats && (stats.pairRttMs ?? stats.rtcpRttMs);
  check('an RTT is reported (candidate-pair or remote-inbound-rtp)', typeof rtt === 'number' && isFinite(rtt),
    { pair_rtt_ms: stats && stats.pairRttMs, rtcp_rtt_ms: stats && stats.rtcpRttMs });

  if (opts.rttSampleS > 0) {
    summary.pair_rtt_samples_ms = [];
    const until = Date.now() + opts.rttSampleS * 1000;
    while (Date.now() < until && remainingMs() > 0) {
      const s = await page.evaluate(() => rtcedgeDebug.stats());
      if (s && typeof s.pairRttMs === 'number') summary.pair_rtt_samples_ms.push(s.pairRttMs);
      await sleep(100);
    }
  }

  // ---- the echoed tone
  if (opts.audioCheck) {
    try {
      const cap = await withTimeout(page.evaluate((s) => rtcedgeDebug.captureReceived(s), opts.captureS),
        opts.captureS * 1000 + 10000, 'capturing received audio');
      const after = await page.evaluate(() => rtcedgeDebug.stats());
      const a = analyseTone(cap.samples, cap.sampleRate);
      summary.audio = { sample_rate: cap.sampleRate, seconds: opts.captureS, tone_hz: opts.toneHz, tap: cap.tap, ...a };
      // Concealment during the capture tells a network/jitter-buffer problem from a tap glitch.
      if (stats && after && after.totalSamplesReceived > stats.totalSamplesReceived) {
        summary.audio.concealed_fraction = Number(((after.concealedSamples - stats.concealedSamples) /
          (after.totalSamplesReceived - stats.totalSamplesReceived)).toFixed(4));
      }
      const errPct = (Math.abs(a.dominant_hz - opts.toneHz) / opts.toneHz) * 100;
      check(`received dominant frequency within 3% of ${opts.toneHz} Hz`, errPct <= 3, `${a.dominant_hz} Hz (${errPct.toFixed(2)}%)`);
      check('received tone SNR > 10 dB', a.tone_snr_db > 10, `${a.tone_snr_db} dB, level ${a.rms_dbfs} dBFS`);
    } catch (e) {
      check('received audio captured', false, e.message);
    }
  }

  // ---- the server's view
  const sessionUrl = summary.session_url;
  const sres = await http('GET', sessionUrl);
  let server = null;
  try { server = JSON.parse(sres.text); } catch { /* reported below */ }
  summary.server_session = server;
  check('GET session returns JSON', sres.status === 200 && server, `${sres.status}`);
  check('server session state connected', server && server.state === 'connected', server && server.state);
  if (opts.expectPath) check(`server path ${opts.expectPath}`, server && server.path === opts.expectPath, server && server.path);
  const active = await sessionsActive();
  check('metrics rtcedge_transceiver_sessions_active 1', active === 1, active);

  if (opts.screenshot) {
    await sleep(1200); // two poll rounds, so the panel shows bitrates and server events
    await page.screenshot({ path: opts.screenshot, fullPage: true });
    summary.screenshot = opts.screenshot;
  }

  // ---- hang up through the page
  await page.click('#hangup');
  const gone = await waitFor('the session to end after Hang up', async () => {
    const r = await http('GET', sessionUrl);
    if (r.status === 404) return { ok: true, why: '404', how: '404' };
    try {
      const j = JSON.parse(r.text);
      return { ok: j.state === 'ended', why: j.state, how: 'state ended' };
    } catch { return { ok: false, why: `HTTP ${r.status}` }; }
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  check('session ended after Hang up (404 or state ended)', gone.ok, gone.how || gone.why);
  const drained = await waitFor('sessions_active to return to 0', async () => {
    const v = await sessionsActive();
    return { ok: v === 0, why: `${v}`, v };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  check('metrics rtcedge_transceiver_sessions_active back to 0', drained.ok, drained.ok ? 0 : drained.why);
  summary.page_error = await page.evaluate(() => rtcedgeDebug.error);
}

async function main() {
  const summary = { url: opts.url, expect_path: opts.expectPath, connected: false, checks: [] };
  const watchdog = setTimeout(async () => {
    console.error(`error: watchdog fired after ${opts.timeoutS + 30} s`);
    summary.error = 'watchdog';
    console.log(JSON.stringify(summary, null, 2));
    await cleanup();
    process.exit(1);
  }, (opts.timeoutS + 30) * 1000);
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, async () => { await cleanup(); process.exit(130); });

  try {
    await run(summary);
  } catch (e) {
    summary.error = e.message;
    log(`error: ${e.message}`);
  } finally {
    await cleanup();
    clearTimeout(watchdog);
  }
  summary.passed = !summary.error && summary.checks.length > 0 && summary.checks.every((c) => c.ok);
  console.log(JSON.stringify(summary, null, 2));
  process.exit(summary.passed ? 0 : 1);
}

main();
