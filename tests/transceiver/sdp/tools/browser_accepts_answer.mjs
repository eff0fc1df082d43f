#!/usr/bin/env node
// Check that headless Chromium accepts the answers rtce_sdp_answer_tool builds for Chromium's own
// offers: setRemoteDescription(answer) must succeed, the audio transceiver must end up with the
// mirrored direction, a data channel's section must be accepted (pc.sctp exists) over the same
// BUNDLE transport, and every other m-section must be rejected.
//
// Usage:
//   node browser_accepts_answer.mjs --tool build/bin/rtce_sdp_answer_tool [--chromium /usr/bin/chromium]
//
// Prints one JSON line per scenario and exits 0 only when every scenario passed, 77 (skipped)
// when Chromium or playwright-core is not installed. No media flows:
// the answer's only candidate is 127.0.0.1:9 (discard), so at most a few STUN checks hit loopback.
// playwright-core is reused from tests/golden/tools/node_modules (run `npm ci` there once);
// the Chromium launch and the blank page are tests/support/js/browser.mjs's, the scenarios
// this file's.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BrowserRun, chromiumArgs, loadPlaywright, serveBlankPage } from '../../../support/js/browser.mjs';

let chromium;
try {
  ({ chromium } = await loadPlaywright());
} catch {
  // A missing tool is a setup failure, not a skip: scripts/install-deps.sh installs it.
  console.error('FAIL: playwright-core is not installed (scripts/install-deps.sh: npm ci in tests/golden/tools)');
  process.exit(1);
}

const opts = { chromium: '/usr/bin/chromium' };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const val = () => argv[++i];
    switch (argv[i]) {
      case '--tool': opts.tool = path.resolve(val()); break;
      case '--chromium': opts.chromium = val(); break;
      default: opts.bad = argv[i];
    }
  }
  if (!opts.tool || opts.bad || !fs.existsSync(opts.tool)) {
    console.error('usage: node browser_accepts_answer.mjs --tool PATH/rtce_sdp_answer_tool [--chromium PATH]');
    process.exit(2);
  }
  if (!fs.existsSync(opts.chromium)) {
    console.error(`FAIL: no Chromium at ${opts.chromium} (scripts/install-deps.sh installs it)`);
    process.exit(1);
  }
}

// Each scenario: what the page offers, the tool's flags, what the browser must conclude.
const SCENARIOS = [
  { name: 'audio sendrecv, server active', media: { audio: 'sendrecv' }, flags: ['--setup', 'active'],
    expect: { audio: 'sendrecv' } },
  { name: 'audio sendrecv, server passive', media: { audio: 'sendrecv' }, flags: ['--setup', 'passive'],
    expect: { audio: 'sendrecv' } },
  { name: 'audio sendonly -> recvonly', media: { audio: 'sendonly' }, flags: [], expect: { audio: 'sendonly' } },
  { name: 'audio recvonly -> sendonly', media: { audio: 'recvonly' }, flags: [], expect: { audio: 'recvonly' } },
  { name: 'audio + video + data channel, video rejected, data accepted',
    media: { audio: 'sendrecv', video: 'recvonly', data: true }, flags: ['--audio-level'],
    expect: { audio: 'sendrecv', video: 'rejected' } },
  // What @openai/agents-realtime 0.20 does: default RTCPeerConnection, createDataChannel
  // ('oai-events') before addTrack(mic).
  { name: 'agents-realtime style: oai-events then audio, default bundle policy',
    media: { audio: 'sendrecv', data: true, defaultPolicy: true, dataFirst: true }, flags: [],
    expect: { audio: 'sendrecv' } },
  { name: 'audio then data channel, default bundle policy',
    media: { audio: 'sendrecv', data: true, defaultPolicy: true }, flags: [],
    expect: { audio: 'sendrecv' } },
  { name: 'data channel only (text-only session)',
    media: { data: true }, flags: ['--text-only'], expect: {} },
];

