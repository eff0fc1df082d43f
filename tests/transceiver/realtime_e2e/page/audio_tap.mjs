// The received-audio tap of the realtime end-to-end pages: an AudioWorklet copies the remote
// track's PCM in 10 ms chunks stamped with the AudioContext clock, so a test can ask "was the
// tone there" and "when did it go silent" on one clock (ctx.currentTime) that the main thread
// also reads when it acts (a busy main thread delays messages, not the stamps).

const WORKLET = `
class RtceTap extends AudioWorkletProcessor {
  constructor() { super(); this.buf = new Float32Array(480); this.n = 0; this.t0 = 0; }
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true;
    for (let i = 0; i < ch.length; i++) {
      if (this.n === 0) this.t0 = currentTime + i / sampleRate;
      this.buf[this.n++] = ch[i];
      if (this.n === this.buf.length) {
        this.port.postMessage({ t: this.t0, samples: this.buf });
        this.buf = new Float32Array(480);
        this.n = 0;
      }
    }
    return true;
  }
}
registerProcessor('rtce-tap', RtceTap);
`;

// Keeps the last `keepS` seconds of chunks {t, samples}.
export async function createTap(ctx, stream, keepS = 40) {
  const url = URL.createObjectURL(new Blob([WORKLET], { type: 'application/javascript' }));
  await ctx.audioWorklet.addModule(url);
  URL.revokeObjectURL(url);
  const source = ctx.createMediaStreamSource(stream);
  const node = new AudioWorkletNode(ctx, 'rtce-tap', { numberOfInputs: 1, numberOfOutputs: 1, channelCount: 1, channelCountMode: 'explicit' });
  const mute = ctx.createGain();
  mute.gain.value = 0; // the <audio> element plays it; the tap only listens
  source.connect(node);
  node.connect(mute);
  mute.connect(ctx.destination);
  const chunks = [];
  node.port.onmessage = (e) => {
    chunks.push(e.data);
    while (chunks.length && chunks[0].t < e.data.t - keepS) chunks.shift();
  };
  const dbfs = (s) => {
    let sum = 0;
    for (const v of s) sum += v * v;
    return sum > 0 ? Math.max(-100, 10 * Math.log10(sum / s.length)) : -100;
  };
  return {
    sampleRate: ctx.sampleRate,
    // [[ctxTime, dBFS], ...] of every 10 ms chunk in [from, to)
    levels: (from = 0, to = Infinity) => chunks.filter((c) => c.t >= from && c.t < to).map((c) => [c.t, dbfs(c.samples)]),
    // the PCM of [from, to) as a plain array (page.evaluate returns JSON)
    samples: (from, to) => {
      const out = [];
      for (const c of chunks) if (c.t >= from && c.t < to) for (const v of c.samples) out.push(v);
      return out;
    },
    lastT: () => (chunks.length ? chunks[chunks.length - 1].t : null),
  };
}
