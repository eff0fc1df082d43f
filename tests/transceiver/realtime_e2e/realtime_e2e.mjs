#!/usr/bin/env node
// Drives headless Chromium through the realtime end-to-end pages and decides pass or fail.
//
//   --scenario agents     page/agent.html: the unchanged @openai/agents-realtime connects with an
//                         ephemeral key from the page's origin; session.created/updated, a text
//                         turn, speech_started/stopped on the fake microphone's tone bursts, the
//                         parrot's echo heard, interrupt() -> output_audio_buffer.cleared and the
//                         received audio silent within --max-interrupt-ms.
//   --scenario multipart  page/multipart.html: a plain fetch posts multipart sdp + session;
//                         201 + Location rtc_..., the channel opens, session.created carries the
//                         session part's instructions, hangup -> 200.
//   --scenario sideband   page/agent.html with a key whose session restricts the data channel
//                         (--data-channel-policy, minted by the app origin); the app server's
//                         sidebands (sideband.mjs): the openai SDK's OpenAIRealtimeWS through a
//                         TLS terminator (--tls-cert/--tls-key) and a bare ws WebSocket, both
//                         with --server-key. The sideband sets instructions and a tool, answers
//                         the tool call the browser's text asks for (the browser never sees the
//                         call), the browser hears the reply's text and tone; a client event off
//                         the list is refused; the app server's hangup ends the browser's call
//                         and closes both sidebands after rtcedge.call.ended.
//
// Usage: node realtime_e2e.mjs --scenario agents|multipart --app-url http://127.0.0.1:P
//          --calls-url http://127.0.0.1:Q/v1/realtime/calls --tone-wav FILE [--timeout-s 90]
//          [--chromium /usr/bin/chromium] [--max-interrupt-ms 250] [--max-excess-ms 80]
//          [--expect-answer-candidate H:P] [--expect-selected-candidate H:P]
//          [--artifacts DIR] [--allow-loopback auto|yes|no]
//          sideband: --server-key K --tls-cert PEM --tls-key PEM --data-channel-policy JSON
// --expect-selected-candidate: the remote end of the selected pair (default: the answer's
// candidate; over ICE-TCP the VIP's TCP port).
// stdout: one JSON summary; exit 0 = every check passed, 1 = a check failed or timed out,
// 2 = bad usage. The app server (/token, the pages, the bundle) is the runner's
// (run_realtime_e2e.py); this script talks to the browser, reads /metrics and (sideband) plays
// the app server's sidebands and hangup (sideband.mjs). It owns the scenarios and the
// calls-request log; the browser launch, waits, checks and the /metrics read are
// tests/support/js's, the tone analysis ../e2e/tone_analysis.mjs's.

import fs from 'node:fs';
import path from 'node:path';
import { analyseTone, rmsDbfs } from '../e2e/tone_analysis.mjs';
import { BROWSER_DEFAULTS, BROWSER_FLAGS, BrowserRun, browserVersion, chromiumArgs, wantLoopback } from '../../support/js/browser.mjs';
import { baseUrl, checker, deadline, parseArgs, runMain, usageExit, withTimeout } from '../../support/js/driver.mjs';
import { httpRequest, sessionsActive as transceiverSessionsActive } from '../../support/js/transceiver.mjs';
import { PlainSideband, SdkSideband, loadSidebandPackages, startTlsTerminator } from './sideband.mjs';

const usage = usageExit('usage: node realtime_e2e.mjs --scenario agents|multipart|sideband --app-url URL --calls-url URL --tone-wav FILE ' +
  '[--timeout-s S] [--chromium PATH] [--max-interrupt-ms MS] [--max-excess-ms MS] [--expect-answer-candidate HOST:PORT] ' +
  '[--expect-selected-candidate HOST:PORT] [--artifacts DIR] ' +
  '[--allow-loopback auto|yes|no] [--server-key K --tls-cert PEM --tls-key PEM --data-channel-policy JSON]');

const opts = parseArgs(process.argv.slice(2), {
  ...BROWSER_DEFAULTS, scenario: null, appUrl: null, callsUrl: null, timeoutS: 90,
  maxInterruptMs: 250, maxExcessMs: 80, expectCandidate: null, expectSelected: null, artifacts: null,
  serverKey: null, tlsCert: null, tlsKey: null, dataChannelPolicy: null,
}, {
  ...BROWSER_FLAGS, '--scenario': ['scenario', String], '--app-url': ['appUrl', baseUrl], '--calls-url': ['callsUrl', baseUrl],
  '--timeout-s': ['timeoutS', Number], '--max-interrupt-ms': ['maxInterruptMs', Number],
  '--max-excess-ms': ['maxExcessMs', Number], '--expect-answer-candidate': ['expectCandidate', String],
  '--expect-selected-candidate': ['expectSelected', String],
  '--artifacts': ['artifacts', String],
  '--server-key': ['serverKey', String], '--tls-cert': ['tlsCert', String], '--tls-key': ['tlsKey', String],
  '--data-channel-policy': ['dataChannelPolicy', (v) => { try { return JSON.parse(v); } catch { return null; } }],
}, usage);
if (!['agents', 'multipart', 'sideband'].includes(opts.scenario)) usage('--scenario must be agents, multipart or sideband');
if (opts.scenario === 'sideband' && !(opts.serverKey && opts.tlsCert && opts.tlsKey && opts.dataChannelPolicy &&
    Array.isArray(opts.dataChannelPolicy.allowed_server_events) && Array.isArray(opts.dataChannelPolicy.allowed_client_events))) {
  usage('--scenario sideband needs --server-key, --tls-cert, --tls-key and --data-channel-policy ' +
    '{"allowed_client_events": [...], "allowed_server_events": [...]}');
}
if (!opts.appUrl || !opts.callsUrl) usage('--app-url and --calls-url are required');
if (!opts.toneWav || !fs.existsSync(opts.toneWav)) usage('--tone-wav FILE (an existing WAV) is required');
if (!(opts.timeoutS > 0) || !(opts.maxInterruptMs > 0) || !(opts.maxExcessMs > 0)) usage('bad --timeout-s, --max-interrupt-ms or --max-excess-ms');

const log = (...a) => console.error('[realtime_e2e]', ...a);
const { remainingMs, waitFor } = deadline(opts.timeoutS);
const transceiverOrigin = new URL(opts.callsUrl).origin;
const sessionsActive = () => transceiverSessionsActive(transceiverOrigin);

const browser = new BrowserRun();
// What a scenario opened besides the browser (sidebands, the TLS terminator): closed at the end.
const closers = [];

// The calls POST as the transceiver received it, from the browser's side: method, URL, the
// request headers (the SDK's Content-Type, Authorization, X-OpenAI-Agents-SDK), the answer.
const pendingCalls = [];
// Every calls request seen so far, with its response recorded (the handlers are async).
async function settledCalls(summary) {
  await withTimeout(Promise.allSettled(pendingCalls), 10000, 'the calls responses').catch((e) => log(e.message));
  return summary.calls_requests;
}

function watchCalls(page, summary) {
  summary.calls_requests = [];
  page.on('request', (r) => { pendingCalls.push(recordCall(r, summary)); });
}

