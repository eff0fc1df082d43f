// The shape every JavaScript test driver shares: command-line flags, a run deadline and
// waits on conditions within it (never a bare sleep as a wait), named checks into a JSON
// summary, and the main that owns the watchdog, the signals, the summary on stdout and the
// exit code (0 passed, 1 a check failed or timed out, 2 bad usage). Nothing runs on import.

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise,
    new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timed out after ${(ms / 1000).toFixed(1)} s: ${what}`)), ms); }),
  ]).finally(() => clearTimeout(t));
}

// A usage(msg) that prints `msg` (when given) and `text`, and exits 2.
export function usageExit(text) {
  return (msg) => {
    if (msg) console.error(`error: ${msg}`);
    console.error(text);
    process.exit(2);
  };
}

// Parses argv into opts. flags: '--name' -> [key, convert] takes a value (opts[key] =
// convert(value)); '--name' -> {key: value, ...} takes none (assigned to opts as is).
// -h/--help, an unknown flag or a missing value go to usage().
export function parseArgs(argv, opts, flags, usage) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') usage();
    const f = Object.prototype.hasOwnProperty.call(flags, a) ? flags[a] : null;
    if (!f) usage(`unknown argument ${a}`);
    if (!Array.isArray(f)) { Object.assign(opts, f); continue; }
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    opts[f[0]] = f[1](argv[++i]);
  }
  return opts;
}

export const baseUrl = (u) => u.replace(/\/+$/, '');

// The run's deadline, `timeoutS` from now. waitFor polls fn (every intervalMs) until it
// returns {ok: true, ...} and returns that; it throws once limitMs or the run's deadline,
// whichever is sooner, has passed (the error names limitMs, `what` and fn's last `why`).
export function deadline(timeoutS, { intervalMs: defaultIntervalMs = 100 } = {}) {
  const deadlineAt = Date.now() + timeoutS * 1000;
  const remainingMs = () => Math.max(0, deadlineAt - Date.now());
  async function waitFor(what, fn, { intervalMs = defaultIntervalMs, limitMs = remainingMs() } = {}) {
    const until = Date.now() + Math.min(limitMs, remainingMs());
    let last;
    for (;;) {
      last = await fn();
      if (last && last.ok) return last;
      if (Date.now() >= until) throw new Error(`timed out after ${(limitMs / 1000).toFixed(1)} s waiting for ${what}${last && last.why ? ` (last: ${last.why})` : ''}`);
      await sleep(intervalMs);
    }
  }
  return { remainingMs, waitFor };
}

// check(name, ok, detail): one entry of summary.checks, logged PASS/FAIL; returns ok as a boolean.
export function checker(summary, log) {
  return (name, ok, detail) => {
    summary.checks.push({ name, ok: Boolean(ok), detail });
    log(`${ok ? 'PASS' : 'FAIL'} ${name}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
    return Boolean(ok);
  };
}

// Runs run(summary) under a watchdog (timeoutS + 30 s) with SIGINT/SIGTERM handled, always
// calls cleanup(), prints the summary as JSON and exits 0 when every check passed, else 1.
export async function runMain(summary, { timeoutS, run, cleanup, log }) {
  const watchdog = setTimeout(async () => {
    console.error(`error: watchdog fired after ${timeoutS + 30} s`);
    summary.error = 'watchdog';
    console.log(JSON.stringify(summary, null, 2));
    await cleanup();
    process.exit(1);
  }, (timeoutS + 30) * 1000);
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
