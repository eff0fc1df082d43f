#!/usr/bin/env node
// Browser end-to-end test of an ICE restart (issue 17) over WHIP-style PATCH (RFC 9725 §4.4).
//
// Headless Chromium opens GET / on the transceiver only for its origin, then runs its own
// RTCPeerConnection (installClient below; the demo page does not expose its pc): POST
// /v1/sessions with the echo backend, hear the 440 Hz tone, then mid-call pc.restartIce(),
// createOffer/setLocalDescription, PATCH the new offer's RFC 8840 fragment with If-Match, apply
// the answer fragment the way WHIP clients do (medooze whip.js: copy the previous remote
// description, replace a=ice-ufrag/a=ice-pwd, setRemoteDescription), and check: 200 + new
// ETag + new server ufrag, ICE connected again on the new credentials (stats usernameFragment),
// the tone still coming back, the media gap around the restart (inbound-rtp packetsReceived
// and the received audio level sampled every 20 ms), the stale ETag refused (412), no If-Match
// refused (428), a candidates-only fragment accepted (204), then a second restart the way
// whip.js sends it (a=ice-ufrag/a=ice-pwd only, no m= section, If-Match: *), the session's
// ice.restarted event and the restarts metric.
//
// Usage:
//   node ice_restart_e2e.mjs --url http://127.0.0.1:8080 [--expect-path direct|relay]
//        [--timeout-s 90] [--tone-wav FILE] [--tone-hz 440] [--api-key K]
//        [--chromium /usr/bin/chromium] [--allow-loopback auto|yes|no] [--gap-only]
//        [--handover-dir DIR [--no-restart | --rebind]]
//
// --gap-only: stop before the PATCH (connect, tone, gap measurement on the normal call, hang
// up) — what can be checked against a server without PATCH support.
// --handover-dir DIR (run_handover_netns.py): mid-call the driver writes DIR/move-request and
// waits for DIR/moved (the runner has changed the client's address meanwhile); then it restarts
// ICE as above, or with --no-restart only waits for Chromium to move the selected pair by
// itself; the checks add "the selected pair's local address changed" and the gap is measured
// from the move (gap_ms.handover_*). --rebind: the change is invisible to the client (a NAT
// rebinding: same local address, the network rewrites it), so the check is that RTP comes back
// on the same credentials, with no restart.
// stdout: one JSON summary (figures: gap_ms.*). Exit 0 = every check passed, 1 = a check
// failed or timed out, 2 = bad usage.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromiumArgs, loadPlaywright, wantLoopback } from './browser_launch.mjs';
import { analyseTone } from './tone_analysis.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

function usage(msg) {
  if (msg) console.error(`error: ${msg}`);
  console.error('usage: node ice_restart_e2e.mjs --url URL [--expect-path direct|relay] [--timeout-s S] ' +
    '[--tone-wav FILE] [--tone-hz HZ] [--api-key K] [--chromium PATH] [--allow-loopback auto|yes|no] [--gap-only] ' +
    '[--handover-dir DIR [--no-restart | --rebind]]');
  process.exit(2);
}

