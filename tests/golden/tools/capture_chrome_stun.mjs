#!/usr/bin/env node
// Capture the first ICE STUN Binding request that a real Chromium sends to an
// ICE-lite "server" whose ICE ufrag/pwd we choose.
//
// Usage:
//   node capture_chrome_stun.mjs --ufrag U --pwd P --out FILE.hex
//        [--json FILE.json] [--timeout 20] [--chromium /usr/bin/chromium]
//        [--allow-loopback auto|yes|no]
//
// All traffic stays on 127.0.0.1: a tiny HTTP server serves a blank page (so
// getUserMedia has a secure-enough origin) and a UDP socket plays the ICE-lite
// server whose only candidate is 127.0.0.1:<ephemeral port>.
//
// Output: FILE.hex = the datagram as lowercase hex, 32 bytes per line.
// stdout  = one JSON object describing it (also written to --json if given).
// Exit code: 0 on success, 1 on timeout/error, 2 on bad usage.
//
// This file owns the STUN capture and parsing; playwright-core's location, the Chromium
// flags and profile and the blank page are tests/support/js/browser.mjs's.

import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { BrowserRun, chromiumArgs, serveBlankPage, wantLoopback } from '../../support/js/browser.mjs';
import { withTimeout } from '../../support/js/driver.mjs';

// ---------------------------------------------------------------- arguments
function usage(msg) {
  if (msg) console.error(`error: ${msg}`);
  console.error('usage: node capture_chrome_stun.mjs --ufrag U --pwd P --out FILE.hex ' +
    '[--json FILE.json] [--timeout SECONDS] [--chromium PATH] [--allow-loopback auto|yes|no]');
  process.exit(2);
}

const opts = { timeout: 20, chromium: '/usr/bin/chromium', allowLoopback: 'auto' };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--ufrag': opts.ufrag = val(); break;
      case '--pwd': opts.pwd = val(); break;
      case '--out': opts.out = val(); break;
      case '--json': opts.json = val(); break;
      case '--timeout': opts.timeout = Number(val()); break;
      case '--chromium': opts.chromium = val(); break;
      case '--allow-loopback': opts.allowLoopback = val(); break;
      case '-h': case '--help': usage();
      default: usage(`unknown argument ${a}`);
    }
  }
}
// RFC 8839: ice-char = ALPHA / DIGIT / "+" / "/"; ufrag 4..256, pwd 22..256.
const ICE_CHARS = /^[A-Za-z0-9+/]+$/;
if (!opts.ufrag || !opts.pwd || !opts.out) usage('--ufrag, --pwd and --out are required');
if (!ICE_CHARS.test(opts.ufrag) || opts.ufrag.length < 4 || opts.ufrag.length > 256)
  usage('--ufrag must be 4..256 ice-chars [A-Za-z0-9+/]');
if (!ICE_CHARS.test(opts.pwd) || opts.pwd.length < 22 || opts.pwd.length > 256)
  usage('--pwd must be 22..256 ice-chars [A-Za-z0-9+/]');
if (!(opts.timeout > 0)) usage('--timeout must be a positive number of seconds');
if (!['auto', 'yes', 'no'].includes(opts.allowLoopback)) usage('--allow-loopback must be auto, yes or no');

