#!/usr/bin/env node
// Browser end-to-end test of an rtcedge transceiver through its own demo page.
//
// Headless Chromium opens GET / on the transceiver, clicks Talk (the page's own code path),
// speaks a 440 Hz tone through the fake microphone (--use-file-for-fake-audio-capture) and,
// with the echo-loopback backend, must hear the same tone back. Then it checks getStats, the
// session JSON, /metrics, clicks Hang up and checks the session is gone.
//
// --browser firefox runs the same flow in headless Firefox ESR (puppeteer-core over WebDriver
// BiDi, tests/support/js/browser.mjs): its fake microphone is a sine at --tone-hz
// (media.navigator.audio.fake_frequency); a --tone-wav is ignored there (harnesses that run
// either browser pass one anyway), and the summary says so (tone_wav_ignored).
//
// Usage:
//   node browser_e2e.mjs --url http://127.0.0.1:8080 [--expect-path direct|relay]
//        [--timeout-s 60] [--screenshot out.png] [--tone-wav FILE] [--tone-hz 440]
//        [--capture-s 3] [--api-key K] [--chromium /usr/bin/chromium]
//        [--allow-loopback auto|yes|no] [--no-audio-check] [--rtt-sample-s S]
//        [--browser chromium|firefox] [--firefox /usr/bin/firefox-esr] [--interrupt-dir DIR]
//
// --rtt-sample-s S: after media flows, polls the selected pair's currentRoundTripTime every
// 100 ms for S seconds (summary.pair_rtt_samples_ms; run_global_sim.py takes their median).
// --interrupt-dir DIR: after the tone check, writes DIR/move-request.1 and waits for
// DIR/moved.1 (the runner broke the path meanwhile: run_browser_e2e_tcp.py restarts the relay);
// the page must get its path back by itself (its ICE restart) and media flow again
// (summary.recovery: the page's own time from the loss to connected again).
//
// stdout: one JSON summary. Exit code 0 = every check passed, 1 = a check failed or timed
// out, 2 = bad usage. The browser launch, waits, checks and /metrics reads are the shared
// ones of tests/support/js (playwright-core from tests/golden/tools/node_modules, or NODE_PATH
// / PLAYWRIGHT_CORE), so no second node_modules is needed here.

import fs from 'node:fs';
import path from 'node:path';
import {
  BROWSER_CHOICE_DEFAULTS, BROWSER_CHOICE_FLAGS, BrowserRun, browserVersion, chromiumArgs, fakeMicWav, firefoxPrefs,
  wantLoopback, wantLoopbackFirefox,
} from '../../support/js/browser.mjs';
import { checker, deadline, runMain, sleep, withTimeout } from '../../support/js/driver.mjs';
import { httpRequest, parseCallDriverArgs, sessionsActive } from '../../support/js/transceiver.mjs';
import { analyseTone } from './tone_analysis.mjs';

// ---------------------------------------------------------------- arguments
const { opts, usage } = parseCallDriverArgs(process.argv.slice(2), {
  script: 'browser_e2e.mjs',
  usageMore: '[--screenshot FILE.png] [--capture-s S] [--no-audio-check] [--rtt-sample-s S] [--browser chromium|firefox] [--firefox PATH] [--interrupt-dir DIR]',
  defaults: { timeoutS: 60, screenshot: null, captureS: 3, audioCheck: true, rttSampleS: 0, interruptDir: null, ...BROWSER_CHOICE_DEFAULTS },
  flags: {
    '--screenshot': ['screenshot', String], '--capture-s': ['captureS', Number],
    '--no-audio-check': { audioCheck: false }, '--rtt-sample-s': ['rttSampleS', Number],
    '--interrupt-dir': ['interruptDir', String], ...BROWSER_CHOICE_FLAGS,
  },
});
if (!(opts.timeoutS > 0) || !(opts.toneHz > 0) || !(opts.captureS >= 1)) usage('bad --timeout-s, --tone-hz or --capture-s');
if (!(opts.rttSampleS >= 0 && opts.rttSampleS <= 60)) usage('--rtt-sample-s must be 0..60');
if (!['chromium', 'firefox'].includes(opts.browser)) usage('--browser must be chromium or firefox');

