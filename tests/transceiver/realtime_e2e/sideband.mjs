// The app server's side of the realtime sideband scenario (realtime_e2e.mjs --scenario sideband):
// a TLS terminator in front of the transceiver's plain HTTP port (TLS ends at the ingress in
// production; the openai SDK only speaks wss://), and two sideband clients that record every
// event they hear:
//   SdkSideband    the openai package's own sideband client, OpenAIRealtimeWS({ callID }, client)
//                  from `openai/realtime/ws` (Authorization: Bearer <server key>), through the
//                  terminator; the process trusts the terminator's self-signed certificate
//                  through NODE_EXTRA_CA_CERTS (run_realtime_e2e.py sets it).
//   PlainSideband  a bare `ws` WebSocket on ws://<transceiver>/v1/realtime?call_id=…, no SDK.
// Both packages come from tools/node_modules (openai is a dependency of
// @openai/agents-realtime, ws too). Nothing runs on import.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const TOOLS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'tools');

// openai (CommonJS entries, so OpenAI and OpenAIRealtimeWS are one module graph) and ws.
export function loadSidebandPackages() {
  const require = createRequire(path.join(TOOLS, 'package.json'));
  const { OpenAI } = require('openai');
  const { OpenAIRealtimeWS } = require('openai/realtime/ws');
  const WebSocket = require('ws');
  const version = (name) => JSON.parse(fs.readFileSync(path.join(TOOLS, 'node_modules', name, 'package.json'), 'utf8')).version;
  return { OpenAI, OpenAIRealtimeWS, WebSocket, versions: { openai: version('openai'), ws: version('ws') } };
}

// TLS on 127.0.0.1:<ephemeral> (certificate and key: PEM files), each connection piped to
// target {host, port}. Resolves to { port, connections(), close() }.
export async function startTlsTerminator({ certFile, keyFile, target }) {
  const sockets = new Set();
  let count = 0;
  const server = tls.createServer({ cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) }, (client) => {
    count += 1;
    const upstream = net.connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    const end = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.on('tlsClientError', () => {}); // a client that refuses the certificate: its own error says so
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(0, '127.0.0.1', resolve); });
  return {
    port: server.address().port,
    connections: () => count,
    close: () => { for (const s of sockets) s.destroy(); server.close(); },
  };
}

// What both clients share: the events heard ({t: ms since start, type, event_id, ev}), the
// opening and the close, and waits on them.
class RecordingSideband {
  constructor(name) {
    this.name = name;
    this.events = [];
    this.errors = [];      // transport or SDK errors (not `error` events: those are in events)
    this.opened = null;    // ms
    this.closed = null;    // { code, reason, t }
    this.refused = null;   // { status, body } when the upgrade was answered with an HTTP error
    this.t0 = Date.now();
  }

  heard(ev) {
    this.events.push({ t: Date.now() - this.t0, type: ev && ev.type, event_id: ev && ev.event_id, ev });
  }

  // The first event after index `from` that pred accepts, or null.
  find(pred, from = 0) {
    for (let i = from; i < this.events.length; i++) if (pred(this.events[i].ev, i)) return { ...this.events[i], index: i };
    return null;
  }

  summary() {
    return { name: this.name, opened_ms: this.opened, closed: this.closed, refused: this.refused, errors: this.errors,
      events: this.events.length, types: [...new Set(this.events.map((e) => e.type))] };
  }
}

// The openai SDK's sideband: new OpenAIRealtimeWS({ callID }, new OpenAI({ apiKey, baseURL })).
// The SDK builds wss://<baseURL host>/v1/realtime?call_id=<callID> itself.
export class SdkSideband extends RecordingSideband {
  constructor(pkgs, { baseURL, apiKey, callId }) {
    super('openai-sdk');
    const client = new pkgs.OpenAI({ apiKey, baseURL });
    this.rt = new pkgs.OpenAIRealtimeWS({ callID: callId }, client);
    this.url = String(this.rt.url);
    this.rt.on('event', (ev) => this.heard(ev));
    // An `error` event arrives on 'event' too; the SDK also raises it here (and would reject
    // unhandled without a listener).
    this.rt.on('error', (err) => { if (!err.error) this.errors.push(err.message); });
    this.rt.socket.on('open', () => { this.opened = Date.now() - this.t0; });
    this.rt.socket.on('close', (code, reason) => { this.closed = { code, reason: String(reason), t: Date.now() - this.t0 }; });
  }

  send(event) { this.rt.send(event); }
  close() { try { this.rt.close(); } catch { /* already closed */ } }
}

// A bare WebSocket with the server key, as any app server without the SDK would open it.
export class PlainSideband extends RecordingSideband {
  constructor(pkgs, { url, apiKey, name = 'plain-ws' }) {
    super(name);
    this.url = url;
    this.ws = new pkgs.WebSocket(url, { headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {}, perMessageDeflate: false });
    this.ws.on('open', () => { this.opened = Date.now() - this.t0; });
    this.ws.on('message', (data, isBinary) => {
      if (isBinary) { this.errors.push('a binary message'); return; }
      try { this.heard(JSON.parse(String(data))); } catch { this.errors.push(`unparsable: ${String(data).slice(0, 100)}`); }
    });
    this.ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => { this.refused = { status: res.statusCode, body: body.slice(0, 300) }; this.ws.terminate(); });
    });
    this.ws.on('error', (err) => this.errors.push(err.message));
    this.ws.on('close', (code, reason) => { this.closed = { code, reason: String(reason), t: Date.now() - this.t0 }; });
  }

  send(event) { this.ws.send(JSON.stringify(event)); }
  close() { try { this.ws.close(1000); } catch { /* already closed */ } }
}
