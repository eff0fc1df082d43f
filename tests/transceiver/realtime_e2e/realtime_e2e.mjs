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
//
// Usage: node realtime_e2e.mjs --scenario agents|multipart --app-url http://127.0.0.1:P
//          --calls-url http://127.0.0.1:Q/v1/realtime/calls --tone-wav FILE [--timeout-s 90]
//          [--chromium /usr/bin/chromium] [--max-interrupt-ms 250] [--max-excess-ms 80]
//          [--expect-answer-candidate H:P] [--expect-selected-candidate H:P]
//          [--artifacts DIR] [--allow-loopback auto|yes|no]
// --expect-selected-candidate: the remote end of the selected pair (default: the answer's
// candidate; over ICE-TCP the VIP's TCP port).
// stdout: one JSON summary; exit 0 = every check passed, 1 = a check failed or timed out,
// 2 = bad usage. The app server (/token, the pages, the bundle) is the runner's
// (run_realtime_e2e.py); this script only talks to the browser and reads /metrics. It owns
// the two scenarios and the calls-request log; the browser launch, waits, checks and the
// /metrics read are tests/support/js's, the tone analysis ../e2e/tone_analysis.mjs's.

import fs from 'node:fs';
import path from 'node:path';
import { analyseTone, rmsDbfs } from '../e2e/tone_analysis.mjs';
import { BROWSER_DEFAULTS, BROWSER_FLAGS, BrowserRun, browserVersion, chromiumArgs, wantLoopback } from '../../support/js/browser.mjs';
import { baseUrl, checker, deadline, parseArgs, runMain, usageExit, withTimeout } from '../../support/js/driver.mjs';
import { sessionsActive as transceiverSessionsActive } from '../../support/js/transceiver.mjs';

const usage = usageExit('usage: node realtime_e2e.mjs --scenario agents|multipart --app-url URL --calls-url URL --tone-wav FILE ' +
  '[--timeout-s S] [--chromium PATH] [--max-interrupt-ms MS] [--max-excess-ms MS] [--expect-answer-candidate HOST:PORT] ' +
  '[--expect-selected-candidate HOST:PORT] [--artifacts DIR] ' +
  '[--allow-loopback auto|yes|no]');

const opts = parseArgs(process.argv.slice(2), {
  ...BROWSER_DEFAULTS, scenario: null, appUrl: null, callsUrl: null, timeoutS: 90,
  maxInterruptMs: 250, maxExcessMs: 80, expectCandidate: null, expectSelected: null, artifacts: null,
}, {
  ...BROWSER_FLAGS, '--scenario': ['scenario', String], '--app-url': ['appUrl', baseUrl], '--calls-url': ['callsUrl', baseUrl],
  '--timeout-s': ['timeoutS', Number], '--max-interrupt-ms': ['maxInterruptMs', Number],
  '--max-excess-ms': ['maxExcessMs', Number], '--expect-answer-candidate': ['expectCandidate', String],
  '--expect-selected-candidate': ['expectSelected', String],
  '--artifacts': ['artifacts', String],
}, usage);
if (!['agents', 'multipart'].includes(opts.scenario)) usage('--scenario must be agents or multipart');
if (!opts.appUrl || !opts.callsUrl) usage('--app-url and --calls-url are required');
if (!opts.toneWav || !fs.existsSync(opts.toneWav)) usage('--tone-wav FILE (an existing WAV) is required');
if (!(opts.timeoutS > 0) || !(opts.maxInterruptMs > 0) || !(opts.maxExcessMs > 0)) usage('bad --timeout-s, --max-interrupt-ms or --max-excess-ms');

const log = (...a) => console.error('[realtime_e2e]', ...a);
const { remainingMs, waitFor } = deadline(opts.timeoutS);
const transceiverOrigin = new URL(opts.callsUrl).origin;
const sessionsActive = () => transceiverSessionsActive(transceiverOrigin);

const browser = new BrowserRun();

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
    else await runMultipart(page, summary, check);
  } finally {
    const failed = summary.checks.some((c) => !c.ok) || summary.checks.length === 0;
    if (opts.artifacts && failed) {
      fs.mkdirSync(opts.artifacts, { recursive: true });
      const shot = path.join(opts.artifacts, `${opts.scenario}-failure.png`);
      await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
      summary.screenshot = shot;
      if (opts.scenario === 'agents') {
        const evs = await page.evaluate(() => (window.rtce ? window.rtce.events() : [])).catch(() => []);
        const file = path.join(opts.artifacts, 'agents-events.json');
        fs.writeFileSync(file, JSON.stringify(evs, null, 1));
        summary.events_file = file;
      }
    }
  }
}

runMain({ scenario: opts.scenario, app_url: opts.appUrl, calls_url: opts.callsUrl, checks: [] },
  { timeoutS: opts.timeoutS, run, cleanup: () => browser.close(), log });