// ---------------------------------------------------------------- STUN parsing
const ATTR_NAMES = {
  0x0001: 'MAPPED-ADDRESS', 0x0006: 'USERNAME', 0x0008: 'MESSAGE-INTEGRITY',
  0x0009: 'ERROR-CODE', 0x000a: 'UNKNOWN-ATTRIBUTES', 0x0014: 'REALM', 0x0015: 'NONCE',
  0x001c: 'MESSAGE-INTEGRITY-SHA256', 0x001d: 'PASSWORD-ALGORITHM', 0x001e: 'USERHASH',
  0x0020: 'XOR-MAPPED-ADDRESS', 0x0024: 'PRIORITY', 0x0025: 'USE-CANDIDATE',
  0x8002: 'PASSWORD-ALGORITHMS', 0x8003: 'ALTERNATE-DOMAIN', 0x8022: 'SOFTWARE',
  0x8023: 'ALTERNATE-SERVER', 0x8028: 'FINGERPRINT', 0x8029: 'ICE-CONTROLLED',
  0x802a: 'ICE-CONTROLLING', 0xc057: 'GOOG-NETWORK-INFO', 0xc058: 'GOOG-LAST-ICE-CHECK-RECEIVED',
  0xc059: 'GOOG-MISC-INFO', 0xc05a: 'GOOG-OBSOLETE-1', 0xc05b: 'GOOG-CONNECTION-ID',
  0xc05c: 'GOOG-DELTA', 0xc05d: 'GOOG-DELTA-ACK', 0xc05e: 'GOOG-DELTA-SYNC-REQ',
  0xc060: 'GOOG-MESSAGE-INTEGRITY-32',
};
const hex16 = (v) => '0x' + v.toString(16).padStart(4, '0');

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function isBindingRequest(buf) {
  return buf.length >= 20 && (buf[0] === 0x00 || buf[0] === 0x01) &&
    buf.readUInt16BE(0) === 0x0001 && buf.readUInt32BE(4) === 0x2112a442;
}

function parseStun(buf, pwd) {
  const msgLen = buf.readUInt16BE(2);
  const attrs = [];
  let off = 20;
  const end = Math.min(buf.length, 20 + msgLen);
  while (off + 4 <= end) {
    const type = buf.readUInt16BE(off);
    const len = buf.readUInt16BE(off + 2);
    const value = buf.subarray(off + 4, off + 4 + len);
    const a = { offset: off, type: hex16(type), name: ATTR_NAMES[type] || 'UNKNOWN', length: len };
    if (type === 0x0006) a.value = value.toString('utf8');
    else if (type === 0x0024) a.value = value.readUInt32BE(0);
    else if (type === 0x8029 || type === 0x802a) a.value = value.toString('hex');
    else if (type === 0xc057 && len === 4) {
      a.value = value.toString('hex');
      a.network_id = value.readUInt16BE(0);
      a.network_cost = value.readUInt16BE(2);
    } else if (type === 0x8028) a.value = value.toString('hex');
    else if (len > 0) a.value = value.toString('hex');
    if (type === 0x0008) {
      // RFC 5389 15.4: HMAC-SHA1 over the message up to MI, with the header
      // length adjusted to end right after the MI attribute. Key = remote pwd.
      const copy = Buffer.from(buf.subarray(0, off));
      copy.writeUInt16BE(off + 24 - 20, 2);
      const mac = crypto.createHmac('sha1', Buffer.from(pwd, 'utf8')).update(copy).digest();
      a.valid = mac.equals(value);
    }
    if (type === 0x8028) {
      const copy = Buffer.from(buf.subarray(0, off));
      copy.writeUInt16BE(off + 8 - 20, 2);
      a.valid = ((crc32(copy) ^ 0x5354554e) >>> 0) === value.readUInt32BE(0);
    }
    attrs.push(a);
    off += 4 + len + ((4 - (len % 4)) % 4);
  }
  return { msgLen, attrs };
}

// ---------------------------------------------------------------- helpers
function chromiumVersion(bin) {
  try {
    // The Debian wrapper script may print shell noise on stderr; ignore it.
    return execFileSync(bin, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 15000 }).trim();
  } catch (e) {
    return `unknown (${e.message.split('\n')[0]})`;
  }
}