async function recordCall(r, summary) {
  const u = new URL(r.url());
  if (u.origin !== transceiverOrigin || !u.pathname.startsWith('/v1/realtime/calls')) return;
  const entry = { method: r.method(), path: u.pathname, headers: await r.allHeaders().catch(() => r.headers()) };
  const body = r.postData();
  if (body != null) {
    entry.body_bytes = body.length;
    entry.body_has_candidate = /^a=candidate:/m.test(body);
  }
  if (entry.headers.authorization) entry.headers.authorization = entry.headers.authorization.replace(/^(Bearer ek_.{0,6}).*$/, '$1…');
  summary.calls_requests.push(entry);
  log(`browser -> ${entry.method} ${entry.path} headers ${JSON.stringify(entry.headers)}`);
  const res = await r.response().catch(() => null);
  if (!res) { entry.response = { error: r.failure() ? r.failure().errorText : 'no response' }; return; }
  const h = await res.allHeaders().catch(() => res.headers());
  entry.response = { status: res.status(), location: h.location ?? null, content_type: h['content-type'] ?? null,
    access_control_expose_headers: h['access-control-expose-headers'] ?? null };
  const text = await res.text().catch(() => '');
  if (res.status() >= 200 && res.status() < 300 && r.method() === 'POST' && u.pathname === new URL(opts.callsUrl).pathname) {
    entry.response.answer_candidates = text.split(/\r?\n/).filter((l) => l.startsWith('a=candidate:'));
  } else {
    entry.response.body = text.slice(0, 500);
  }
  log(`browser <- ${entry.response.status} ${JSON.stringify(entry.response)}`);
}

function checkAnswerCandidate(summary, check) {
  if (!opts.expectCandidate) return;
  const post = summary.calls_requests.find((r) => r.method === 'POST' && r.response && r.response.answer_candidates);
  const cands = post ? post.response.answer_candidates : [];
  const [host, port] = opts.expectCandidate.split(/:(?=[0-9]+$)/);
  const hit = cands.some((c) => { const f = c.split(' '); return f[4] === host && f[5] === port; });
  check(`the answer's candidates name ${opts.expectCandidate} (the relay's VIP)`, hit && cands.length > 0, cands);
}

// Until the audio tap has recorded up to AudioContext time `at` (the clock the levels use).
async function tapReached(page, at) {
  await waitFor(`the audio tap to reach t=${at.toFixed(2)} s`, async () => {
    const st = await page.evaluate(() => window.rtce.state());
    return { ok: st.tapT !== null && st.tapT >= at, why: `tap at ${st.tapT}, context at ${st.now}` };
  }, { limitMs: 5000, intervalMs: 20 });
}