const opts = {
  url: null, expectPath: null, timeoutS: 90, toneWav: null, toneHz: 440, apiKey: '',
  chromium: '/usr/bin/chromium', allowLoopback: 'auto', gapOnly: false, handoverDir: null, restart: true, rebind: false,
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
      case '--tone-wav': opts.toneWav = val(); break;
      case '--tone-hz': opts.toneHz = Number(val()); break;
      case '--api-key': opts.apiKey = val(); break;
      case '--chromium': opts.chromium = val(); break;
      case '--allow-loopback': opts.allowLoopback = val(); break;
      case '--gap-only': opts.gapOnly = true; break;
      case '--handover-dir': opts.handoverDir = val(); break;
      case '--no-restart': opts.restart = false; break;
      case '--rebind': opts.rebind = true; opts.restart = false; break;
      case '-h': case '--help': usage();
      default: usage(`unknown argument ${a}`);
    }
  }
}
if (!opts.url || !/^https?:\/\//.test(opts.url)) usage('--url http://HOST:PORT is required');
if (opts.expectPath && !['direct', 'relay'].includes(opts.expectPath)) usage('--expect-path must be direct or relay');
if (!(opts.timeoutS > 0) || !(opts.toneHz > 0)) usage('bad --timeout-s or --tone-hz');
if (!opts.restart && !opts.handoverDir) usage('--no-restart and --rebind only with --handover-dir');
if (!['auto', 'yes', 'no'].includes(opts.allowLoopback)) usage('--allow-loopback must be auto, yes or no');

const log = (...a) => console.error('[ice-restart]', ...a);
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

async function waitFor(what, fn, { intervalMs = 100, limitMs = remainingMs() } = {}) {
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

// The sum of a metric's samples whose label set contains every `labels` pair.
function metricSum(text, name, labels = {}) {
  let sum = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m || m[1] !== name) continue;
    const have = m[2] || '';
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

// ---------------------------------------------------------------- gap measurement (pure)
// samples: [{t (ms), rx (inbound-rtp packetsReceived), level (dBFS of the last 20 ms)}].
// The RTP gap is the longest time between two consecutive increases of packetsReceived; the
// audio gap the longest run of samples quieter than `quietDb` (the tone plays at about
// -10 dBFS; NetEq fills a transport gap with fading concealment, then silence).
export function measureGaps(samples, from, to, quietDb = -45) {
  const win = samples.filter((s) => s.t >= from && s.t <= to);
  let rtpGap = 0, rtpAt = null, lastRiseT = null, lastRx = null;
  for (const s of win) {
    if (lastRx === null) { lastRx = s.rx; lastRiseT = s.t; continue; }
    if (s.rx > lastRx) {
      if (s.t - lastRiseT > rtpGap) { rtpGap = s.t - lastRiseT; rtpAt = lastRiseT; }
      lastRiseT = s.t; lastRx = s.rx;
    }
  }
  if (win.length && lastRiseT !== null && win[win.length - 1].t - lastRiseT > rtpGap) {
    rtpGap = win[win.length - 1].t - lastRiseT; rtpAt = lastRiseT; // still silent at the end
  }
  let audioGap = 0, audioAt = null, quietSince = null;
  for (const s of win) {
    if (s.level != null && s.level < quietDb) {
      if (quietSince === null) quietSince = s.t;
      if (s.t - quietSince > audioGap) { audioGap = s.t - quietSince; audioAt = quietSince; }
    } else quietSince = null;
  }
  const intervals = win.slice(1).map((s, i) => s.t - win[i].t).sort((a, b) => a - b);
  return {
    rtp_gap_ms: Math.round(rtpGap), rtp_gap_at_ms: rtpAt === null ? null : Math.round(rtpAt - from),
    audio_gap_ms: Math.round(audioGap), audio_gap_at_ms: audioAt === null ? null : Math.round(audioAt - from),
    samples: win.length,
    sample_interval_p50_ms: intervals.length ? Math.round(intervals[Math.floor(intervals.length / 2)]) : null,
    sample_interval_max_ms: intervals.length ? Math.round(intervals[intervals.length - 1]) : null,
  };
}

// ---------------------------------------------------------------- the in-page client
// Runs in the page (serialised by playwright): window.rc = a WHIP-style client with restart.
function installClient() {
  const st = {
    pc: null, stream: null, remote: null, ctx: null, analyser: null, sessionUrl: null, etag: null,
    auth: {}, samples: [], sampler: null, captureBuf: null, captureNode: null, states: [],
  };
  const authHeaders = (extra = {}) => ({ ...st.auth, ...extra });
  const lines = (sdp) => sdp.split(/\r?\n/).filter((l) => l.length);

  // RFC 8840 fragment of a local description: session-level ice-options, BUNDLE group and
  // ice-ufrag/pwd, then each m= line (verbatim) with its a=mid and candidates.
  function fragmentOf(sdp, { ufrag, pwd, withCandidates = true } = {}) {
    const out = [];
    let u = null, p = null, options = null, group = null;
    const media = [];
    for (const l of lines(sdp)) {
      if (l.startsWith('m=')) media.push({ m: l, mid: null, cands: [] });
      else if (l.startsWith('a=ice-ufrag:')) u = u || l.slice(12);
      else if (l.startsWith('a=ice-pwd:')) p = p || l.slice(10);
      else if (l.startsWith('a=ice-options:')) options = options || l;
      else if (l.startsWith('a=group:BUNDLE')) group = l;
      else if (media.length && l.startsWith('a=mid:')) media[media.length - 1].mid = l;
      else if (media.length && (l.startsWith('a=candidate:') || l === 'a=end-of-candidates')) media[media.length - 1].cands.push(l);
    }
    if (options) out.push(options);
    if (group) out.push(group);
    out.push(`a=ice-ufrag:${ufrag || u}`, `a=ice-pwd:${pwd || p}`);
    for (const m of media) {
      out.push(m.m.replace(/^(m=\S+) \d+/, '$1 9'));
      if (m.mid) out.push(m.mid);
      if (withCandidates) out.push(...m.cands);
    }
    return { text: out.join('\r\n') + '\r\n', ufrag: ufrag || u, pwd: pwd || p };
  }

  // What WHIP clients do with the server's answer fragment: the previous remote description
  // with its ice-ufrag/ice-pwd replaced and, when the fragment has candidates, its candidates.
  function applyFragment(remoteSdp, frag) {
    const f = lines(frag);
    const u = f.find((l) => l.startsWith('a=ice-ufrag:'));
    const p = f.find((l) => l.startsWith('a=ice-pwd:'));
    if (!u || !p) throw new Error('answer fragment without a=ice-ufrag / a=ice-pwd');
    const cands = f.filter((l) => l.startsWith('a=candidate:'));
    const out = [];
    let inMedia = false;
    for (const l of lines(remoteSdp)) {
      if (l.startsWith('a=ice-ufrag:')) { out.push(u); continue; }
      if (l.startsWith('a=ice-pwd:')) { out.push(p); continue; }
      if (cands.length && (l.startsWith('a=candidate:') || l === 'a=end-of-candidates')) continue;
      if (l.startsWith('m=')) {
        if (inMedia && cands.length) out.push(...cands, 'a=end-of-candidates');
        inMedia = true;
      }
      out.push(l);
    }
    if (inMedia && cands.length) out.push(...cands, 'a=end-of-candidates');
    return { sdp: out.join('\r\n') + '\r\n', ufrag: u.slice(12), candidates: cands.length };
  }

  // Evidence of the new credentials in use is the selected pair's local candidate's
  // usernameFragment: Chromium's transport.iceLocalUsernameFragment already changes at
  // setLocalDescription, while the old pair still carries the media.
  async function selected() {
    const report = await st.pc.getStats();
    const byId = new Map();
    report.forEach((s) => byId.set(s.id, s));
    let transport = null, inbound = null;
    report.forEach((s) => {
      if (s.type === 'transport') transport = s;
      if (s.type === 'inbound-rtp' && (s.kind || s.mediaType) === 'audio') inbound = s;
    });
    const pair = transport && transport.selectedCandidatePairId ? byId.get(transport.selectedCandidatePairId) : null;
    const lc = pair ? byId.get(pair.localCandidateId) : null;
    const rc = pair ? byId.get(pair.remoteCandidateId) : null;
    return {
      iceConnectionState: st.pc.iceConnectionState, connectionState: st.pc.connectionState,
      pairId: pair ? pair.id : null, pairState: pair ? pair.state : null,
      localUfrag: lc ? lc.usernameFragment ?? null : null, remoteUfrag: rc ? rc.usernameFragment ?? null : null,
      transportLocalUfrag: transport ? transport.iceLocalUsernameFragment ?? null : null,
      local: lc ? `${lc.address || lc.ip}:${lc.port}` : null, remote: rc ? `${rc.address || rc.ip}:${rc.port}` : null,
      packetsReceived: inbound ? inbound.packetsReceived || 0 : 0,
      selectedCandidatePairChanges: transport ? transport.selectedCandidatePairChanges ?? null : null,
    };
  }

  function level() {
    if (!st.analyser) return null;
    const buf = new Float32Array(st.analyser.fftSize);
    st.analyser.getFloatTimeDomainData(buf);
    let s = 0;
    for (const v of buf) s += v * v;
    return s > 0 ? Math.max(-100, 10 * Math.log10(s / buf.length)) : -100;
  }

  // Every 20 ms: packetsReceived and the level of the last ~21 ms of received audio.
  function startSampler() {
    if (st.sampler) return;
    let busy = false;
    st.sampler = setInterval(async () => {
      if (busy || !st.pc) return;
      busy = true;
      try {
        const report = await st.pc.getStats();
        let rx = 0;
        report.forEach((s) => { if (s.type === 'inbound-rtp' && (s.kind || s.mediaType) === 'audio') rx = s.packetsReceived || 0; });
        st.samples.push({ t: performance.now(), rx, level: level() });
      } finally { busy = false; }
    }, 20);
  }

  function attachRemote(stream) {
    if (st.remote === stream) return;
    st.remote = stream;
    // Chromium feeds a remote track into WebAudio only while a media element plays it.
    const audio = document.createElement('audio');
    audio.autoplay = true; audio.muted = true; audio.srcObject = stream;
    document.body.appendChild(audio);
    audio.play().catch(() => {});
    const src = st.ctx.createMediaStreamSource(stream);
    st.analyser = st.ctx.createAnalyser();
    st.analyser.fftSize = 1024;
    src.connect(st.analyser);
    const node = st.ctx.createScriptProcessor(4096, 1, 1);
    node.onaudioprocess = (ev) => {
      const c = st.captureBuf;
      if (!c || c.filled >= c.samples.length) return;
      const d = ev.inputBuffer.getChannelData(0);
      const n = Math.min(d.length, c.samples.length - c.filled);
      c.samples.set(d.subarray(0, n), c.filled);
      c.filled += n;
      if (c.filled >= c.samples.length) { st.captureBuf = null; c.resolve(); }
    };
    const mute = st.ctx.createGain();
    mute.gain.value = 0;
    src.connect(node); node.connect(mute); mute.connect(st.ctx.destination);
    st.captureNode = node;
  }

  window.rc = {
    async start(apiKey) {
      if (apiKey) st.auth = { Authorization: `Bearer ${apiKey}` };
      st.ctx = new AudioContext();
      await st.ctx.resume().catch(() => {});
      st.stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false }, video: false,
      });
      const pc = new RTCPeerConnection({ bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require' });
      st.pc = pc;
      pc.addEventListener('track', (ev) => attachRemote(ev.streams[0] || new MediaStream([ev.track])));
      pc.addEventListener('iceconnectionstatechange', () => st.states.push({ t: performance.now(), ice: pc.iceConnectionState }));
      for (const track of st.stream.getAudioTracks()) pc.addTransceiver(track, { direction: 'sendrecv', streams: [st.stream] });
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      const res = await fetch('/v1/sessions', {
        method: 'POST', headers: authHeaders({ 'Content-Type': 'application/sdp' }), body: pc.localDescription.sdp,
      });
      const body = await res.text();
      if (res.status !== 201) throw new Error(`POST /v1/sessions -> ${res.status}: ${body.slice(0, 200)}`);
      st.sessionUrl = new URL(res.headers.get('Location'), location.href).href;
      st.etag = res.headers.get('ETag');
      await pc.setRemoteDescription({ type: 'answer', sdp: body });
      startSampler();
      return { sessionUrl: st.sessionUrl, etag: st.etag, ufrag: fragmentOf(pc.localDescription.sdp).ufrag };
    },
    now: () => performance.now(),
    selected,
    samples: () => st.samples,
    states: () => st.states,
    get etag() { return st.etag; },
    get sessionUrl() { return st.sessionUrl; },
    capture(seconds) {
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => { st.captureBuf = null; reject(new Error(`capture of ${seconds} s did not finish`)); }, seconds * 1000 + 5000);
        const c = { samples: new Float32Array(Math.round(seconds * st.ctx.sampleRate)), filled: 0 };
        c.resolve = () => { clearTimeout(t); resolve({ samples: Array.from(c.samples), sampleRate: st.ctx.sampleRate }); };
        st.captureBuf = c;
      });
    },
    // restartIce -> createOffer -> setLocalDescription -> PATCH -> setRemoteDescription (the
    // order whip.js uses). Returns what the server said; applies the answer only on 200.
    // style 'whipjs': the fragment medooze whip.js sends on a restart, a=ice-ufrag/a=ice-pwd
    // only (no m= section), with If-Match: *.
    async restart(style = 'full') {
      const pc = st.pc;
      const before = fragmentOf(pc.localDescription.sdp).ufrag;
      const t0 = performance.now();
      pc.restartIce();
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      const frag = fragmentOf(pc.localDescription.sdp);
      const whipjs = style === 'whipjs';
      const text = whipjs ? `a=ice-ufrag:${frag.ufrag}\r\na=ice-pwd:${frag.pwd}\r\n` : frag.text;
      const ifMatch = whipjs ? '*' : st.etag;
      const t1 = performance.now();
      const res = await fetch(st.sessionUrl, {
        method: 'PATCH',
        headers: authHeaders({ 'Content-Type': 'application/trickle-ice-sdpfrag', 'If-Match': ifMatch }),
        body: text,
      });
      const body = await res.text();
      const t2 = performance.now();
      const out = {
        status: res.status, etag: res.headers.get('ETag'), contentType: res.headers.get('Content-Type'),
        retryAfter: res.headers.get('Retry-After'),
        body, sentFragment: text, oldLocalUfrag: before, newLocalUfrag: frag.ufrag, ifMatch,
        tRestart: t0, tPatchSent: t1, tPatchDone: t2,
      };
      if (res.status === 200) {
        const applied = applyFragment(pc.remoteDescription.sdp, body);
        await pc.setRemoteDescription({ type: 'answer', sdp: applied.sdp });
        out.newRemoteUfrag = applied.ufrag;
        out.answerCandidates = applied.candidates;
        out.tApplied = performance.now();
        st.etag = out.etag || st.etag;
      } else {
        // Back to stable on the old credentials, so the call goes on.
        await pc.setLocalDescription({ type: 'rollback' }).catch(() => {});
      }
      return out;
    },
    // A PATCH that does not touch the pc: a fragment with `ufrag`/`pwd` (random when null) and
    // the given headers, to probe the server's 412/428/204 answers.
    async rawPatch({ ifMatch, ufrag = null, pwd = null, candidatesOnly = false }) {
      const rnd = (n) => Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => 'abcdefghijklmnopqrstuvwxyz0123456789'[b % 36]).join('');
      const local = st.pc.localDescription.sdp;
      let frag;
      if (candidatesOnly) {
        const cur = fragmentOf(local);
        frag = fragmentOf(local, { ufrag: cur.ufrag, pwd: cur.pwd, withCandidates: false }).text
          .replace(/\r\n$/, '') + '\r\na=candidate:1 1 udp 2122260223 192.0.2.7 50000 typ host\r\n';
      } else frag = fragmentOf(local, { ufrag: ufrag || rnd(8), pwd: pwd || rnd(24), withCandidates: false }).text;
      const headers = authHeaders({ 'Content-Type': 'application/trickle-ice-sdpfrag' });
      if (ifMatch != null) headers['If-Match'] = ifMatch;
      const res = await fetch(st.sessionUrl, { method: 'PATCH', headers, body: frag });
      return { status: res.status, body: (await res.text()).slice(0, 300), etag: res.headers.get('ETag') };
    },
    async hangUp() {
      clearInterval(st.sampler);
      const res = await fetch(st.sessionUrl, { method: 'DELETE', headers: authHeaders() });
      if (st.pc) st.pc.close();
      st.stream.getTracks().forEach((t) => t.stop());
      return res.status;
    },
  };
}