function buildAnswer(offerSdp, { ufrag, pwd, port }) {
  const lines = offerSdp.split(/\r?\n/);
  const mline = lines.find((l) => l.startsWith('m=audio '));
  if (!mline) throw new Error('offer has no m=audio section');
  const midLine = lines.find((l) => l.startsWith('a=mid:'));
  if (!midLine) throw new Error('offer has no a=mid');
  const mid = midLine.slice('a=mid:'.length).trim();
  const opusLine = lines.find((l) => /^a=rtpmap:\d+ opus\/48000\/2$/i.test(l.trim()));
  if (!opusLine) throw new Error('offer has no opus/48000/2 rtpmap');
  const pt = opusLine.match(/^a=rtpmap:(\d+)/)[1];
  // Any syntactically valid SHA-256 fingerprint; derived from a fixed string so
  // reruns produce the same answer. It is never checked: no DTLS happens here.
  const fp = crypto.createHash('sha256').update('rtcedge-golden-fake-dtls-cert').digest('hex')
    .toUpperCase().match(/../g).join(':');
  const sdp = [
    'v=0',
    'o=- 4611731400430051336 2 IN IP4 127.0.0.1',
    's=-',
    't=0 0',
    `a=group:BUNDLE ${mid}`,
    'a=ice-lite',
    'a=msid-semantic: WMS',
    `m=audio ${port} UDP/TLS/RTP/SAVPF ${pt}`,
    'c=IN IP4 127.0.0.1',
    `a=rtcp:${port} IN IP4 127.0.0.1`,
    `a=ice-ufrag:${ufrag}`,
    `a=ice-pwd:${pwd}`,
    `a=fingerprint:sha-256 ${fp}`,
    'a=setup:passive',
    `a=mid:${mid}`,
    'a=recvonly',
    'a=rtcp-mux',
    `a=rtpmap:${pt} opus/48000/2`,
    `a=fmtp:${pt} minptime=10;useinbandfec=1`,
    `a=candidate:1 1 udp 2130706431 127.0.0.1 ${port} typ host`,
    'a=end-of-candidates',
    '',
  ].join('\r\n');
  return { sdp, mid, pt: Number(pt), fingerprint: fp };
}

// ---------------------------------------------------------------- main
const log = (...a) => console.error('[capture]', ...a);
const browser = new BrowserRun();
const resources = { udp: null, blank: null };

async function cleanup() {
  const { udp, blank } = resources;
  resources.udp = resources.blank = null;
  await browser.close();
  if (udp) try { udp.close(); } catch { /* already closed */ }
  if (blank) blank.close();
}

