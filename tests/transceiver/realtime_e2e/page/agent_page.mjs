// The browser side of the agents end-to-end test: the unchanged @openai/agents-realtime
// package (bundled by esbuild, see ../tools/bundle.mjs) connects to an rtcedge transceiver
// whose calls URL arrives as ?calls=..., with an ephemeral key minted by this page's own
// origin (/token), as a real app does. Everything the test asserts is recorded here and read
// by realtime_e2e.mjs through window.rtce; the page itself asserts nothing.
import { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebRTC } from '@openai/agents-realtime';
import { createTap } from './audio_tap.mjs';

const params = new URLSearchParams(location.search);
const callsUrl = params.get('calls');
const keyInstructions = params.get('key_instructions') || 'rtcedge end-to-end agent';
const agentInstructions = params.get('agent_instructions') || 'You repeat what you hear.';
// The app's name for the session its backend mints the key with (the sideband scenario's
// restricted data channel); the page only passes it on to /token.
const keyPolicy = params.get('policy');

const st = {
  phase: 'idle', error: null, callId: null, token: null,
  events: [], // {dir: 'in'|'out', at: ctx time, pt: performance.now(), type, event_id, ev}
  timings: {}, tap: null, session: null, transport: null, pc: null, ctx: null, micTrack: null,
  dcState: null, // the oai-events channel's readyState as its events last said
};

function record(dir, ev) {
  st.events.push({ dir, at: st.ctx ? st.ctx.currentTime : null, pt: performance.now(), type: ev && ev.type, event_id: ev && ev.event_id, ev });
}

// What the SDK sends is not observable through its API; wrapping send on the prototype keeps
// the package itself unchanged and records the client events (session.update, response.cancel,
// output_audio_buffer.clear, ...) in order with the server's.
const origSend = RTCDataChannel.prototype.send;
RTCDataChannel.prototype.send = function send(data) {
  if (this.label === 'oai-events' && typeof data === 'string') {
    try { record('out', JSON.parse(data)); } catch { record('out', { type: '(unparsable)', raw: data }); }
  }
  return origSend.call(this, data);
};

// The connection's end as the page sees it (the server hanging up): the oai-events channel's
// open/close, recorded with dir 'life' next to the events. The SDK creates the channel itself.
const origCreateDataChannel = RTCPeerConnection.prototype.createDataChannel;
RTCPeerConnection.prototype.createDataChannel = function createDataChannel(label, init) {
  const dc = origCreateDataChannel.call(this, label, init);
  if (label === 'oai-events') {
    for (const name of ['open', 'close']) {
      dc.addEventListener(name, () => { st.dcState = dc.readyState; record('life', { type: `data_channel.${name}` }); });
    }
  }
  return dc;
};

async function start() {
  st.phase = 'connecting';
  try {
    st.ctx = new AudioContext({ sampleRate: 48000 });
    await st.ctx.resume();
    const t0 = performance.now();
    const tokenRes = await fetch(`/token?instructions=${encodeURIComponent(keyInstructions)}` +
      (keyPolicy ? `&policy=${encodeURIComponent(keyPolicy)}` : ''));
    const tokenBody = await tokenRes.json().catch(() => null);
    if (!tokenRes.ok || !tokenBody || typeof tokenBody.value !== 'string') {
      throw new Error(`/token failed: ${tokenRes.status} ${JSON.stringify(tokenBody)}`);
    }
    st.token = tokenBody;
    st.timings.tokenMs = performance.now() - t0;
    // Voice processing off: noise suppression treats a steady sine as noise. The SDK takes a
    // caller's stream through its documented mediaStream option.
    const mic = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    st.micTrack = mic.getAudioTracks()[0];
    st.micTrack.enabled = false; // muted until the text turn is done (session.mute(false))
    const audioElement = document.createElement('audio');
    audioElement.autoplay = true;
    document.body.appendChild(audioElement);
    st.audioElement = audioElement;
    const transport = new OpenAIRealtimeWebRTC({
      baseUrl: callsUrl, mediaStream: mic, audioElement,
      // Only to observe the connection (getStats, the remote track); returns it unchanged.
      changePeerConnection: (pc) => {
        st.pc = pc;
        pc.addEventListener('connectionstatechange', () => record('life', { type: 'pc.connectionstatechange', state: pc.connectionState }));
        pc.addEventListener('track', (e) => {
          createTap(st.ctx, e.streams[0] || new MediaStream([e.track]))
            .then((tap) => { st.tap = tap; })
            .catch((err) => { st.error = `audio tap: ${err.message}`; });
        });
        return pc;
      },
    });
    const agent = new RealtimeAgent({ name: 'rtcedge e2e', instructions: agentInstructions });
    const session = new RealtimeSession(agent, { transport });
    st.session = session;
    st.transport = transport;
    transport.on('*', (ev) => record('in', ev));
    transport.on('connection_change', (status) => record('life', { type: 'transport.connection_change', status }));
    session.on('error', (e) => record('sdk-error', { type: 'sdk-error', message: String(e && e.error && (e.error.message || e.error.error?.message || JSON.stringify(e.error))) }));
    const c0 = performance.now();
    await session.connect({ apiKey: tokenBody.value });
    st.timings.connectMs = performance.now() - c0;
    st.callId = transport.callId ?? null;
    st.phase = 'connected';
  } catch (e) {
    st.phase = 'error';
    st.error = e && e.message ? e.message : String(e);
  }
  return { phase: st.phase, error: st.error };
}

