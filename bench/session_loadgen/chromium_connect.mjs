#!/usr/bin/env node
// chromium_connect.mjs — time to connected of headless Chromium against an rtcedge
// transceiver, for bench/run_connect_bench.sh. One browser, one page on the transceiver's
// own origin (GET /, so the POSTs are same-origin), then --runs sequential calls, each: a
// fresh RTCPeerConnection with the fake microphone, offer after ICE gathering completes (so
// it names the client candidates), POST /v1/sessions, answer; timed from the POST to connectionState
// "connected" and to the first received RTP packet (getStats inbound-rtp, polled every 5 ms);
// then close and DELETE.
//
//   node chromium_connect.mjs --url http://127.0.0.1:8080 [--runs 10] [--chromium /usr/bin/chromium]
//        [--allow-loopback auto|yes|no] [--timeout-s 120]
//
// stdout: one JSON {browser_version, runs: [{connected_ms, first_rtp_ms, error}]}. Exit 0
// when every run connected, 1 otherwise, 2 on bad usage. playwright-core comes from
// tests/golden/tools/node_modules (`npm ci` there), and the Chromium launch is
// tests/support/js/browser.mjs's, as for tests/transceiver/e2e; this file owns the timed calls.
import { BrowserRun, browserVersion, chromiumArgs, wantLoopback } from '../../tests/support/js/browser.mjs';

const opts = { url: null, runs: 10, chromium: '/usr/bin/chromium', allowLoopback: 'auto', timeoutS: 120 };
{
  const argv = process.argv.slice(2);
  const usage = (m) => { console.error(`error: ${m}`); process.exit(2); };
  for (let i = 0; i < argv.length; i++) {
    const val = () => (i + 1 < argv.length ? argv[++i] : usage(`${argv[i]} needs a value`));
    switch (argv[i]) {
      case '--url': opts.url = val().replace(/\/+$/, ''); break;
      case '--runs': opts.runs = Number(val()); break;
      case '--chromium': opts.chromium = val(); break;
      case '--allow-loopback': opts.allowLoopback = val(); break;
      case '--timeout-s': opts.timeoutS = Number(val()); break;
      default: usage(`unknown argument ${argv[i]}`);
    }
  }
  if (!opts.url || !/^http:\/\//.test(opts.url)) usage('--url http://HOST:PORT is required');
  if (!(opts.runs >= 1 && opts.runs <= 1000)) usage('--runs 1..1000');
  if (!['auto', 'yes', 'no'].includes(opts.allowLoopback)) usage('--allow-loopback auto|yes|no');
}

// Runs inside the page: n calls, one after the other.
async function callsInPage(n) {
  const withDeadline = (p, ms, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms))]);
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const runs = [];
  for (let i = 0; i < n; i++) {
    const run = { connected_ms: null, first_rtp_ms: null, error: null };
    const pc = new RTCPeerConnection();
    let location = null;
    try {
      for (const track of stream.getAudioTracks()) pc.addTransceiver(track, { direction: 'sendrecv', streams: [stream] });
      await pc.setLocalDescription(await pc.createOffer());
      await withDeadline(new Promise((resolve) => {
        if (pc.iceGatheringState === 'complete') return resolve();
        pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') resolve(); });
      }), 5000, 'ICE gathering');
      const connected = new Promise((resolve, reject) => {
        pc.addEventListener('connectionstatechange', () => {
          if (pc.connectionState === 'connected') resolve(performance.now());
          if (pc.connectionState === 'failed') reject(new Error('connectionState failed'));
        });
      });
      const t0 = performance.now();
      const res = await fetch('/v1/sessions', { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
      const body = await res.text();
      if (res.status !== 201) throw new Error(`POST: HTTP ${res.status} ${body.slice(0, 100)}`);
      location = res.headers.get('Location');
      await pc.setRemoteDescription({ type: 'answer', sdp: body });
      run.connected_ms = (await withDeadline(connected, 10000, 'connected')) - t0;
      const until = performance.now() + 5000;
      while (performance.now() < until) {
        const stats = await pc.getStats();
        let got = 0;
        stats.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'audio') got = s.packetsReceived || 0; });
        if (got > 0) { run.first_rtp_ms = performance.now() - t0; break; }
        await new Promise((r) => setTimeout(r, 5));
      }
    } catch (e) {
      run.error = String(e && e.message || e);
    } finally {
      pc.close();
      if (location) await fetch(location, { method: 'DELETE' }).catch(() => {});
    }
    runs.push(run);
  }
  for (const t of stream.getTracks()) t.stop();
  return runs;
}

const result = { browser_version: null, runs: [], error: null };
const browser = new BrowserRun();
const watchdog = setTimeout(() => { result.error = 'watchdog'; finish(1); }, opts.timeoutS * 1000);
async function finish(code) {
  clearTimeout(watchdog);
  await browser.close();
  console.log(JSON.stringify(result, null, 2));
  process.exit(code);
}

try {
  const page = await browser.launch({
    executablePath: opts.chromium, args: chromiumArgs({ allowLoopback: wantLoopback(opts.allowLoopback) }),
    profilePrefix: 'rtcedge-connect-chromium-', origin: new URL(opts.url).origin,
  });
  result.browser_version = browserVersion(browser.context);
  await page.goto(`${opts.url}/`, { timeout: 15000 });
  result.runs = await page.evaluate(callsInPage, opts.runs);
  await finish(result.runs.every((r) => r.connected_ms !== null) ? 0 : 1);
} catch (e) {
  result.error = String(e && e.message || e);
  await finish(1);
}