// ---------------------------------------------------------------- agents scenario
async function runAgents(page, summary, check) {
  const keyInstructions = 'instructions from the ephemeral key';
  const agentInstructions = 'instructions from the agent';
  const url = `${opts.appUrl}/agent.html?calls=${encodeURIComponent(opts.callsUrl)}` +
    `&key_instructions=${encodeURIComponent(keyInstructions)}&agent_instructions=${encodeURIComponent(agentInstructions)}`;
  const resp = await page.goto(url, { timeout: Math.min(15000, remainingMs()) });
  if (!check('agent page served by the app origin', resp && resp.status() === 200, resp && resp.status())) return;
  await waitFor('the bundle to load (window.rtce)', async () => ({ ok: await page.evaluate(() => typeof window.rtce === 'object') }), { limitMs: 10000 });
  check('page origin differs from the transceiver origin (CORS exercised)', new URL(opts.appUrl).origin !== transceiverOrigin,
    { page: new URL(opts.appUrl).origin, transceiver: transceiverOrigin });

  const started = await withTimeout(page.evaluate(() => window.rtce.start()), Math.min(30000, remainingMs()), 'session.connect()');
  const st = await page.evaluate(() => window.rtce.state());
  summary.page_state = st;
  if (!check('session.connect() resolved', started.phase === 'connected', started.error || started.phase)) return;
  check('the ephemeral key from /token starts with ek_', st.token && st.token.prefix === 'ek_', st.token);
  check('the call id (Location\'s last segment, readable: CORS exposes Location) starts with rtc_',
    typeof st.callId === 'string' && st.callId.startsWith('rtc_'), st.callId);
  const post = (await settledCalls(summary)).find((r) => r.method === 'POST' && r.path === new URL(opts.callsUrl).pathname);
  check('the SDK POSTed raw SDP with Authorization and X-OpenAI-Agents-SDK', post &&
    /^application\/sdp/.test(post.headers['content-type'] || '') && /^Bearer ek_/.test(post.headers.authorization || '') &&
    /^openai-agents-sdk/.test(post.headers['x-openai-agents-sdk'] || ''), post && post.headers);
  check('the offer was POSTed before ICE gathering (no a=candidate)', post && post.body_has_candidate === false, post && post.body_has_candidate);
  check('the POST got 201', post && post.response && post.response.status === 201, post && post.response);
  checkAnswerCandidate(summary, check);

  const withStream = await waitFor('the remote audio track', async () => {
    const s = await page.evaluate(() => window.rtce.state());
    return { ok: s.sdkAudioHasStream && s.tap, why: `stream ${s.sdkAudioHasStream}, tap ${s.tap}` };
  }, { limitMs: 5000 }).catch((e) => ({ ok: false, why: e.message }));
  check('the SDK\'s audio element got the remote stream (the answer\'s audio has a=msid)', withStream.ok, withStream.why);
  const events = async () => page.evaluate(() => window.rtce.events());
  const inOf = (evs, type, afterPt = -Infinity) => evs.filter((e) => e.dir === 'in' && e.type === type && e.pt > afterPt);
  let evs = await events();
  const created = inOf(evs, 'session.created')[0];
  const updated = inOf(evs, 'session.updated')[0];
  check('session.created with a string event_id and a session object', created && typeof created.event_id === 'string' &&
    created.ev.session && typeof created.ev.session === 'object', created && { event_id: created.event_id });
  check('session.updated with a string event_id (connect() waited for it)', updated && typeof updated.event_id === 'string',
    updated && { event_id: updated.event_id });
  // The key's session config is the call's starting point; the SDK's session.update (the
  // agent's instructions) is applied on top.
  check('session.created carries the ephemeral key\'s session instructions',
    created && created.ev.session && created.ev.session.instructions === keyInstructions, created && created.ev.session && created.ev.session.instructions);
  check('session.updated carries the agent\'s instructions (session.update applied)',
    updated && updated.ev.session && updated.ev.session.instructions === agentInstructions, updated && updated.ev.session && updated.ev.session.instructions);
  const firstUpdate = evs.find((e) => e.dir === 'out' && e.type === 'session.update');
  check('the SDK sent session.update on channel open', Boolean(firstUpdate), firstUpdate && Object.keys(firstUpdate.ev.session || {}));
  summary.errors_after_update = inOf(evs, 'error').map((e) => e.ev.error);
  const active = await sessionsActive();
  check('metrics rtcedge_transceiver_sessions_active 1', active === 1, active);

  // ---- a text turn (microphone still muted, so no voice turn interleaves)
  const textPt = await page.evaluate(() => performance.now());
  await page.evaluate(() => window.rtce.sendMessage('hello rtcedge'));
  let textDone;
  try {
    textDone = await waitFor('response.done after sendMessage', async () => {
      evs = await events();
      const done = inOf(evs, 'response.done', textPt)[0];
      return { ok: Boolean(done), done };
    }, { limitMs: 15000 });
  } catch (e) { check('a text turn gets response.done', false, e.message); }
  if (textDone) {
    const replies = evs.filter((e) => e.dir === 'in' && e.pt > textPt && e.pt <= textDone.done.pt && /^response\./.test(e.type));
    const echoed = replies.some((e) => JSON.stringify(e.ev).includes('hello rtcedge'));
    summary.text_turn = { round_trip_ms: Math.round(textDone.done.pt - textPt), response_events: replies.map((e) => e.type) };
    check('a text turn gets response.done', true, summary.text_turn);
    check('the response carries the text back ("hello rtcedge")', echoed, replies.map((e) => e.type));
    const sent = evs.filter((e) => e.dir === 'out' && e.pt >= textPt).map((e) => e.type);
    check('sendMessage sent conversation.item.create then response.create', sent.indexOf('conversation.item.create') >= 0 &&
      sent.indexOf('response.create') > sent.indexOf('conversation.item.create'), sent);
  }

  // ---- speech: unmute; the fake microphone plays tone bursts
  const unmutePt = await page.evaluate(() => { window.rtce.mute(false); return performance.now(); });
  // Unmuting mid-burst gives a short first utterance; the replay to listen to is the first
  // of a whole burst (>= 800 ms from start to stop, the hangover included).
  const vad = await waitFor('speech_started then speech_stopped of a whole burst', async () => {
    evs = await events();
    const pairs = inOf(evs, 'input_audio_buffer.speech_started', unmutePt)
      .map((s) => ({ s, p: inOf(evs, 'input_audio_buffer.speech_stopped', s.pt)[0] })).filter((x) => x.p);
    const whole = pairs.find((x) => x.p.ev.audio_end_ms - x.s.ev.audio_start_ms >= 800);
    return { ok: Boolean(whole), ...whole, skipped: pairs.indexOf(whole),
      why: `${pairs.length} start/stop pair(s), none of >= 800 ms (${pairs.map((x) => x.p.ev.audio_end_ms - x.s.ev.audio_start_ms)})` };
  }, { limitMs: 20000 }).catch((e) => ({ ok: false, why: e.message }));
  if (!check('input_audio_buffer.speech_started then speech_stopped while the tone plays', vad.ok,
    vad.ok ? { start_ms: vad.s.ev.audio_start_ms, end_ms: vad.p.ev.audio_end_ms, item_id: vad.s.ev.item_id } : vad.why)) return;
  check('speech events carry event_id, item_id and audio_start_ms < audio_end_ms',
    typeof vad.s.event_id === 'string' && typeof vad.p.event_id === 'string' && typeof vad.s.ev.item_id === 'string' &&
    vad.s.ev.item_id === vad.p.ev.item_id && vad.s.ev.audio_start_ms < vad.p.ev.audio_end_ms,
    { started: vad.s.ev, stopped: vad.p.ev });
  const burstMs = vad.p.ev.audio_end_ms - vad.s.ev.audio_start_ms;
  summary.vad = { audio_start_ms: vad.s.ev.audio_start_ms, audio_end_ms: vad.p.ev.audio_end_ms, speech_ms: burstMs,
    short_utterances_skipped: vad.skipped };

  // ---- the parrot replays the utterance as a response: hear it
  const replay = await waitFor('the replay (output_audio_buffer.started .. stopped)', async () => {
    evs = await events();
    const b = inOf(evs, 'output_audio_buffer.started', vad.p.pt)[0];
    const e = b && inOf(evs, 'output_audio_buffer.stopped', b.pt)[0];
    return { ok: Boolean(e), b, e, why: b ? 'started only' : 'no output_audio_buffer.started' };
  }, { limitMs: 15000 }).catch((e) => ({ ok: false, why: e.message }));
  if (!check('the replay is a response: output_audio_buffer.started then stopped', replay.ok, replay.ok ? undefined : replay.why)) return;
  evs = await events();
  const between = evs.filter((e) => e.dir === 'in' && e.pt > vad.p.pt && e.pt <= replay.e.pt + 2000).map((e) => e.type);
  check('the replay has response.created and response.done', between.includes('response.created') && between.includes('response.done'), between);
  // The audio follows the events by the receive path's delay: take the window generously,
  // once the tap has recorded all of it.
  const win = [replay.b.at, replay.e.at + 0.6];
  await tapReached(page, win[1]);
  const samples = await page.evaluate(([a, b]) => window.rtce.samples(a, b), win);
  const sampleRate = await page.evaluate(() => window.rtce.sampleRate());
  // The receive path's delay: output_audio_buffer.started (sent as the replay's first frame
  // leaves) to the first loud 10 ms chunk at the tap (network, jitter buffer, WebAudio).
  const firstLoud = (await page.evaluate(([a, b]) => window.rtce.levels(a, b), [replay.b.at, replay.b.at + 1.5]))
    .find(([, db]) => db > -30);
  const mediaDelayMs = firstLoud ? Math.round((firstLoud[0] - replay.b.at) * 1000) : null;
  if (check('received audio captured during the replay', samples.length >= sampleRate * 0.5, `${samples.length} samples`)) {
    const a = analyseTone(samples, sampleRate);
    summary.echo = { window_s: Number((win[1] - win[0]).toFixed(3)), receive_delay_ms: mediaDelayMs, ...a };
    const errPct = (Math.abs(a.dominant_hz - opts.toneHz) / opts.toneHz) * 100;
    check(`echoed dominant frequency within 3% of ${opts.toneHz} Hz`, errPct <= 3, `${a.dominant_hz} Hz`);
    check('echoed tone SNR > 10 dB', a.tone_snr_db > 10, `${a.tone_snr_db} dB, level ${a.rms_dbfs} dBFS`);
  }

  // ---- interrupt() during the next replay
  const next = await waitFor('the next replay to start playing', async () => {
    evs = await events();
    const b = inOf(evs, 'output_audio_buffer.started', replay.e.pt)[0];
    if (!b) return { ok: false, why: 'no second output_audio_buffer.started' };
    // Playing = the last 60 ms of received audio are loud, so the interrupt cuts real sound.
    const now = await page.evaluate(() => window.rtce.state().now);
    const lv = await page.evaluate(([a]) => window.rtce.levels(a), [now - 0.06]);
    const loud = lv.length >= 4 && lv.every(([, db]) => db > -30);
    return { ok: loud, b, at: now, why: `levels ${lv.map(([, d]) => d.toFixed(0)).join(',')}` };
  }, { limitMs: 20000, intervalMs: 20 }).catch((e) => ({ ok: false, why: e.message }));
  if (!check('a second replay is audible (> -30 dBFS over 60 ms)', next.ok, next.ok ? undefined : next.why)) return;
  await tapReached(page, next.at + 0.2); // 200 ms into the audible replay; it lasts ~1.5 s
  const cut = await page.evaluate(() => { const pt = performance.now(); const at = window.rtce.interrupt(); return { pt, at }; });
  const cleared = await waitFor('output_audio_buffer.cleared', async () => {
    evs = await events();
    const c = inOf(evs, 'output_audio_buffer.cleared', cut.pt - 1)[0];
    return { ok: Boolean(c), c };
  }, { limitMs: 5000, intervalMs: 20 }).catch((e) => ({ ok: false, why: e.message }));
  const sentAfter = evs.filter((e) => e.dir === 'out' && e.pt >= cut.pt - 1).map((e) => e.type);
  check('interrupt() sent output_audio_buffer.clear (and response.cancel while a response runs)',
    sentAfter.includes('output_audio_buffer.clear'), sentAfter);
  check('output_audio_buffer.cleared arrives', cleared.ok, cleared.ok ? `${Math.round(cleared.c.pt - cut.pt)} ms after interrupt()` : cleared.why);
  // Silence = 200 ms in a row of 10 ms chunks below -50 dBFS; the fall time is from the
  // interrupt() call to the first of those chunks, on the AudioContext clock.
  await tapReached(page, cut.at + 0.8);
  const lv = await page.evaluate(([a, b]) => window.rtce.levels(a, b), [cut.at - 0.2, cut.at + 0.8]);
  const before = lv.filter(([t]) => t < cut.at && t >= cut.at - 0.1).map(([, d]) => d);
  let fallAt = null;
  for (let i = 0; i < lv.length && fallAt === null; i++) {
    if (lv[i][0] < cut.at) continue;
    let j = i;
    while (j < lv.length && lv[j][1] < -50) j++;
    if (j > i && lv[j - 1][0] - lv[i][0] >= 0.19) fallAt = lv[i][0];
  }
  const fallMs = fallAt === null ? null : Math.round((fallAt - cut.at) * 1000);
  // The receive delay of this same replay (the jitter buffer adapts between replays).
  const startLoud = (await page.evaluate(([a, b]) => window.rtce.levels(a, b), [next.b.at, cut.at]))
    .find(([, db]) => db > -30);
  const delayMs = startLoud ? Math.round((startLoud[0] - next.b.at) * 1000) : null;
  const excessMs = fallMs !== null && delayMs !== null ? fallMs - delayMs : null;
  summary.interrupt = {
    level_before_dbfs: before.length ? Number(Math.max(...before).toFixed(1)) : null,
    fall_to_silence_ms: fallMs, bound_ms: opts.maxInterruptMs, receive_delay_ms: delayMs,
    fall_beyond_receive_delay_ms: excessMs, beyond_bound_ms: opts.maxExcessMs,
    cleared_after_ms: cleared.ok ? Math.round(cleared.c.pt - cut.pt) : null,
    levels_dbfs: lv.map(([t, d]) => [Math.round((t - cut.at) * 1000), Number(d.toFixed(0))]),
  };
  check('the output was audible just before interrupt() (> -30 dBFS)', before.length && Math.max(...before) > -30, summary.interrupt.level_before_dbfs);
  check(`received audio silent (< -50 dBFS for 200 ms) within ${opts.maxInterruptMs} ms of interrupt()`,
    fallMs !== null && fallMs <= opts.maxInterruptMs, fallMs === null ? 'never silent' : `${fallMs} ms`);
  // What the server adds: the fall time minus the receive path's own delay (measured at this
  // replay's start), i.e. about how long the server kept sending after output_audio_buffer.clear.
  check(`silence within ${opts.maxExcessMs} ms beyond the receive delay (the server stops within a frame)`,
    excessMs !== null && excessMs <= opts.maxExcessMs,
    excessMs === null ? 'not measured' : `${fallMs} ms - ${delayMs} ms receive delay = ${excessMs} ms`);
  summary.browser_stats = await page.evaluate(() => window.rtce.stats());
  const selected = opts.expectSelected || opts.expectCandidate;
  if (selected) {
    check(`the selected remote candidate is the relay VIP (${selected})`,
      summary.browser_stats && summary.browser_stats.remoteCandidate === selected,
      summary.browser_stats && summary.browser_stats.remoteCandidate);
  }
  evs = await events();
  summary.event_types_in = [...new Set(evs.filter((e) => e.dir === 'in').map((e) => e.type))];
  summary.event_types_out = [...new Set(evs.filter((e) => e.dir === 'out').map((e) => e.type))];
  summary.server_errors = evs.filter((e) => e.dir === 'in' && e.type === 'error').map((e) => e.ev.error);
  // session.close() is the SDK's only hang-up: the peer connection closes (DTLS close_notify),
  // and the server must end the session from that alone.
  const closeError = await page.evaluate(() => window.rtce.close());
  const drained = await waitFor('sessions_active to return to 0 after session.close()', async () => {
    const v = await sessionsActive();
    return { ok: v === 0, why: `${v}` };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  check('session.close() ends the call: rtcedge_transceiver_sessions_active back to 0', drained.ok && !closeError,
    closeError || drained.why);
}

// ---------------------------------------------------------------- multipart scenario
async function runMultipart(page, summary, check) {
  const resp = await page.goto(`${opts.appUrl}/multipart.html`, { timeout: Math.min(15000, remainingMs()) });
  if (!check('multipart page served by the app origin', resp && resp.status() === 200, resp && resp.status())) return;
  const instructions = 'multipart test';
  const r = await withTimeout(page.evaluate(([u, i, t]) => window.rtceMultipart.run(u, i, t), [opts.callsUrl, instructions, 15000]),
    Math.min(40000, remainingMs()), 'the multipart flow');
  summary.page = { steps: r.steps, error: r.error, event_types: r.events.map((e) => e.type) };
  const post = (await settledCalls(summary)).find((x) => x.method === 'POST' && x.path === new URL(opts.callsUrl).pathname);
  if (!check('the page got a key from /token and POSTed the offer', r.postStatus !== undefined, r.error)) return;
  check('the POST is multipart/form-data with a boundary', post && /^multipart\/form-data; *boundary=/.test(post.headers['content-type'] || ''),
    post && post.headers['content-type']);
  check('the POST got 201', r.postStatus === 201, r.postStatus ?? r.error);
  check('201 with Content-Type application/sdp', r.postStatus === 201 && /^application\/sdp/.test(r.postContentType || ''), r.postContentType);
  check('Location /v1/realtime/calls/rtc_<id> (readable: CORS exposes it)', /\/v1\/realtime\/calls\/rtc_[^/]+$/.test(r.location || ''), r.location);
  check('the offer had no a=candidate (posted right after setLocalDescription)', r.offerHasCandidate === false, r.offerHasCandidate);
  checkAnswerCandidate(summary, check);
  const sc = r.sessionCreated;
  check('the data channel opened and session.created arrived', Boolean(sc), r.error);
  check('session.created has a string event_id', sc && typeof sc.event_id === 'string', sc && sc.event_id);
  check('session.created carries the session part\'s instructions', sc && sc.session && sc.session.instructions === instructions,
    sc && sc.session && sc.session.instructions);
  check('POST .../hangup -> 200', r.hangupStatus === 200, r.hangupStatus ? `${r.hangupStatus} ${r.hangupBody}` : r.error);
  if (r.hangupStatus === 200) {
    const drained = await waitFor('sessions_active to return to 0 after hangup', async () => {
      const v = await sessionsActive();
      return { ok: v === 0, why: `${v}` };
    }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
    check('metrics rtcedge_transceiver_sessions_active back to 0 after hangup', drained.ok, drained.why);
  }
  summary.channel_after_hangup = r.channelAfterHangup;
}

// ---------------------------------------------------------------- sideband scenario
// What the app server's sideband sets, and what its tool answers.
const SIDEBAND_INSTRUCTIONS = 'instructions from the app server (sideband)';
const WEATHER_TOOL = {
  type: 'function', name: 'get_weather', description: 'The current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TOOL_OUTPUT = JSON.stringify({ city: 'Paris', sky: 'clear', temperature_c: 21 });
const TOOL_TEXT = 'call get_weather {"city":"Paris"}';
// Every event each sideband heard, for the artifacts of a failed run.
const sidebandsHeard = {};

async function runSideband(page, summary, check) {
  const policy = opts.dataChannelPolicy;
  const allowedServer = new Set(policy.allowed_server_events);
  // The browser always hears session.created and the answers to its own events.
  const alwaysToBrowser = new Set(['session.created', 'session.updated', 'error']);
  const pageMayHear = (type) => allowedServer.has(type) || alwaysToBrowser.has(type);
  const refusedClientEvent = 'conversation.item.delete';
  check(`the key's policy leaves ${refusedClientEvent} off allowed_client_events (the page sends it to be refused)`,
    !policy.allowed_client_events.includes(refusedClientEvent), policy.allowed_client_events);

  let pkgs;
  try {
    pkgs = loadSidebandPackages();
  } catch (e) {
    check('openai and ws load from tools/node_modules', false, e.message);
    return;
  }
  summary.packages = pkgs.versions;
  const target = new URL(transceiverOrigin);
  const terminator = await startTlsTerminator({ certFile: opts.tlsCert, keyFile: opts.tlsKey,
    target: { host: target.hostname, port: Number(target.port) } });
  closers.push(() => terminator.close());
  log(`TLS terminator https://localhost:${terminator.port} -> ${transceiverOrigin}`);

  // ---- the browser: the agents SDK with a key minted under the app's policy
  const keyInstructions = 'instructions from the ephemeral key';
  const agentInstructions = 'instructions from the agent';
  const url = `${opts.appUrl}/agent.html?calls=${encodeURIComponent(opts.callsUrl)}&policy=sideband` +
    `&key_instructions=${encodeURIComponent(keyInstructions)}&agent_instructions=${encodeURIComponent(agentInstructions)}`;
  const resp = await page.goto(url, { timeout: Math.min(15000, remainingMs()) });
  if (!check('agent page served by the app origin', resp && resp.status() === 200, resp && resp.status())) return;
  await waitFor('the bundle to load (window.rtce)', async () => ({ ok: await page.evaluate(() => typeof window.rtce === 'object') }), { limitMs: 10000 });
  const started = await withTimeout(page.evaluate(() => window.rtce.start()), Math.min(30000, remainingMs()), 'session.connect()');
  const st = await page.evaluate(() => window.rtce.state());
  summary.page_state = st;
  if (!check('session.connect() resolved with the policy-restricted key', started.phase === 'connected', started.error || started.phase)) return;
  const callId = st.callId;
  if (!check('the page has the call id (the SDK\'s transport.callId, from Location)', typeof callId === 'string' && /^rtc_[0-9a-f]+$/.test(callId), callId)) return;
  await settledCalls(summary);
  checkAnswerCandidate(summary, check);
  const events = async () => page.evaluate(() => window.rtce.events());
  const inOf = (evs, type, afterPt = -Infinity) => evs.filter((e) => e.dir === 'in' && e.type === type && e.pt > afterPt);
  let evs = await events();
  const created = inOf(evs, 'session.created')[0];
  const dc = created && created.ev.session && created.ev.session.client && created.ev.session.client.data_channel;
  check('session.created carries the key\'s data-channel policy (session.client.data_channel)',
    dc && JSON.stringify(dc.allowed_server_events) === JSON.stringify(policy.allowed_server_events) &&
    JSON.stringify(dc.allowed_client_events) === JSON.stringify(policy.allowed_client_events), dc);
  check('the SDK\'s own session.update was applied (session.updated with the agent\'s instructions)',
    inOf(evs, 'session.updated').some((e) => e.ev.session && e.ev.session.instructions === agentInstructions),
    inOf(evs, 'session.updated').map((e) => e.ev.session && e.ev.session.instructions));
  // The echo backend's unsupported_session_field (no transcription, no semantic_vad) is
  // expected, as in the agents scenario; a refusal would mean the policy lacks an event the SDK sends.
  summary.errors_after_update = inOf(evs, 'error').map((e) => e.ev.error);
  check('the policy refused none of the events the SDK sent while connecting',
    !summary.errors_after_update.some((e) => e && e.code === 'client_event_not_allowed'), summary.errors_after_update);

  // ---- the app server attaches: the SDK through TLS, a bare WebSocket directly
  const sdk = new SdkSideband(pkgs, { baseURL: `https://localhost:${terminator.port}/v1`, apiKey: opts.serverKey, callId });
  closers.push(() => sdk.close());
  sidebandsHeard.sdk = sdk.events;
  const plainUrl = `${transceiverOrigin.replace(/^http/, 'ws')}/v1/realtime?call_id=${encodeURIComponent(callId)}`;
  const plain = new PlainSideband(pkgs, { url: plainUrl, apiKey: opts.serverKey });
  closers.push(() => plain.close());
  sidebandsHeard.plain = plain.events;
  check('the SDK sideband\'s URL is wss://<baseURL>/realtime?call_id=<call id>',
    sdk.url === `wss://localhost:${terminator.port}/v1/realtime?call_id=${callId}`, sdk.url);
  const bothCreated = await waitFor('session.created on both sidebands', async () => {
    const a = sdk.find((e) => e.type === 'session.created');
    const b = plain.find((e) => e.type === 'session.created');
    return { ok: Boolean(a && b), a, b,
      why: `sdk ${a ? 'created' : JSON.stringify({ opened: sdk.opened, closed: sdk.closed, errors: sdk.errors })}, ` +
        `plain ${b ? 'created' : JSON.stringify({ opened: plain.opened, closed: plain.closed, refused: plain.refused, errors: plain.errors })}` };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  if (!check('both sidebands attach (the SDK through the TLS terminator) and get session.created first', bothCreated.ok &&
    bothCreated.a.index === 0 && bothCreated.b.index === 0, bothCreated.ok ? { sdk_opened_ms: sdk.opened, plain_opened_ms: plain.opened } : bothCreated.why)) return;
  check('the TLS terminator carried the SDK\'s connection', terminator.connections() >= 1, terminator.connections());
  check('the sidebands\' session.created is the browser\'s session (same session.id)',
    bothCreated.a.ev.session && created && bothCreated.a.ev.session.id === created.ev.session.id &&
    bothCreated.b.ev.session.id === created.ev.session.id, { sideband: bothCreated.a.ev.session && bothCreated.a.ev.session.id, browser: created && created.ev.session.id });
  check('the sideband\'s session.created has the browser\'s instructions so far (the agent\'s)',
    bothCreated.a.ev.session.instructions === agentInstructions, bothCreated.a.ev.session.instructions);

  // Who may not attach: an ephemeral key (the browser's kind), and anyone to an unknown call.
  const ekRes = await fetch(`${opts.appUrl}/token`).then((r) => r.json()).catch((e) => ({ error: e.message }));
  const refusedEk = new PlainSideband(pkgs, { url: plainUrl, apiKey: ekRes.value || 'ek_none', name: 'ek-key' });
  const refusedUnknown = new PlainSideband(pkgs, { url: plainUrl.replace(/call_id=[^&]*/, 'call_id=rtc_00000000000000000000000000000000'),
    apiKey: opts.serverKey, name: 'unknown-call' });
  closers.push(() => refusedEk.close(), () => refusedUnknown.close());
  await waitFor('the refused sidebands\' answers', async () => ({ ok: Boolean(refusedEk.refused && refusedUnknown.refused),
    why: JSON.stringify([refusedEk.summary(), refusedUnknown.summary()]) }), { limitMs: 5000 }).catch(() => {});
  check('an ek_ key cannot attach a sideband: 403 sideband_needs_server_key',
    refusedEk.refused && refusedEk.refused.status === 403 && /sideband_needs_server_key/.test(refusedEk.refused.body), refusedEk.refused || refusedEk.summary());
  check('an unknown call id: 404 call_not_found', refusedUnknown.refused && refusedUnknown.refused.status === 404 &&
    /call_not_found/.test(refusedUnknown.refused.body), refusedUnknown.refused || refusedUnknown.summary());

  evs = await events();
  const pageFrom = evs.length; // nothing flows now: the microphone is muted and no response runs
  const sdkFrom = sdk.events.length;
  const plainFrom = plain.events.length;

  // ---- the sideband sets the instructions and the tool
  sdk.send({ type: 'session.update', session: { type: 'realtime', instructions: SIDEBAND_INSTRUCTIONS, tools: [WEATHER_TOOL] } });
  const upd = await waitFor('session.updated from the sideband\'s session.update, everywhere', async () => {
    const a = sdk.find((e) => e.type === 'session.updated' || e.type === 'error', sdkFrom);
    const b = a && plain.find((e) => e.event_id === a.event_id, plainFrom);
    evs = await events();
    const p = a && evs.find((e) => e.dir === 'in' && e.event_id === a.event_id);
    return { ok: Boolean(a && b && p), a, b, p, why: `sdk ${a && a.type}, plain ${Boolean(b)}, page ${Boolean(p)}` };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  if (!check('the sideband\'s session.update -> session.updated on both sidebands and the page (same event_id)',
    upd.ok && upd.a.type === 'session.updated', upd.ok ? upd.a.type === 'error' ? upd.a.ev.error : upd.a.event_id : upd.why)) return;
  const sess = upd.a.ev.session || {};
  check('session.updated has the sideband\'s instructions and its get_weather tool',
    sess.instructions === SIDEBAND_INSTRUCTIONS && Array.isArray(sess.tools) && sess.tools.some((t) => t.name === 'get_weather'),
    { instructions: sess.instructions, tools: (sess.tools || []).map((t) => t.name) });
  check('the browser\'s session sees the new instructions (session.updated in the page\'s transport events)',
    upd.p.ev.session && upd.p.ev.session.instructions === SIDEBAND_INSTRUCTIONS, upd.p.ev.session && upd.p.ev.session.instructions);

  // The browser cannot take back a field the sideband set.
  const browserUpdateId = 'evt_browser_sets_instructions';
  let sendErr = await page.evaluate((id) => window.rtce.sendEvent({ type: 'session.update', event_id: id,
    session: { type: 'realtime', instructions: 'instructions the browser tries' } }), browserUpdateId);
  const kept = await waitFor('the answer to the browser\'s session.update', async () => {
    evs = await events();
    const err = evs.find((e) => e.dir === 'in' && e.type === 'error' && e.ev.error && e.ev.error.event_id === browserUpdateId);
    const u = inOf(evs, 'session.updated', upd.p.pt)[0];
    return { ok: Boolean(err && u), err, u, why: `error ${Boolean(err)}, session.updated ${Boolean(u)}` };
  }, { limitMs: 5000 }).catch((e) => ({ ok: false, why: e.message }));
  check('the browser\'s session.update of instructions is refused (error param session.instructions; they stay the sideband\'s)',
    !sendErr && kept.ok && kept.err.ev.error.param === 'session.instructions' && kept.u.ev.session.instructions === SIDEBAND_INSTRUCTIONS,
    sendErr || (kept.ok ? { error: kept.err.ev.error, instructions: kept.u.ev.session.instructions } : kept.why));

  // ---- the browser's text asks for the tool; the sideband answers it
  const toolPt = await page.evaluate(() => performance.now());
  const toolT0 = Date.now();
  const toolFrom = sdk.events.length;
  await page.evaluate((t) => window.rtce.sendMessage(t), TOOL_TEXT);
  const call = await waitFor('the function call on the sideband (function_call_arguments.done, then response.done)', async () => {
    const args = sdk.find((e) => e.type === 'response.function_call_arguments.done', toolFrom);
    const done = args && sdk.find((e) => e.type === 'response.done', args.index);
    return { ok: Boolean(done), args, done, why: args ? 'no response.done yet' : `sdk heard ${sdk.events.slice(toolFrom).map((e) => e.type)}` };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  if (!check('the sideband hears response.function_call_arguments.done for get_weather {"city":"Paris"}', call.ok &&
    call.args.ev.name === 'get_weather' && (() => { try { return JSON.parse(call.args.ev.arguments).city === 'Paris'; } catch { return false; } })() &&
    typeof call.args.ev.call_id === 'string', call.ok ? call.args.ev : call.why)) return;
  const callIdOfTool = call.args.ev.call_id;
  const itemDone = sdk.find((e) => e.type === 'response.output_item.done' && e.item && e.item.type === 'function_call', toolFrom);
  check('... and response.output_item.done with the function_call item, response.done with it in output',
    itemDone && itemDone.ev.item.call_id === callIdOfTool && itemDone.ev.item.name === 'get_weather' &&
    (call.done.ev.response.output || []).some((o) => o.type === 'function_call' && o.call_id === callIdOfTool),
    { item: itemDone && itemDone.ev.item, output: call.done.ev.response && call.done.ev.response.output });
  const callHeardMs = Date.now() - toolT0;
  sdk.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: callIdOfTool, output: TOOL_OUTPUT } });
  sdk.send({ type: 'response.create' });
  const answeredT = Date.now();
  const toolText = `the tool said: ${TOOL_OUTPUT}`;
  const reply = await waitFor('the tool\'s reply on the page (response.output_text.done, then output_audio_buffer.stopped)', async () => {
    evs = await events();
    const text = inOf(evs, 'response.output_text.done', toolPt).find((e) => e.ev.text === toolText);
    const b = text && inOf(evs, 'output_audio_buffer.started', toolPt)[0];
    const e = b && inOf(evs, 'output_audio_buffer.stopped', b.pt)[0];
    return { ok: Boolean(e), text, b, e, why: `text ${Boolean(text)}, started ${Boolean(b)}, stopped ${Boolean(e)}; ` +
      `page heard ${evs.filter((x) => x.dir === 'in' && x.pt > toolPt).map((x) => x.type)}` };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  check(`the page gets the text "${toolText}" (response.output_text.done)`, reply.ok || Boolean(reply.text), reply.ok ? undefined : reply.why);
  const history = await page.evaluate(() => window.rtce.history());
  check('the SDK\'s history has the assistant message with that text', history.some((it) => it.type === 'message' &&
    it.role === 'assistant' && it.texts.includes(toolText)), history);
  if (reply.ok) {
    // The 400 ms tone: from its first loud 10 ms chunk, once the tap has recorded it.
    await tapReached(page, reply.e.at + 0.8);
    const lv = await page.evaluate(([a, b]) => window.rtce.levels(a, b), [reply.b.at, reply.e.at + 0.8]);
    const loud = lv.filter(([, db]) => db > -30);
    const sampleRate = await page.evaluate(() => window.rtce.sampleRate());
    const t0 = loud.length ? loud[0][0] : null;
    const samples = t0 === null ? [] : await page.evaluate(([a, b]) => window.rtce.samples(a, b), [t0 + 0.02, t0 + 0.32]);
    const a = samples.length >= sampleRate * 0.2 ? analyseTone(samples, sampleRate) : null;
    summary.tool_tone = { loud_ms: loud.length * 10, receive_delay_ms: t0 === null ? null : Math.round((t0 - reply.b.at) * 1000), ...(a || {}) };
    check('the page\'s audio tap hears the reply\'s tone (>= 300 ms above -30 dBFS)', loud.length >= 30, `${loud.length * 10} ms`);
    // 6 dB: the tone's bin at four times its neighbours' power. Unloaded runs measure ~44 dB; a
    // CI run with every core busy measured 9.2 dB once (Opus concealment of late packets).
    check(`the tone's dominant frequency within 3% of ${opts.toneHz} Hz, SNR > 6 dB`,
      a && Math.abs(a.dominant_hz - opts.toneHz) / opts.toneHz <= 0.03 && a.tone_snr_db > 6, a || `${samples.length} samples`);
  } else {
    check('the page\'s audio tap hears the reply\'s tone', false, reply.why);
  }
  const sdkReplyDone = sdk.find((e) => e.type === 'response.done' && (e.response.output || []).some((o) =>
    (o.content || []).some((c) => c.text === toolText)), call.done.index);
  check('the sideband hears the reply too (response.done with the text)', Boolean(sdkReplyDone), sdk.events.slice(call.done.index).map((e) => e.type));
  evs = await events();
  const pageInTypes = [...new Set(evs.filter((e) => e.dir === 'in').map((e) => e.type))];
  check('the page never saw a function-call event (response.function_call_arguments.*, response.output_item.*)',
    !pageInTypes.some((t) => /^response\.(function_call_arguments|output_item)\./.test(t)), pageInTypes);
  check('every event the page got is one the policy lets it hear (or session.created / an answer to its own)',
    pageInTypes.every(pageMayHear), pageInTypes.filter((t) => !pageMayHear(t)));
  const sentAfter = evs.filter((e) => e.dir === 'out' && e.pt >= toolPt);
  check('the SDK in the page answered no tool call (no function_call_output sent, no "Tool ... not found")',
    !sentAfter.some((e) => e.ev.item && e.ev.item.type === 'function_call_output') &&
    !evs.some((e) => e.dir === 'sdk-error' && /not found/i.test(e.ev.message || '')),
    sentAfter.map((e) => e.type).concat(evs.filter((e) => e.dir === 'sdk-error').map((e) => e.ev.message)));
  // A policy that withholds response.function_call_arguments.done hides tool calls wholly:
  // their items inside conversation.item.* and response.done's output are cut out too.
  summary.function_call_item_seen_by_page = evs.filter((e) => e.dir === 'in' && e.pt > toolPt &&
    JSON.stringify(e.ev).includes(callIdOfTool)).map((e) => e.type);
  check('the tool call\'s call_id reaches the page in no event at all', summary.function_call_item_seen_by_page.length === 0,
    summary.function_call_item_seen_by_page);
  summary.browser_update_refusal = kept.ok ? kept.err.ev.error.message : null;
  summary.tool_round = { text_to_call_on_sideband_ms: callHeardMs,
    output_to_text_on_page_ms: reply.text ? Math.round(reply.text.pt - toolPt) - (answeredT - toolT0) : null };

  // ---- a client event off the browser's list is refused
  const refusedId = 'evt_refused_item_delete';
  sendErr = await page.evaluate(([type, id]) => window.rtce.sendEvent({ type, event_id: id, item_id: 'item_does_not_matter' }), [refusedClientEvent, refusedId]);
  const refusal = await waitFor(`the error answering ${refusedClientEvent}`, async () => {
    evs = await events();
    const e = evs.find((x) => x.dir === 'in' && x.type === 'error' && x.ev.error && x.ev.error.event_id === refusedId);
    const s = e && sdk.find((x) => x.event_id === e.event_id);
    return { ok: Boolean(e && s), e, s, why: `page ${Boolean(e)}, sideband ${Boolean(s)}` };
  }, { limitMs: 5000 }).catch((e) => ({ ok: false, why: e.message }));
  check(`the page's ${refusedClientEvent} (SDK transport.sendEvent) gets error code client_event_not_allowed`,
    !sendErr && refusal.ok && refusal.e.ev.error.code === 'client_event_not_allowed', sendErr || (refusal.ok ? refusal.e.ev.error : refusal.why));
  check('the sideband hears that error too (the browser\'s mistakes are the app server\'s business)', refusal.ok, refusal.ok ? undefined : refusal.why);

  // ---- two sidebands hear the same; the page a subset of it
  const sdkIds = sdk.events.slice(sdkFrom).map((e) => e.event_id);
  const plainIds = plain.events.slice(plainFrom).map((e) => e.event_id);
  const firstDiff = sdkIds.findIndex((id, i) => plainIds[i] !== id);
  check('both sidebands heard the same events in the same order (event_ids)', sdkIds.length > 10 && firstDiff === -1 &&
    plainIds.length === sdkIds.length, { sdk: sdkIds.length, plain: plainIds.length, first_difference: firstDiff,
    at: firstDiff >= 0 ? [sdk.events[sdkFrom + firstDiff], plain.events[plainFrom + firstDiff]].map((e) => e && e.type) : undefined });
  evs = await events();
  const pageAfter = evs.slice(pageFrom).filter((e) => e.dir === 'in');
  const sdkIdSet = new Set(sdkIds);
  const notOnSideband = pageAfter.filter((e) => !sdkIdSet.has(e.event_id));
  check('every server event the page got since the sidebands attached reached the sidebands with the same event_id',
    pageAfter.length > 5 && notOnSideband.length === 0, notOnSideband.map((e) => `${e.type} ${e.event_id}`));
  const pageIdSet = new Set(pageAfter.map((e) => e.event_id));
  const withheld = sdk.events.slice(sdkFrom).filter((e) => !pageIdSet.has(e.event_id));
  const withheldTypes = [...new Set(withheld.map((e) => e.type))];
  summary.withheld_from_page = withheldTypes;
  // Off the list, or an event the list allows that is about a tool item alone.
  const toolItem = (e) => e.ev && e.ev.item && (e.ev.item.type === 'function_call' || e.ev.item.type === 'function_call_output');
  const wronglyWithheld = withheld.filter((e) => pageMayHear(e.type) && !toolItem(e)).map((e) => e.type);
  check('what the page did not get is exactly what its policy withholds (and includes the function-call events)',
    wronglyWithheld.length === 0 && withheldTypes.includes('response.function_call_arguments.done'),
    { withheld: withheldTypes, wrongly: wronglyWithheld });

  // ---- the app server hangs up
  const active = await sessionsActive();
  check('metrics rtcedge_transceiver_sessions_active 1 before the hangup', active === 1, active);
  const hangT = Date.now();
  const hang = await httpRequest('POST', `${opts.callsUrl}/${encodeURIComponent(callId)}/hangup`, { apiKey: opts.serverKey, ms: 5000 });
  check('POST /v1/realtime/calls/<id>/hangup with the server key -> 200', hang.status === 200, `${hang.status} ${hang.text.slice(0, 200)}`);
  const ended = await waitFor('rtcedge.call.ended and close 1000 on both sidebands', async () => {
    const r = [sdk, plain].map((s) => ({ s, e: s.find((x) => x.type === 'rtcedge.call.ended') }));
    return { ok: r.every((x) => x.e && x.s.closed), r,
      why: r.map((x) => `${x.s.name}: ended ${Boolean(x.e)}, closed ${JSON.stringify(x.s.closed)}`).join('; ') };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  for (const s of [sdk, plain]) {
    const e = s.find((x) => x.type === 'rtcedge.call.ended');
    const last = s.events[s.events.length - 1];
    check(`${s.name} sideband: rtcedge.call.ended {reason} is its last event, then close 1000`,
      e && typeof e.ev.reason === 'string' && e.ev.reason.length > 0 && last === s.events[e.index] && s.closed && s.closed.code === 1000,
      { ended: e && e.ev, last: last && last.type, closed: s.closed, errors: s.errors });
  }
  // The page sees the call end at once: the server closes oai-events (SCTP). The SDK's
  // transport does not listen to its channel's close, only to the peer connection's state:
  // Chromium keeps a peer connection whose DTLS peer sent close_notify 'connected' until ICE
  // consent fails ('disconnected', ~7 s without answers), and the SDK closes 5 s after that
  // (PEER_CONNECTION_DISCONNECTED_GRACE_MS). So its session ends ~12 s after the hangup.
  const dcClosed = await waitFor('the page\'s oai-events channel to close', async () => {
    const s = await page.evaluate(() => window.rtce.state());
    return { ok: s.dcState === 'closed', why: JSON.stringify({ dc: s.dcState, transport: s.transportStatus, pc: s.pcState }) };
  }, { limitMs: 5000 }).catch((e) => ({ ok: false, why: e.message }));
  const dcClosedMs = Date.now() - hangT;
  check('the hangup ends the browser\'s call: the page\'s oai-events channel closes (within 5 s)', dcClosed.ok,
    dcClosed.ok ? `${dcClosedMs} ms after the hangup` : dcClosed.why);
  const sdkClosed = await waitFor('the SDK\'s transport to go disconnected', async () => {
    const s = await page.evaluate(() => window.rtce.state());
    return { ok: s.transportStatus === 'disconnected', why: JSON.stringify({ dc: s.dcState, transport: s.transportStatus, pc: s.pcState }) };
  }, { limitMs: 25000, intervalMs: 250 }).catch((e) => ({ ok: false, why: e.message }));
  const sdkClosedMs = Date.now() - hangT;
  evs = await events();
  const life = evs.filter((e) => e.dir === 'life' && e.pt >= toolPt).map((e) => ({ type: e.type, state: e.ev.state ?? e.ev.status }));
  check('... and the SDK\'s session closes by itself (transport disconnected, within 25 s: ICE consent + the SDK\'s 5 s grace)',
    sdkClosed.ok, sdkClosed.ok ? { after_ms: sdkClosedMs, life } : { why: sdkClosed.why, life });
  summary.hangup = { call_ended_reason: (sdk.find((x) => x.type === 'rtcedge.call.ended') || { ev: {} }).ev.reason,
    sidebands_closed_ms: [sdk, plain].map((s) => (s.closed ? s.closed.t - (hangT - s.t0) : null)),
    page_channel_closed_ms: dcClosed.ok ? dcClosedMs : null, sdk_transport_closed_ms: sdkClosed.ok ? sdkClosedMs : null, page_life: life };
  const drained = await waitFor('sessions_active to return to 0 after the hangup', async () => {
    const v = await sessionsActive();
    return { ok: v === 0, why: `${v}` };
  }, { limitMs: 10000 }).catch((e) => ({ ok: false, why: e.message }));
  check('metrics rtcedge_transceiver_sessions_active back to 0 after the hangup', drained.ok, drained.why);
  summary.sidebands = [sdk.summary(), plain.summary()];
  summary.event_types_in = pageInTypes;
  summary.sdk_errors = evs.filter((e) => e.dir === 'sdk-error').map((e) => e.ev.message);
}

async function run(summary) {
  const check = checker(summary, log);
  const args = chromiumArgs({ toneFile: opts.toneWav, allowLoopback: wantLoopback(opts.allowLoopback) });
  summary.chromium_args = args;
  const page = await browser.launch({
    executablePath: opts.chromium, args, profilePrefix: 'rtcedge-rt-e2e-chromium-',
    viewport: { width: 900, height: 600 }, origin: new URL(opts.appUrl).origin,
  });
  summary.browser_version = browserVersion(browser.context);
  summary.console = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') {
      summary.console.push(`${m.type()}: ${m.text()}`.slice(0, 400));
      log(`page console.${m.type()}: ${m.text()}`);
    }
  });
  page.on('pageerror', (e) => { summary.console.push(`pageerror: ${e.message}`); log(`page error: ${e.message}`); });
  watchCalls(page, summary);
  try {
    if (opts.scenario === 'agents') await runAgents(page, summary, check);
    else if (opts.scenario === 'sideband') await runSideband(page, summary, check);
    else await runMultipart(page, summary, check);
  } finally {
    const failed = summary.checks.some((c) => !c.ok) || summary.checks.length === 0;
    if (opts.artifacts && failed) {
      fs.mkdirSync(opts.artifacts, { recursive: true });
      const shot = path.join(opts.artifacts, `${opts.scenario}-failure.png`);
      await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
      summary.screenshot = shot;
      if (opts.scenario !== 'multipart') {
        const evs = await page.evaluate(() => (window.rtce ? window.rtce.events() : [])).catch(() => []);
        const file = path.join(opts.artifacts, `${opts.scenario}-events.json`);
        fs.writeFileSync(file, JSON.stringify(opts.scenario === 'sideband' ? { page: evs, sidebands: sidebandsHeard } : evs, null, 1));
        summary.events_file = file;
      }
    }
  }
}

async function cleanup() {
  for (const close of closers.splice(0)) {
    try { close(); } catch (e) { log(`cleanup: ${e.message}`); }
  }
  await browser.close();
}

runMain({ scenario: opts.scenario, app_url: opts.appUrl, calls_url: opts.callsUrl, checks: [] },
  { timeoutS: opts.timeoutS, run, cleanup, log });