// ---------------------------------------------------------------- main
const resources = { context: null, userDataDir: null, toneDir: null };

async function cleanup() {
  const { context, userDataDir, toneDir } = resources;
  resources.context = resources.userDataDir = resources.toneDir = null;
  if (context) await Promise.race([context.close().catch(() => {}), sleep(5000)]);
  for (const d of [userDataDir, toneDir]) if (d) fs.rmSync(d, { recursive: true, force: true });
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

async function run(summary) {
  const check = (name, ok, detail) => {
    summary.checks.push({ name, ok: Boolean(ok), detail });
    log(`${ok ? 'PASS' : 'FAIL'} ${name}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
    return ok;
  };
  const toneCheck = async (label) => {
    const cap = await withTimeout(page.evaluate(() => rc.capture(2)), 12000, `capturing audio ${label}`);
    const a = analyseTone(cap.samples, cap.sampleRate);
    summary.audio[label] = a;
    const errPct = (Math.abs(a.dominant_hz - opts.toneHz) / opts.toneHz) * 100;
    check(`${label}: echoed tone within 3% of ${opts.toneHz} Hz and SNR > 10 dB`, errPct <= 3 && a.tone_snr_db > 10,
      `${a.dominant_hz} Hz, SNR ${a.tone_snr_db} dB, ${a.rms_dbfs} dBFS`);
  };

  const { chromium } = await loadPlaywright();
  const tone = ensureToneWav();
  resources.toneDir = tone.tmpDir;
  resources.userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtcedge-ice-restart-chromium-'));
  const context = await withTimeout(chromium.launchPersistentContext(resources.userDataDir, {
    executablePath: opts.chromium, headless: false, args: chromiumArgs(tone.file, wantLoopback(opts.allowLoopback)), timeout: 30000,
  }), 35000, 'launching chromium');
  resources.context = context;
  summary.browser_version = context.browser() ? context.browser().version() : null;
  await context.grantPermissions(['microphone'], { origin: new URL(opts.url).origin }).catch(() => {});
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') log(`page console.error: ${m.text()}`); });
  page.on('pageerror', (e) => log(`page error: ${e.message}`));

  const resp = await page.goto(`${opts.url}/`, { timeout: Math.min(15000, remainingMs()) });
  if (!check('page served (origin for the client)', resp && resp.status() === 200, resp ? resp.status() : 'no response')) return;
  await page.evaluate(installClient);
  const started = await withTimeout(page.evaluate((k) => rc.start(k), opts.apiKey), 15000, 'POST /v1/sessions');
  summary.session_url = started.sessionUrl;
  check('POST 201 carries an ETag', !!started.etag, started.etag);

  const s0 = await waitFor('ICE connected and RTP both ways', async () => {
    const s = await page.evaluate(() => rc.selected());
    return { ok: ['connected', 'completed'].includes(s.iceConnectionState) && s.packetsReceived >= 50 && s.localUfrag != null,
      why: `${s.iceConnectionState} rx ${s.packetsReceived}`, s };
  }, { limitMs: 20000 }).then((r) => r.s);
  summary.before = s0;
  check('connected with the POST credentials', s0.localUfrag === started.ufrag, { stats: s0.localUfrag, offer: started.ufrag });
  await toneCheck('before_restart');
  {
    const r0 = await http('GET', summary.session_url);
    try { summary.client_address_before = JSON.parse(r0.text).client_address; } catch { /* null */ }
  }

  // The gap measurement on the normal call: the baseline the restart is judged against.
  const tBase = await page.evaluate(() => rc.now());
  await sleep(1500);
  const tBaseEnd = await page.evaluate(() => rc.now());
  const base = measureGaps(await page.evaluate(() => rc.samples()), tBase, tBaseEnd);
  summary.gap_ms = { normal_call: base };
  check('sampler ran every ~20 ms on the normal call', base.samples >= 40 && base.sample_interval_p50_ms <= 40, base);
  check('normal call: no RTP gap over 200 ms', base.rtp_gap_ms <= 200, base.rtp_gap_ms);

  let tMove = null;
  if (opts.handoverDir && !opts.gapOnly) {
    // ---- the network change, done by the runner between move-request and moved
    const moved = path.join(opts.handoverDir, 'moved');
    tMove = await page.evaluate(() => rc.now());
    fs.writeFileSync(path.join(opts.handoverDir, 'move-request'), `${Date.now()}\n`);
    await waitFor('the runner to change the client address', async () => ({ ok: fs.existsSync(moved), why: 'no moved file' }),
      { intervalMs: 20, limitMs: 15000 });
    summary.move_wall_ms = Math.round((await page.evaluate(() => rc.now())) - tMove);
  }
  if (opts.gapOnly) {
    summary.gap_only = true;
  } else if (opts.rebind) {
    // ---- NAT rebinding: the server must follow the new address on Chromium's next valid
    // check (consent, every ~2.5 s on a stable pair), with no signaling.
    const s1 = await waitFor('RTP back after the rebinding', async () => {
      const a = await page.evaluate(() => rc.selected());
      await sleep(200);
      const b = await page.evaluate(() => rc.selected());
      const since = (await page.evaluate(() => rc.now())) - tMove;
      return { ok: since > 500 && b.packetsReceived > a.packetsReceived + 3,
        why: `${b.iceConnectionState} rx +${b.packetsReceived - a.packetsReceived} ${Math.round(since)} ms after`, s: b };
    }, { intervalMs: 50, limitMs: 30000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
    summary.after = s1;
    check('RTP back after the rebinding, same credentials, no restart', s1 && s1.localUfrag === s0.localUfrag, s1);
    await sleep(1000);
    await toneCheck('after_rebinding');
    const tEnd = await page.evaluate(() => rc.now());
    const g = measureGaps(await page.evaluate(() => rc.samples()), tMove - 500, tEnd);
    summary.gap_ms.rebinding = g;
    log(`media gap around the rebinding: RTP ${g.rtp_gap_ms} ms, audio ${g.audio_gap_ms} ms`);
    check('rebinding: RTP gap under 6000 ms (two consent intervals)', g.rtp_gap_ms < 6000, g.rtp_gap_ms);
    summary.ice_states = await page.evaluate(() => rc.states());
  } else if (!opts.restart) {
    // ---- handover without signaling: Chromium re-gathers on the network change and must
    // move the selected pair (same credentials) to the new address by itself.
    const s1 = await waitFor('the selected pair on a new local address, RTP flowing', async () => {
      const a = await page.evaluate(() => rc.selected());
      await sleep(200);
      const b = await page.evaluate(() => rc.selected());
      return { ok: b.local && b.local !== s0.local && b.packetsReceived > a.packetsReceived &&
        ['connected', 'completed'].includes(b.iceConnectionState),
      why: `${b.iceConnectionState} local ${b.local} rx +${b.packetsReceived - a.packetsReceived}`, s: b };
    }, { limitMs: 30000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
    summary.after = s1;
    check('selected pair moved to the new local address (same credentials)', s1 && s1.local !== s0.local &&
      s1.localUfrag === s0.localUfrag, s1 && { before: s0.local, after: s1.local, ufrag: s1.localUfrag });
    await sleep(1000);
    await toneCheck('after_handover');
    const tEnd = await page.evaluate(() => rc.now());
    const g = measureGaps(await page.evaluate(() => rc.samples()), tMove - 500, tEnd);
    summary.gap_ms.handover_no_restart = g;
    log(`media gap around the handover: RTP ${g.rtp_gap_ms} ms, audio ${g.audio_gap_ms} ms`);
    summary.ice_states = await page.evaluate(() => rc.states());
  } else {
    // ---- the restart
    const r = await withTimeout(page.evaluate(() => rc.restart()), 15000, 'restartIce + PATCH');
    summary.restart = { ...r, body: r.body.slice(0, 2000) };
    check('PATCH (new ufrag/pwd) -> 200', r.status === 200, `${r.status} ${r.status !== 200 ? r.body.slice(0, 200) : ''}`);
    if (r.status === 200) {
      check('PATCH 200 is application/trickle-ice-sdpfrag', /^application\/trickle-ice-sdpfrag/i.test(r.contentType || ''), r.contentType);
      check('PATCH 200 carries a new ETag', r.etag && r.etag !== started.etag, { before: started.etag, after: r.etag });
      check('answer fragment: a=ice-lite, a new server ufrag, a=mid, a=end-of-candidates',
        /^a=ice-lite\r?$/m.test(r.body) && r.newRemoteUfrag !== s0.remoteUfrag && /^a=mid:/m.test(r.body) && /^a=end-of-candidates/m.test(r.body),
        { old: s0.remoteUfrag, new: r.newRemoteUfrag, candidates: r.answerCandidates });
      const s1 = await waitFor('ICE on the new credentials', async () => {
        const s = await page.evaluate(() => rc.selected());
        return { ok: ['connected', 'completed'].includes(s.iceConnectionState) && s.localUfrag === r.newLocalUfrag,
          why: `${s.iceConnectionState} local ufrag ${s.localUfrag}`, s };
      }, { limitMs: 15000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
      const tConnected = await page.evaluate(() => rc.now());
      summary.after = s1;
      check('ICE connected again after the restart', s1 && ['connected', 'completed'].includes(s1.iceConnectionState), s1 && s1.iceConnectionState);
      check('selected pair uses the new local and remote ufrag', s1 && s1.localUfrag === r.newLocalUfrag &&
        s1.localUfrag !== s0.localUfrag && (s1.remoteUfrag == null || s1.remoteUfrag === r.newRemoteUfrag),
        s1 && { local: [s0.localUfrag, s1.localUfrag], remote: [s0.remoteUfrag, s1.remoteUfrag] });
      summary.restart_timings_ms = {
        offer: Math.round(r.tPatchSent - r.tRestart), patch_rtt: Math.round(r.tPatchDone - r.tPatchSent),
        applied: r.tApplied ? Math.round(r.tApplied - r.tRestart) : null, connected_seen: Math.round(tConnected - r.tRestart),
      };
      await sleep(1500);
      await toneCheck('after_restart');
      const tEnd = await page.evaluate(() => rc.now());
      const g = measureGaps(await page.evaluate(() => rc.samples()), (tMove ?? r.tRestart) - 500, tEnd);
      summary.gap_ms[opts.handoverDir ? 'handover_ice_restart' : 'ice_restart'] = g;
      if (opts.handoverDir) {
        check('selected pair moved to the new local address', s1 && s1.local !== s0.local,
          s1 && { before: s0.local, after: s1.local });
      }
      log(`media gap around the restart: RTP ${g.rtp_gap_ms} ms, audio ${g.audio_gap_ms} ms`);
      // A handover adds the time Chromium takes to notice the network change and re-gather.
      const limit = opts.handoverDir ? 3000 : 1000;
      check(`restart: RTP gap under ${limit} ms`, g.rtp_gap_ms < limit, g.rtp_gap_ms);
      summary.ice_states = await page.evaluate(() => rc.states());

      // ---- concurrency and trickle contract
      const stale = await page.evaluate((e) => rc.rawPatch({ ifMatch: e }), started.etag);
      check('a second restart with the stale ETag -> 412', stale.status === 412, stale);
      const noMatch = await page.evaluate(() => rc.rawPatch({ ifMatch: null }));
      check('a restart without If-Match -> 428', noMatch.status === 428, noMatch);
      const trickle = await page.evaluate(() => rc.rawPatch({ ifMatch: rc.etag, candidatesOnly: true }));
      check('a candidates-only fragment (same ufrag) -> 204', trickle.status === 204, trickle);
      const sAfter = await page.evaluate(() => rc.selected());
      check('the refused PATCHes left the call on the new credentials', sAfter.localUfrag === r.newLocalUfrag &&
        ['connected', 'completed'].includes(sAfter.iceConnectionState), sAfter);

      // ---- a second restart as medooze whip.js sends it (ufrag/pwd only, If-Match: *)
      let restarts = 1;
      if (!opts.handoverDir) {
        let w = await withTimeout(page.evaluate(() => rc.restart('whipjs')), 15000, 'whip.js-style restart');
        if (w.status === 429) {
          // Restarts are rate-limited per session: a client waits Retry-After and tries again.
          const waitS = Math.min(15, Number(w.retryAfter) || 5);
          summary.restart_whipjs_429 = { retry_after: w.retryAfter, waited_s: waitS };
          log(`whip.js-style restart: 429, retrying after ${waitS} s`);
          await sleep(waitS * 1000);
          w = await withTimeout(page.evaluate(() => rc.restart('whipjs')), 15000, 'whip.js-style restart (retry)');
        }
        summary.restart_whipjs = { ...w, body: w.body.slice(0, 2000) };
        check('whip.js-style restart (a=ice-ufrag/a=ice-pwd only, If-Match: *) -> 200 with a new ETag',
          w.status === 200 && w.etag && w.etag !== r.etag, { status: w.status, etag: w.etag, body: w.status !== 200 ? w.body.slice(0, 200) : undefined });
        if (w.status === 200) {
          restarts++;
          const s2 = await waitFor('ICE on the third credentials', async () => {
            const s = await page.evaluate(() => rc.selected());
            return { ok: ['connected', 'completed'].includes(s.iceConnectionState) && s.localUfrag === w.newLocalUfrag,
              why: `${s.iceConnectionState} local ufrag ${s.localUfrag}`, s };
          }, { limitMs: 15000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
          check('connected on the whip.js-style restart credentials', s2 && s2.localUfrag === w.newLocalUfrag &&
            (s2.remoteUfrag == null || s2.remoteUfrag === w.newRemoteUfrag), s2 && { local: s2.localUfrag, remote: s2.remoteUfrag });
          await sleep(1000);
          await toneCheck('after_whipjs_restart');
          const tEnd2 = await page.evaluate(() => rc.now());
          const g2 = measureGaps(await page.evaluate(() => rc.samples()), w.tRestart - 500, tEnd2);
          summary.gap_ms.ice_restart_whipjs = g2;
          log(`media gap around the whip.js-style restart: RTP ${g2.rtp_gap_ms} ms, audio ${g2.audio_gap_ms} ms`);
          check('whip.js-style restart: RTP gap under 1000 ms', g2.rtp_gap_ms < 1000, g2.rtp_gap_ms);
        }
      }

      // ---- the server's view
      const sres = await http('GET', summary.session_url);
      let server = null;
      try { server = JSON.parse(sres.text); } catch { /* reported below */ }
      summary.server_session = server;
      const evs = (server && server.events) || [];
      check('session JSON has an ice.restarted event', evs.some((e) => e && e.type === 'ice.restarted'),
        evs.map((e) => e && e.type));
      check('session JSON has client_address', server && !!server.client_address, server && server.client_address);
      const m = await http('GET', `${opts.url}/metrics`);
      const completed = metricSum(m.text, 'rtcedge_transceiver_ice_restarts_total', { result: 'completed' });
      summary.ice_restarts_completed = completed;
      check(`rtcedge_transceiver_ice_restarts_total{result="completed"} >= ${restarts}`, completed >= restarts, completed);
    }
  }

  const sres = await http('GET', summary.session_url);
  let server = null;
  try { server = JSON.parse(sres.text); } catch { /* reported below */ }
  summary.client_address_after = server && server.client_address;
  check('server session still connected', server && server.state === 'connected', server && server.state);
  if (opts.expectPath) check(`server path ${opts.expectPath}`, server && server.path === opts.expectPath, server && server.path);
  const del = await page.evaluate(() => rc.hangUp());
  check('DELETE session -> 200 or 204', del === 200 || del === 204, del);
}

async function main() {
  const summary = { url: opts.url, expect_path: opts.expectPath, checks: [], audio: {} };
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

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