async function attempt(allowLoopback) {
  // UDP socket = the ICE-lite server.
  const udp = dgram.createSocket('udp4');
  resources.udp = udp;
  const seen = [];
  const captured = new Promise((resolve) => {
    udp.on('message', (msg, rinfo) => {
      seen.push({ from: `${rinfo.address}:${rinfo.port}`, len: msg.length, first: msg[0] });
      if (isBindingRequest(msg)) resolve({ msg: Buffer.from(msg), rinfo, at: Date.now() });
    });
  });
  await new Promise((res, rej) => { udp.once('error', rej); udp.bind(0, '127.0.0.1', res); });
  const udpPort = udp.address().port;

  // HTTP server so the page has an http://127.0.0.1 origin (getUserMedia).
  const blank = await serveBlankPage('rtcedge stun capture', '<p>capture</p>');
  resources.blank = blank;
  const { origin } = blank;

  // Chromium's WebRTC network manager skips loopback interfaces by default, so on
  // a host whose only interface is lo it would gather no candidate at all.
  const args = chromiumArgs({ allowLoopback });
  log(`udp 127.0.0.1:${udpPort}, http 127.0.0.1:${blank.port}, chromium args: ${args.join(' ')}`);
  const page = await browser.launch({ executablePath: opts.chromium, args, profilePrefix: 'rtcedge-chromium-', origin });
  page.on('console', (m) => log(`page console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  await page.goto(`${origin}/`, { timeout: 15000 });

  const offer = await page.evaluate(async () => {
    const pc = new RTCPeerConnection({ iceServers: [], bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require' });
    window.__pc = pc;
    window.__events = [];
    pc.oniceconnectionstatechange = () => window.__events.push(`ice:${pc.iceConnectionState}`);
    let media = 'getUserMedia';
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true, video: false });
      for (const t of stream.getAudioTracks()) pc.addTrack(t, stream);
    } catch (e) {
      media = `addTransceiver (getUserMedia failed: ${e.name})`;
      pc.addTransceiver('audio', { direction: 'sendrecv' });
    }
    const o = await pc.createOffer();
    await pc.setLocalDescription(o);
    return { sdp: pc.localDescription.sdp, media };
  });
  const answer = buildAnswer(offer.sdp, { ufrag: opts.ufrag, pwd: opts.pwd, port: udpPort });
  const offerUfrag = (offer.sdp.match(/^a=ice-ufrag:(\S+)/m) || [])[1];

  const t0 = Date.now();
  await page.evaluate(async (sdp) => { await window.__pc.setRemoteDescription({ type: 'answer', sdp }); }, answer.sdp);
  log(`answer applied (media via ${offer.media}); waiting up to ${opts.timeout} s for a Binding request`);

  let got;
  try {
    got = await withTimeout(captured, opts.timeout * 1000, 'no STUN Binding request arrived');
  } catch (e) {
    const events = await page.evaluate(() => window.__events).catch(() => []);
    e.diag = { datagrams_seen: seen, ice_events: events };
    throw e;
  }
  return { got, t0, udpPort, offer, offerUfrag, answer, args, seen };
}

async function main() {
  const watchdog = setTimeout(async () => {
    console.error(`error: global watchdog fired after ${opts.timeout * 2 + 90} s`);
    await cleanup();
    process.exit(1);
  }, (opts.timeout * 2 + 90) * 1000);
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, async () => { await cleanup(); process.exit(130); });

  const version = chromiumVersion(opts.chromium);
  // auto: Chromium needs the loopback flag only when the host has no
  // non-loopback IPv4 interface (it then sends from e.g. eth0's address to
  // 127.0.0.1, which the kernel still delivers over lo). Deciding up front
  // keeps the run bounded by a single --timeout.
  const tries = [wantLoopback(opts.allowLoopback)];
  let r;
  let lastErr;
  for (const allow of tries) {
    try {
      r = await attempt(allow);
      break;
    } catch (e) {
      lastErr = e;
      log(`attempt (loopback flag ${allow ? 'on' : 'off'}) failed: ${e.message}` +
        (e.diag ? ` ${JSON.stringify(e.diag)}` : ''));
    } finally {
      if (!r) await cleanup();
    }
  }
  if (!r) {
    await cleanup();
    clearTimeout(watchdog);
    console.error(`error: no Chrome STUN Binding request captured: ${lastErr && lastErr.message}`);
    process.exit(1);
  }
  // Take the captured one; then tear everything down before writing.
  await cleanup();
  clearTimeout(watchdog);

  const { msg, rinfo, at } = r.got;
  const { msgLen, attrs } = parseStun(msg, opts.pwd);
  const userAttr = attrs.find((a) => a.name === 'USERNAME');
  const [serverUfrag, clientUfrag] = userAttr ? userAttr.value.split(':') : [null, null];
  const hexLines = msg.toString('hex').match(/.{1,64}/g);
  fs.mkdirSync(path.dirname(path.resolve(opts.out)), { recursive: true });
  fs.writeFileSync(opts.out, hexLines.join('\n') + '\n');

  const out = {
    description: 'First ICE STUN Binding request sent by headless Chromium to an ICE-lite peer (captured by tests/golden/tools/capture_chrome_stun.mjs)',
    chromium_version: version,
    server_ufrag: serverUfrag,
    client_ufrag: clientUfrag,
    client_ufrag_matches_offer: clientUfrag === r.offerUfrag,
    server_ufrag_matches_requested: serverUfrag === opts.ufrag,
    server_pwd: opts.pwd,
    username: userAttr ? userAttr.value : null,
    total_length: msg.length,
    stun_message_length: msgLen,
    transaction_id: msg.subarray(8, 20).toString('hex'),
    attribute_types: attrs.map((a) => a.type),
    attribute_names: attrs.map((a) => a.name),
    attributes: attrs,
    message_integrity_valid: attrs.find((a) => a.name === 'MESSAGE-INTEGRITY')?.valid ?? null,
    fingerprint_valid: attrs.find((a) => a.name === 'FINGERPRINT')?.valid ?? null,
    source_address: rinfo.address,
    ms_after_set_remote_description: at - r.t0,
    datagrams_before_capture: r.seen.length - 1,
    chromium_args: r.args,
    answer_fingerprint_is_fake: true,
  };
  const json = JSON.stringify(out, null, 2);
  if (opts.json) fs.writeFileSync(opts.json, json + '\n');
  process.stdout.write(json + '\n');
  log(`wrote ${opts.out} (${msg.length} bytes)`);
}

main().catch(async (e) => {
  console.error(`error: ${e.stack || e.message}`);
  await cleanup();
  process.exit(1);
});
