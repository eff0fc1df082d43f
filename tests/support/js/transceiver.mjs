// A test driver's view of an rtcedge transceiver from Node: the command line that names it, HTTP
// requests that never throw (status 0 and the error's message instead) and its Prometheus
// /metrics read by name and labels. Nothing runs on import.

import { BROWSER_DEFAULTS, BROWSER_FLAGS, checkBrowserOpts } from './browser.mjs';
import { baseUrl, parseArgs, usageExit } from './driver.mjs';

// The command line of a driver that calls a transceiver's /v1/sessions from Chromium: the
// common flags (--url, --expect-path, --api-key, --timeout-s and browser.mjs's) and the
// driver's own `flags` parsed over `defaults`, the common values checked. usage() names
// `script` and lists the common flags, then `usageMore`. Returns { opts, usage }.
export function parseCallDriverArgs(argv, { script, usageMore, defaults, flags }) {
  const usage = usageExit(`usage: node ${script} --url URL [--expect-path direct|relay] [--timeout-s S] ` +
    `[--tone-wav FILE] [--tone-hz HZ] [--api-key K] [--chromium PATH] [--allow-loopback auto|yes|no] ${usageMore}`);
  const opts = parseArgs(argv, { url: null, expectPath: null, apiKey: '', ...BROWSER_DEFAULTS, ...defaults }, {
    '--url': ['url', baseUrl], '--expect-path': ['expectPath', String], '--api-key': ['apiKey', String],
    '--timeout-s': ['timeoutS', Number], ...BROWSER_FLAGS, ...flags,
  }, usage);
  if (!opts.url || !/^https?:\/\//.test(opts.url)) usage('--url http://HOST:PORT is required');
  if (opts.expectPath && !['direct', 'relay'].includes(opts.expectPath)) usage('--expect-path must be direct or relay');
  checkBrowserOpts(opts, usage);
  return { opts, usage };
}

// One request, with `apiKey` as a Bearer token when given, aborted after `ms`.
export async function httpRequest(method, url, { apiKey = '', ms = 3000 } = {}) {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), ms);
  try {
    const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
    const res = await fetch(url, { method, headers, signal: ctl.signal });
    return { status: res.status, text: await res.text() };
  } catch (e) {
    return { status: 0, text: e.message };
  } finally {
    clearTimeout(t);
  }
}

// The metric samples of the exposition `text`: [{name, labels (the {...} text or ''), value}].
function* samples(text) {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m) yield { name: m[1], labels: m[2] || '', value: Number(m[3]) };
  }
}

// The first sample of `name`, or null.
export function metricValue(text, name) {
  for (const s of samples(text)) if (s.name === name) return s.value;
  return null;
}

// The sum of a metric's samples whose label set contains every `labels` pair, or null.
export function metricSum(text, name, labels = {}) {
  let sum = null;
  for (const s of samples(text)) {
    if (s.name !== name) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels.includes(`${k}="${v}"`))) sum = (sum ?? 0) + s.value;
  }
  return sum;
}

// rtcedge_transceiver_sessions_active of the transceiver at `origin`, or null when /metrics
// does not answer 200.
export async function sessionsActive(origin, apiKey = '') {
  const r = await httpRequest('GET', `${origin}/metrics`, { apiKey });
  return r.status === 200 ? metricValue(r.text, 'rtcedge_transceiver_sessions_active') : null;
}
