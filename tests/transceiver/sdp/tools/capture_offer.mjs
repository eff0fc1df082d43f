#!/usr/bin/env node
// Capture real Chromium SDP offers for the SDP parser's fixtures.
//
// Usage:
//   node capture_offer.mjs [--out-dir DIR] [--chromium /usr/bin/chromium]
//
// Writes DIR/chrome_audio_offer.sdp (one audio track from the fake capture device) and
// DIR/chrome_audio_video_data_offer.sdp (audio track + video transceiver + data channel).
// DIR defaults to ../fixtures next to this script. Nothing leaves the machine: the page is
// served from 127.0.0.1 and no answer is ever applied, so no ICE traffic is sent.
//
// playwright-core is reused from tests/golden/tools/node_modules (run `npm ci` there once);
// this folder has no node_modules of its own. The Chromium launch and the blank page are
// tests/support/js/browser.mjs's; this file owns the two offers.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BrowserRun, chromiumArgs, loadPlaywright, serveBlankPage } from '../../../support/js/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const { chromium } = await loadPlaywright();

const opts = { outDir: path.resolve(here, '../fixtures'), chromium: '/usr/bin/chromium' };
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const val = () => {
      if (i + 1 >= argv.length) { console.error(`error: ${argv[i]} needs a value`); process.exit(2); }
      return argv[++i];
    };
    switch (argv[i]) {
      case '--out-dir': opts.outDir = path.resolve(val()); break;
      case '--chromium': opts.chromium = val(); break;
      default: console.error('usage: node capture_offer.mjs [--out-dir DIR] [--chromium PATH]'); process.exit(2);
    }
  }
}

async function main() {
  const blank = await serveBlankPage('rtcedge offer capture');
  const browser = new BrowserRun();
  try {
    const page = await browser.launch({
      chromium, executablePath: opts.chromium, args: chromiumArgs(), profilePrefix: 'rtcedge-offer-',
      origin: blank.origin, permissions: ['microphone', 'camera'],
    });
    await page.goto(`${blank.origin}/`, { timeout: 15000 });
    const offers = await page.evaluate(async () => {
      // Wait for gathering so the offer carries candidates, as a non-trickle client sends it.
      async function offerOf(pc) {
        await pc.setLocalDescription(await pc.createOffer());
        if (pc.iceGatheringState !== 'complete') {
          await new Promise((resolve) => {
            const t = setTimeout(resolve, 5000);
            pc.addEventListener('icegatheringstatechange', () => {
              if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); }
            });
          });
        }
        const sdp = pc.localDescription.sdp;
        pc.close();
        return sdp;
      }
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true, video: false });
      const config = { iceServers: [], bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require' };

      const audioOnly = new RTCPeerConnection(config);
      for (const t of stream.getAudioTracks()) audioOnly.addTrack(t, stream);

      const mixed = new RTCPeerConnection(config);
      for (const t of stream.getAudioTracks()) mixed.addTrack(t, stream);
      mixed.addTransceiver('video', { direction: 'recvonly' });
      mixed.createDataChannel('events');

      return { audio: await offerOf(audioOnly), mixed: await offerOf(mixed), ua: navigator.userAgent };
    });
    fs.mkdirSync(opts.outDir, { recursive: true });
    const audioPath = path.join(opts.outDir, 'chrome_audio_offer.sdp');
    const mixedPath = path.join(opts.outDir, 'chrome_audio_video_data_offer.sdp');
    fs.writeFileSync(audioPath, offers.audio);
    fs.writeFileSync(mixedPath, offers.mixed);
    console.log(JSON.stringify({ user_agent: offers.ua, files: [audioPath, mixedPath] }));
  } finally {
    await browser.close();
    blank.close();
  }
}

main().catch((e) => { console.error(`error: ${e.message}`); process.exit(1); });