const log = (...a) => console.error('[e2e]', ...a);

// ---------------------------------------------------------------- helpers
const { remainingMs, waitFor } = deadline(opts.timeoutS, { intervalMs: 200 });
const http = (method, url) => httpRequest(method, url, { apiKey: opts.apiKey });

// ---------------------------------------------------------------- main
const browser = new BrowserRun();

// Chromium (playwright-core) or Firefox (puppeteer-core behind the same Page calls).
async function launch(summary) {
  summary.browser = opts.browser;
  if (opts.browser === 'firefox') {
    if (opts.toneWav) {
      log(`Firefox speaks a ${opts.toneHz} Hz sine, not a WAV: --tone-wav ${opts.toneWav} ignored`);
      summary.tone_wav_ignored = opts.toneWav;
    }
    const prefs = firefoxPrefs({ toneHz: opts.toneHz, allowLoopback: wantLoopbackFirefox(opts.allowLoopback) });
    summary.firefox_prefs = prefs;
    const page = await browser.launchFirefox({
      executablePath: opts.firefox, prefs, profilePrefix: 'rtcedge-e2e-firefox-', viewport: { width: 1100, height: 860 },
    });
    summary.browser_version = await browser.browser.version();
    return page;
  }
  const toneFile = fakeMicWav(browser, opts, usage);
  const args = chromiumArgs({ toneFile, allowLoopback: wantLoopback(opts.allowLoopback) });
  summary.chromium_args = args;
  const page = await browser.launch({
    executablePath: opts.chromium, args, profilePrefix: 'rtcedge-e2e-chromium-',
    viewport: { width: 1100, height: 860 }, origin: new URL(opts.url).origin,
  });
  summary.browser_version = browserVersion(browser.context);
  return page;
}

async function run(summary) {
  const check = checker(summary, log);

  const page = await launch(summary);
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

  // ---- an interruption mid-call (run_browser_e2e_tcp.py --relay-restart page): the runner
  // restarts the relay between DIR/move-request.1 and DIR/moved.1; the page must get its path
  // back by itself (its ICE restart over PATCH) and media must flow again.
  if (opts.interruptDir) {
    const t0 = Date.now();
    fs.writeFileSync(path.join(opts.interruptDir, 'move-request.1'), `${t0}\n`);
    await waitFor('the runner to interrupt the path', async () => ({
      ok: fs.existsSync(path.join(opts.interruptDir, 'moved.1')), why: 'no moved.1' }), { intervalMs: 20, limitMs: 20000 });
    const back = await waitFor('the page to get its path back and media to flow', async () => {
      const rec = await page.evaluate(() => rtcedgeDebug.recoveries);
      const a = await page.evaluate(() => rtcedgeDebug.stats());
      await sleep(300);
      const b = await page.evaluate(() => rtcedgeDebug.stats());
      const flowing = a && b && b.packetsReceived > a.packetsReceived + 5;
      return { ok: rec.length > 0 && flowing, why: `${rec.length} recoveries, rx ${a && a.packetsReceived} -> ${b && b.packetsReceived}`, rec };
    }, { limitMs: 30000 }).then((r) => r.rec).catch((e) => { log(e.message); return null; });
    summary.recovery = back && { ...back[0], since_interrupt_ms: Date.now() - t0 };
    check('after the interruption the page got its path back (ICE restart) and media flows', !!back, summary.recovery);
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
  const active = await sessionsActive(opts.url, opts.apiKey);
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
    const v = await sessionsActive(opts.url, opts.apiKey);
    return { ok: v === 0, why: `${v}`, v };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  check('metrics rtcedge_transceiver_sessions_active back to 0', drained.ok, drained.ok ? 0 : drained.why);
  summary.page_error = await page.evaluate(() => rtcedgeDebug.error);
}

runMain({ url: opts.url, expect_path: opts.expectPath, connected: false, checks: [] },
  { timeoutS: opts.timeoutS, run, cleanup: () => browser.close(), log });