async function main() {
  const blank = await serveBlankPage('rtcedge answer check');
  const browser = new BrowserRun();
  let failures = 0;
  try {
    const page = await browser.launch({ chromium, executablePath: opts.chromium, args: chromiumArgs(), profilePrefix: 'rtcedge-answer-' });
    await page.goto(`${blank.origin}/`, { timeout: 15000 });
    for (const scenario of SCENARIOS) {
      const offer = await page.evaluate(async (media) => {
        const pc = media.defaultPolicy ? new RTCPeerConnection()
          : new RTCPeerConnection({ bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require' });
        window.__pc = pc;
        if (media.data && media.dataFirst) window.__dc = pc.createDataChannel('oai-events');
        if (!media.audio) {
          // text-only: no audio transceiver
        } else if (media.audio === 'recvonly') {
          pc.addTransceiver('audio', { direction: 'recvonly' });
        } else {
          const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
          pc.addTransceiver(stream.getAudioTracks()[0], { direction: media.audio, streams: [stream] });
        }
        if (media.video) pc.addTransceiver('video', { direction: media.video });
        if (media.data && !media.dataFirst) window.__dc = pc.createDataChannel('events');
        const o = await pc.createOffer();
        await pc.setLocalDescription(o);
        window.__offer = o.sdp;
        return o.sdp;
      }, scenario.media);
      let answer;
      const result = { scenario: scenario.name };
      try {
        answer = execFileSync(opts.tool, [...scenario.flags, '--candidate', '127.0.0.1:9'],
          { input: offer, encoding: 'utf8' });
      } catch (e) {
        result.ok = false;
        result.error = `tool refused the offer: ${e.stderr || e.message}`;
      }
      if (answer !== undefined) {
        const seen = await page.evaluate(async (sdp) => {
          const pc = window.__pc;
          const remoteStreams = [];
          pc.ontrack = (e) => remoteStreams.push(...e.streams.map((st) => st.id));
          try {
            await pc.setRemoteDescription({ type: 'answer', sdp });
          } catch (e) {
            return { accepted: false, error: `${e.name}: ${e.message}` };
          }
          const out = { accepted: true, signalingState: pc.signalingState, transceivers: {} };
          for (const t of pc.getTransceivers()) {
            out.transceivers[t.receiver.track.kind] = t.currentDirection ?? (t.stopped ? 'stopped' : null);
          }
          out.remoteStreams = remoteStreams;
          out.mLines = window.__offer.split('\r\n').filter((l) => l.startsWith('m=')).map((l) => l.split(' ')[0]);
          out.sctp = pc.sctp ? pc.sctp.state ?? 'present' : null;
          out.sctpMaxMessageSize = pc.sctp ? pc.sctp.maxMessageSize : null;
          // BUNDLE: the data channel rides the audio's DTLS transport.
          const audioSender = pc.getSenders().find((x) => x.track && x.track.kind === 'audio');
          out.sharedTransport = !pc.sctp || !audioSender || pc.sctp.transport === audioSender.transport;
          pc.close();
          return out;
        }, answer);
        Object.assign(result, seen);
        // A rejected m-section stops its transceiver, which the spec then drops from getTransceivers().
        const matches = (kind, dir) => dir === 'rejected'
          ? seen.transceivers[kind] === undefined || seen.transceivers[kind] === 'stopped'
          : seen.transceivers[kind] === dir;
        result.ok = seen.accepted && seen.signalingState === 'stable' &&
          Object.entries(scenario.expect).every(([kind, dir]) => matches(kind, dir)) &&
          (!scenario.media.data || (seen.sctp !== null && seen.sctpMaxMessageSize === 262144)) &&
          seen.sharedTransport &&
          // The answer's a=msid names the stream whenever the server sends.
          (!scenario.media.audio || seen.transceivers.audio === 'sendonly' || seen.remoteStreams.includes('rtcedge'));
        if (!result.ok) result.answer = answer;
      }
      if (!result.ok) failures++;
      console.log(JSON.stringify(result));
    }
  } finally {
    await browser.close();
    blank.close();
  }
  console.log(`${SCENARIOS.length - failures} passed, ${failures} failed`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch((e) => { console.error(`error: ${e.message}`); process.exit(1); });
