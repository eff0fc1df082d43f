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
//        [--handover-dir DIR [--no-restart | --rebind] [--moves N] [--move-interval-s S]]
//        [--recalls N]
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
// --moves N: N network changes in the one call (the runner alternates A -> B, B -> A, ...;
// DIR/move-request.<i> and DIR/moved.<i>), each handled as above and measured on its own
// (summary.moves[]); the PATCH contract checks run after the first. --move-interval-s S: at
// least S between the starts of two moves (restarts are rate-limited per session: 3 in a burst,
// then one per 10 s). bench/handover_bench.py uses both.
// --recalls N: no handover; N times hang up (pc.close() + DELETE) and call again on the same
// page and network (a new RTCPeerConnection on the same microphone stream, a new POST): time
// from the hang-up to connected, to the new call's first RTP and first audible audio
// (summary.recalls[]), the alternative a handover is judged against.
// stdout: one JSON summary (figures: gap_ms.*). Exit 0 = every check passed, 1 = a check
// failed or timed out, 2 = bad usage.
// This file owns the in-page WHIP client, the gap measurement and the scenarios; the browser
// launch, waits, checks and /metrics reads are tests/support/js's.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BrowserRun, browserVersion, chromiumArgs, fakeMicWav, wantLoopback } from '../../support/js/browser.mjs';
import { checker, deadline, runMain, sleep, withTimeout } from '../../support/js/driver.mjs';
import { httpRequest, metricSum, parseCallDriverArgs } from '../../support/js/transceiver.mjs';
import { analyseTone } from './tone_analysis.mjs';

const { opts, usage } = parseCallDriverArgs(process.argv.slice(2), {
  script: 'ice_restart_e2e.mjs',
  usageMore: '[--gap-only] [--handover-dir DIR [--no-restart | --rebind] [--moves N] [--move-interval-s S]] [--recalls N]',
  defaults: { timeoutS: 90, gapOnly: false, handoverDir: null, restart: true, rebind: false, moves: 1, moveIntervalS: 0, recalls: 0 },
  flags: {
    '--gap-only': { gapOnly: true }, '--handover-dir': ['handoverDir', String], '--no-restart': { restart: false },
    '--rebind': { rebind: true, restart: false }, '--moves': ['moves', Number], '--move-interval-s': ['moveIntervalS', Number],
    '--recalls': ['recalls', Number],
  },
});
if (!(opts.timeoutS > 0) || !(opts.toneHz > 0)) usage('bad --timeout-s or --tone-hz');
if (!opts.restart && !opts.handoverDir) usage('--no-restart and --rebind only with --handover-dir');
if (!(Number.isInteger(opts.moves) && opts.moves >= 1 && opts.moves <= 100)) usage('--moves must be 1..100');
if (!(opts.moveIntervalS >= 0 && opts.moveIntervalS <= 60)) usage('--move-interval-s must be 0..60');
if (!(Number.isInteger(opts.recalls) && opts.recalls >= 0 && opts.recalls <= 100)) usage('--recalls must be 0..100');
if (opts.recalls && (opts.handoverDir || opts.gapOnly)) usage('--recalls is a call of its own: not with --handover-dir or --gap-only');