async function stats() {
  if (!st.pc) return null;
  const out = { packetsReceived: 0, packetsSent: 0, remoteCandidate: null };
  const report = await st.pc.getStats();
  const byId = new Map();
  report.forEach((s) => byId.set(s.id, s));
  report.forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'audio') out.packetsReceived = s.packetsReceived;
    if (s.type === 'outbound-rtp' && s.kind === 'audio') out.packetsSent = s.packetsSent;
    if (s.type === 'transport' && s.selectedCandidatePairId) {
      const pair = byId.get(s.selectedCandidatePairId);
      const remote = pair && byId.get(pair.remoteCandidateId);
      if (remote) out.remoteCandidate = `${remote.address || remote.ip}:${remote.port}`;
    }
  });
  return out;
}

window.rtce = {
  start,
  state: () => ({ phase: st.phase, error: st.error, callId: st.callId, timings: st.timings, tap: !!st.tap,
    tapT: st.tap ? st.tap.lastT() : null,
    // The SDK plays event.streams[0]: without an a=msid in the answer there is none.
    sdkAudioHasStream: Boolean(st.audioElement && st.audioElement.srcObject),
    now: st.ctx ? st.ctx.currentTime : null, nEvents: st.events.length, token: st.token && { prefix: st.token.value.slice(0, 3), expires_at: st.token.expires_at },
    transportStatus: st.transport ? st.transport.status : null, pcState: st.pc ? st.pc.connectionState : null, dcState: st.dcState }),
  events: (from = 0) => st.events.slice(from),
  sendMessage: (text) => { const at = st.ctx.currentTime; st.session.sendMessage(text); return at; },
  // A raw client event through the SDK's transport (OpenAIRealtimeWebRTC.sendEvent).
  sendEvent: (ev) => { try { st.transport.sendEvent(ev); } catch (e) { return e.message; } return null; },
  // The SDK's conversation history, as plain data: items with their texts.
  history: () => (st.session ? st.session.history : []).map((it) => ({
    itemId: it.itemId, type: it.type, role: it.role ?? null, status: it.status ?? null, name: it.name ?? null,
    texts: Array.isArray(it.content) ? it.content.map((c) => c.text ?? c.transcript ?? null).filter((t) => t !== null) : [],
  })),
  mute: (muted) => { st.session.mute(muted); return st.ctx.currentTime; },
  interrupt: () => { const at = st.ctx.currentTime; st.session.interrupt(); return at; },
  levels: (from, to) => (st.tap ? st.tap.levels(from, to) : []),
  samples: (from, to) => (st.tap ? st.tap.samples(from, to) : []),
  sampleRate: () => (st.ctx ? st.ctx.sampleRate : null),
  stats,
  close: () => { try { st.session.close(); } catch (e) { return e.message; } return null; },
};