const log = (...a) => console.error('[ice-restart]', ...a);
const { remainingMs, waitFor } = deadline(opts.timeoutS);
const http = (method, url) => httpRequest(method, url, { apiKey: opts.apiKey });

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
    // gen counts the calls of this page (--recalls): samples and connectedAt say which call.
    gen: 0, connectedAt: {}, audioEl: null, srcNode: null,
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
      const gen = st.gen, pc = st.pc;
      try {
        const report = await pc.getStats();
        let rx = 0;
        report.forEach((s) => { if (s.type === 'inbound-rtp' && (s.kind || s.mediaType) === 'audio') rx = s.packetsReceived || 0; });
        // A sample that straddles a recall belongs to neither call.
        if (gen === st.gen && pc === st.pc) st.samples.push({ t: performance.now(), rx, level: level(), gen });
      } catch { /* the pc was closed under a recall */ } finally { busy = false; }
    }, 20);
  }

  function attachRemote(stream) {
    if (st.remote === stream) return;
    st.remote = stream;
    // A recall's new call replaces the previous call's nodes (its level must not linger).
    if (st.audioEl) { st.audioEl.srcObject = null; st.audioEl.remove(); }
    if (st.srcNode) st.srcNode.disconnect();
    if (st.captureNode) st.captureNode.disconnect();
    // Chromium feeds a remote track into WebAudio only while a media element plays it.
    const audio = document.createElement('audio');
    st.audioEl = audio;
    audio.autoplay = true; audio.muted = true; audio.srcObject = stream;
    document.body.appendChild(audio);
    audio.play().catch(() => {});
    const src = st.ctx.createMediaStreamSource(stream);
    st.srcNode = src;
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

  // One call: a new RTCPeerConnection on the page's microphone stream, POST, the answer.
  async function call() {
    const gen = st.gen;
    const pc = new RTCPeerConnection({ bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require' });
    st.pc = pc;
    pc.addEventListener('track', (ev) => attachRemote(ev.streams[0] || new MediaStream([ev.track])));
    pc.addEventListener('iceconnectionstatechange', () => st.states.push({ t: performance.now(), ice: pc.iceConnectionState, gen }));
    pc.addEventListener('connectionstatechange', () => {
      if (pc.connectionState === 'connected' && st.connectedAt[gen] == null) st.connectedAt[gen] = performance.now();
    });
    for (const track of st.stream.getAudioTracks()) pc.addTransceiver(track, { direction: 'sendrecv', streams: [st.stream] });
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    const tPost = performance.now();
    const res = await fetch('/v1/sessions', {
      method: 'POST', headers: authHeaders({ 'Content-Type': 'application/sdp' }), body: pc.localDescription.sdp,
    });
    const body = await res.text();
    if (res.status !== 201) throw new Error(`POST /v1/sessions -> ${res.status}: ${body.slice(0, 200)}`);
    const tAnswer = performance.now();
    st.sessionUrl = new URL(res.headers.get('Location'), location.href).href;
    st.etag = res.headers.get('ETag');
    await pc.setRemoteDescription({ type: 'answer', sdp: body });
    return { sessionUrl: st.sessionUrl, etag: st.etag, ufrag: fragmentOf(pc.localDescription.sdp).ufrag, gen, tPost, tAnswer };
  }

  window.rc = {
    async start(apiKey) {
      if (apiKey) st.auth = { Authorization: `Bearer ${apiKey}` };
      st.ctx = new AudioContext();
      await st.ctx.resume().catch(() => {});
      st.stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false }, video: false,
      });
      const r = await call();
      startSampler();
      return r;
    },
    // Hang up and call again: close the pc, DELETE the session (not awaited before the new
    // POST, as an app that calls again at once would not wait for it), a new call.
    async recall() {
      const t0 = performance.now();
      const old = { pc: st.pc, url: st.sessionUrl };
      old.pc.close();
      const del = fetch(old.url, { method: 'DELETE', headers: authHeaders() }).then((r) => r.status, () => 0);
      st.gen += 1;
      const r = await call();
      return { ...r, t0, oldSessionUrl: old.url, deleteStatus: await del };
    },
    now: () => performance.now(),
    selected,
    samples: () => st.samples,
    samplesSince: (t) => st.samples.filter((s) => s.t >= t),
    connectedAt: (gen) => st.connectedAt[gen] ?? null,
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

// ---------------------------------------------------------------- one move of each kind
// Each returns the move's gaps (measureGaps over [the move - 500 ms, after the tone check]).

// After a move (or a restart): the call runs on for settleMs, the echoed tone is checked as
// toneLabel, and the gaps are measured from `from` to now, logged as "the <what>"'s.
async function gapsAfter(page, toneCheck, { settleMs, toneLabel, from, label = '', what }) {
  await sleep(settleMs);
  await toneCheck(toneLabel);
  const tEnd = await page.evaluate(() => rc.now());
  const g = measureGaps(await page.evaluate((t) => rc.samplesSince(t), from), from, tEnd);
  log(`${label}media gap around the ${what}: RTP ${g.rtp_gap_ms} ms, audio ${g.audio_gap_ms} ms`);
  return g;
}

// NAT rebinding: the server must follow the new address on Chromium's next valid check
// (consent, every ~2.5 s on a stable pair), with no signaling.
async function rebindMove(summary, page, check, toneCheck, { i, label, tMove, s0 }) {
  const s1 = await waitFor(`${label}RTP back after the rebinding`, async () => {
    const a = await page.evaluate(() => rc.selected());
    await sleep(200);
    const b = await page.evaluate(() => rc.selected());
    const since = (await page.evaluate(() => rc.now())) - tMove;
    return { ok: since > 500 && b.packetsReceived > a.packetsReceived + 3,
      why: `${b.iceConnectionState} rx +${b.packetsReceived - a.packetsReceived} ${Math.round(since)} ms after`, s: b };
  }, { intervalMs: 50, limitMs: 30000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
  if (i === 1) summary.after = s1;
  check(`${label}RTP back after the rebinding, same credentials, no restart`, s1 && s1.localUfrag === s0.localUfrag, s1);
  const g = await gapsAfter(page, toneCheck, { settleMs: 1000, toneLabel: i === 1 ? 'after_rebinding' : `after_rebinding_${i}`,
    from: tMove - 500, label, what: 'rebinding' });
  if (i === 1) summary.gap_ms.rebinding = g;
  check(`${label}rebinding: RTP gap under 6000 ms (two consent intervals)`, g.rtp_gap_ms < 6000, g.rtp_gap_ms);
  summary.ice_states = await page.evaluate(() => rc.states());
  return g;
}

// Handover without signaling: Chromium re-gathers on the network change and must move the
// selected pair (same credentials) to the new address by itself.
async function noRestartMove(summary, page, check, toneCheck, { i, label, tMove, s0 }) {
  const s1 = await waitFor(`${label}the selected pair on a new local address, RTP flowing`, async () => {
    const a = await page.evaluate(() => rc.selected());
    await sleep(200);
    const b = await page.evaluate(() => rc.selected());
    return { ok: b.local && b.local !== s0.local && b.packetsReceived > a.packetsReceived &&
      ['connected', 'completed'].includes(b.iceConnectionState),
    why: `${b.iceConnectionState} local ${b.local} rx +${b.packetsReceived - a.packetsReceived}`, s: b };
  }, { limitMs: 30000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
  if (i === 1) summary.after = s1;
  check(`${label}selected pair moved to the new local address (same credentials)`, s1 && s1.local !== s0.local &&
    s1.localUfrag === s0.localUfrag, s1 && { before: s0.local, after: s1.local, ufrag: s1.localUfrag });
  const g = await gapsAfter(page, toneCheck, { settleMs: 1000, toneLabel: i === 1 ? 'after_handover' : `after_handover_${i}`,
    from: tMove - 500, label, what: 'handover' });
  if (i === 1) summary.gap_ms.handover_no_restart = g;
  summary.ice_states = await page.evaluate(() => rc.states());
  return g;
}

// rc.restart(style) (`what` names it in a timeout). Restarts are rate-limited per session:
// with retry429, a 429 is retried once the way a client does, after its Retry-After (5 s when
// absent, 15 s at most); onRetry(waitS, first answer) is told before the wait.
async function restartPatch(page, { style = 'full', what, logName, retry429, onRetry }) {
  const once = (suffix) => withTimeout(page.evaluate((st) => rc.restart(st), style), 15000, `${what}${suffix}`);
  const r = await once('');
  if (r.status !== 429 || !retry429) return r;
  const waitS = Math.min(15, Number(r.retryAfter) || 5);
  onRetry(waitS, r);
  log(`${logName}: 429, retrying after ${waitS} s`);
  await sleep(waitS * 1000);
  return once(' (retry)');
}

// The restart: PATCH, the answer applied, ICE on the new credentials. The first move also
// runs the PATCH contract checks (412, 428, 204) and, without a handover, a second restart
// the way whip.js sends it. s0: the call before the first move (its ufrags, its address).
async function restartMove(summary, page, check, toneCheck, { i, label, tMove, s0, started }) {
  const out = { gap: null, restarts: 0, extra: {} };
  const prev = await page.evaluate(() => rc.selected());
  const etagBefore = await page.evaluate(() => rc.etag);
  // A later move may meet the rate limit (--move-interval-s should keep this from happening;
  // it lengthens the gap).
  const r = await restartPatch(page, { what: `${label}restartIce + PATCH`, logName: `${label}restart`, retry429: i > 1,
    onRetry: (waitS) => { out.extra.retried_after_429_s = waitS; } });
  if (i === 1) summary.restart = { ...r, body: r.body.slice(0, 2000) };
  check(`${label}PATCH (new ufrag/pwd) -> 200`, r.status === 200, `${r.status} ${r.status !== 200 ? r.body.slice(0, 200) : ''}`);
  if (r.status !== 200) return out;
  out.restarts = 1;
  check(`${label}PATCH 200 is application/trickle-ice-sdpfrag`, /^application\/trickle-ice-sdpfrag/i.test(r.contentType || ''), r.contentType);
  check(`${label}PATCH 200 carries a new ETag`, r.etag && r.etag !== etagBefore, { before: etagBefore, after: r.etag });
  check(`${label}answer fragment: a=ice-lite, a new server ufrag, a=mid, a=end-of-candidates`,
    /^a=ice-lite\r?$/m.test(r.body) && r.newRemoteUfrag !== prev.remoteUfrag && /^a=mid:/m.test(r.body) && /^a=end-of-candidates/m.test(r.body),
    { old: prev.remoteUfrag, new: r.newRemoteUfrag, candidates: r.answerCandidates });
  const s1 = await waitFor(`${label}ICE on the new credentials`, async () => {
    const s = await page.evaluate(() => rc.selected());
    return { ok: ['connected', 'completed'].includes(s.iceConnectionState) && s.localUfrag === r.newLocalUfrag,
      why: `${s.iceConnectionState} local ufrag ${s.localUfrag}`, s };
  }, { limitMs: 15000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
  const tConnected = await page.evaluate(() => rc.now());
  if (i === 1) summary.after = s1;
  check(`${label}ICE connected again after the restart`, s1 && ['connected', 'completed'].includes(s1.iceConnectionState), s1 && s1.iceConnectionState);
  check(`${label}selected pair uses the new local and remote ufrag`, s1 && s1.localUfrag === r.newLocalUfrag &&
    s1.localUfrag !== prev.localUfrag && (s1.remoteUfrag == null || s1.remoteUfrag === r.newRemoteUfrag),
    s1 && { local: [prev.localUfrag, s1.localUfrag], remote: [prev.remoteUfrag, s1.remoteUfrag] });
  const timings = {
    offer: Math.round(r.tPatchSent - r.tRestart), patch_rtt: Math.round(r.tPatchDone - r.tPatchSent),
    applied: r.tApplied ? Math.round(r.tApplied - r.tRestart) : null, connected_seen: Math.round(tConnected - r.tRestart),
  };
  if (i === 1) summary.restart_timings_ms = timings;
  out.extra.restart_timings_ms = timings;
  const g = await gapsAfter(page, toneCheck, { settleMs: 1500, toneLabel: i === 1 ? 'after_restart' : `after_restart_${i}`,
    from: (tMove ?? r.tRestart) - 500, label, what: 'restart' });
  out.gap = g;
  if (i === 1) summary.gap_ms[opts.handoverDir ? 'handover_ice_restart' : 'ice_restart'] = g;
  if (opts.handoverDir) {
    check(`${label}selected pair moved to the new local address`, s1 && s1.local !== prev.local,
      s1 && { before: prev.local, after: s1.local });
  }
  // A handover adds the time Chromium takes to notice the network change and re-gather.
  const limit = opts.handoverDir ? 3000 : 1000;
  check(`${label}restart: RTP gap under ${limit} ms`, g.rtp_gap_ms < limit, g.rtp_gap_ms);
  summary.ice_states = await page.evaluate(() => rc.states());
  if (i !== 1) return out;

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
  if (!opts.handoverDir) {
    const w = await restartPatch(page, { style: 'whipjs', what: 'whip.js-style restart', logName: 'whip.js-style restart',
      retry429: true, onRetry: (waitS, first) => { summary.restart_whipjs_429 = { retry_after: first.retryAfter, waited_s: waitS }; } });
    summary.restart_whipjs = { ...w, body: w.body.slice(0, 2000) };
    check('whip.js-style restart (a=ice-ufrag/a=ice-pwd only, If-Match: *) -> 200 with a new ETag',
      w.status === 200 && w.etag && w.etag !== r.etag, { status: w.status, etag: w.etag, body: w.status !== 200 ? w.body.slice(0, 200) : undefined });
    if (w.status === 200) {
      out.restarts++;
      const s2 = await waitFor('ICE on the third credentials', async () => {
        const s = await page.evaluate(() => rc.selected());
        return { ok: ['connected', 'completed'].includes(s.iceConnectionState) && s.localUfrag === w.newLocalUfrag,
          why: `${s.iceConnectionState} local ufrag ${s.localUfrag}`, s };
      }, { limitMs: 15000 }).then((x) => x.s).catch((e) => { log(e.message); return null; });
      check('connected on the whip.js-style restart credentials', s2 && s2.localUfrag === w.newLocalUfrag &&
        (s2.remoteUfrag == null || s2.remoteUfrag === w.newRemoteUfrag), s2 && { local: s2.localUfrag, remote: s2.remoteUfrag });
      const g2 = await gapsAfter(page, toneCheck, { settleMs: 1000, toneLabel: 'after_whipjs_restart',
        from: w.tRestart - 500, what: 'whip.js-style restart' });
      summary.gap_ms.ice_restart_whipjs = g2;
      check('whip.js-style restart: RTP gap under 1000 ms', g2.rtp_gap_ms < 1000, g2.rtp_gap_ms);
    }
  }
  return out;
}

// Hang up and call again, opts.recalls times: per recall, from pc.close() to the new call's
// connectionState `connected`, its first RTP (packetsReceived > 0) and first audible sample
// (the echoed tone, level >= -45 dBFS); the RTP and audio gaps are from the old call's last
// RTP / audible sample to those firsts, the same definitions as a handover's gap.
async function recallLoop(summary, page, check) {
  summary.recalls = [];
  const quietDb = -45;
  for (let i = 1; i <= opts.recalls; i++) {
    const label = `recall ${i}`;
    const r = await withTimeout(page.evaluate(() => rc.recall()), 15000, `${label}: hang up and POST again`);
    summary.session_url = r.sessionUrl;
    const w = await waitFor(`${label}: connected, RTP and the echoed tone on the new call`, async () => {
      const mine = (await page.evaluate((t) => rc.samplesSince(t), r.t0)).filter((s) => s.gen === r.gen);
      const rtp = mine.find((s) => s.rx > 0);
      const audio = rtp ? mine.find((s) => s.t >= rtp.t && s.level != null && s.level >= quietDb) : null;
      const conn = await page.evaluate((g) => rc.connectedAt(g), r.gen);
      return { ok: rtp && audio && conn != null, why: `connected ${conn != null} rtp ${!!rtp} audio ${!!audio}`, rtp, audio, conn };
    }, { intervalMs: 50, limitMs: 15000 }).catch((e) => { log(e.message); return null; });
    const old = (await page.evaluate((t) => rc.samplesSince(t), r.t0 - 3000)).filter((s) => s.gen === r.gen - 1 && s.t <= r.t0);
    let lastRise = null, lastLoud = null;
    for (let k = 0; k < old.length; k++) {
      if (k > 0 && old[k].rx > old[k - 1].rx) lastRise = old[k].t;
      if (old[k].level != null && old[k].level >= quietDb) lastLoud = old[k].t;
    }
    const ms = (a, b) => (a == null || b == null ? null : Math.round(a - b));
    const rec = {
      recall: i, delete_status: r.deleteStatus, offer_ms: ms(r.tPost, r.t0), post_rtt_ms: ms(r.tAnswer, r.tPost),
      hangup_to_connected_ms: w ? ms(w.conn, r.t0) : null, hangup_to_first_rtp_ms: w ? ms(w.rtp.t, r.t0) : null,
      hangup_to_first_audio_ms: w ? ms(w.audio.t, r.t0) : null,
      rtp_gap_ms: w ? ms(w.rtp.t, lastRise) : null, audio_gap_ms: w ? ms(w.audio.t, lastLoud) : null,
    };
    summary.recalls.push(rec);
    log(`${label}: connected ${rec.hangup_to_connected_ms} ms, first RTP ${rec.hangup_to_first_rtp_ms} ms, ` +
      `first audio ${rec.hangup_to_first_audio_ms} ms after the hang-up (RTP gap ${rec.rtp_gap_ms}, audio gap ${rec.audio_gap_ms})`);
    check(`${label}: the new call connected and its echo came back`, !!w, rec);
    check(`${label}: DELETE of the old session -> 200 or 204`, r.deleteStatus === 200 || r.deleteStatus === 204, r.deleteStatus);
    if (!w) break;
    await sleep(1000); // the call runs a while before the next hang-up: a scenario step
  }
}

// ---------------------------------------------------------------- main
const browser = new BrowserRun();

async function run(summary) {
  const check = checker(summary, log);
  const toneCheck = async (label) => {
    const cap = await withTimeout(page.evaluate(() => rc.capture(2)), 12000, `capturing audio ${label}`);
    const a = analyseTone(cap.samples, cap.sampleRate);
    summary.audio[label] = a;
    const errPct = (Math.abs(a.dominant_hz - opts.toneHz) / opts.toneHz) * 100;
    check(`${label}: echoed tone within 3% of ${opts.toneHz} Hz and SNR > 10 dB`, errPct <= 3 && a.tone_snr_db > 10,
      `${a.dominant_hz} Hz, SNR ${a.tone_snr_db} dB, ${a.rms_dbfs} dBFS`);
  };

  const toneFile = fakeMicWav(browser, opts, usage);
  const page = await browser.launch({
    executablePath: opts.chromium, args: chromiumArgs({ toneFile, allowLoopback: wantLoopback(opts.allowLoopback) }),
    profilePrefix: 'rtcedge-ice-restart-chromium-', origin: new URL(opts.url).origin,
  });
  summary.browser_version = browserVersion(browser.context);
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

  if (opts.recalls) {
    await recallLoop(summary, page, check);
    await toneCheck('after_recalls');
  } else if (opts.gapOnly) {
    summary.gap_only = true;
  } else {
    const nMoves = opts.handoverDir ? opts.moves : 1;
    if (opts.handoverDir) summary.moves = [];
    let restarts = 0;
    let lastMoveAt = null, lastPathGapAt = null;
    for (let i = 1; i <= nMoves; i++) {
      // Check names of the first move are the single-move test's; later ones say which move.
      const label = i === 1 ? '' : `move ${i}: `;
      let tMove = null, wall = null;
      if (opts.handoverDir) {
        if (lastMoveAt !== null && opts.moveIntervalS > 0) {
          // Pacing, not a wait for a condition: the next restart must not hit the rate limit.
          const wait = lastMoveAt + opts.moveIntervalS * 1000 - Date.now();
          if (wait > 0) await sleep(wait);
        }
        lastMoveAt = Date.now();
        // ---- the network change, done by the runner between move-request.<i> and moved.<i>
        const moved = path.join(opts.handoverDir, `moved.${i}`);
        tMove = await page.evaluate(() => rc.now());
        fs.writeFileSync(path.join(opts.handoverDir, `move-request.${i}`), `${Date.now()}\n`);
        await waitFor(`${label}the runner to change the client address`,
          async () => ({ ok: fs.existsSync(moved), why: 'no moved file' }), { intervalMs: 20, limitMs: 15000 });
        wall = Math.round((await page.evaluate(() => rc.now())) - tMove);
        if (i === 1) summary.move_wall_ms = wall;
      }
      let g = null;
      const extra = {};
      if (opts.rebind) {
        g = await rebindMove(summary, page, check, toneCheck, { i, label, tMove, s0 });
      } else if (!opts.restart) {
        g = await noRestartMove(summary, page, check, toneCheck, { i, label, tMove, s0 });
      } else {
        const out = await restartMove(summary, page, check, toneCheck, { i, label, tMove, s0, started });
        g = out.gap;
        restarts += out.restarts;
        Object.assign(extra, out.extra);
      }
      if (opts.handoverDir) {
        // The server's own view of the move: its client_address, and its path.gap event (last
        // authenticated packet on the old path to the first on the new) if this move made one.
        const r = await http('GET', summary.session_url);
        let addr = null, serverGap = null;
        try {
          const j = JSON.parse(r.text);
          addr = j.client_address;
          const gaps = (j.events || []).filter((e) => e && e.type === 'path.gap');
          const last = gaps.length ? gaps[gaps.length - 1] : null;
          if (last && last.at_ms !== lastPathGapAt) { serverGap = Math.round(last.gap_ms); lastPathGapAt = last.at_ms; }
        } catch { /* nulls */ }
        summary.moves.push({ move: i, rtp_gap_ms: g ? g.rtp_gap_ms : null, audio_gap_ms: g ? g.audio_gap_ms : null,
          server_gap_ms: serverGap, client_address: addr, move_wall_ms: wall, ...extra });
      }
    }
    if (opts.restart && restarts > 0) {
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

const main = () => runMain({ url: opts.url, expect_path: opts.expectPath, checks: [], audio: {} },
  { timeoutS: opts.timeoutS, run, cleanup: () => browser.close(), log });

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
