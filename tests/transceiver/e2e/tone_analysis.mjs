// Tone analysis of captured PCM, shared by the browser end-to-end drivers
// (browser_e2e.mjs here, ../realtime_e2e/realtime_e2e.mjs): they decide "the echoed tone was
// heard" the same way. Pure functions, no I/O.

// Radix-2 FFT (in place) of a Hann-windowed block; returns the power spectrum.
export function powerSpectrum(samples) {
  let n = 1;
  while (n * 2 <= samples.length) n *= 2;
  const re = new Float64Array(n);
  const im = new Float64Array(n);
  for (let i = 0; i < n; i++) re[i] = samples[i] * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (n - 1)));
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) { [re[i], re[j]] = [re[j], re[i]]; [im[i], im[j]] = [im[j], im[i]]; }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * Math.PI) / len;
    const wr = Math.cos(ang), wi = Math.sin(ang);
    for (let i = 0; i < n; i += len) {
      let cr = 1, ci = 0;
      for (let k = 0; k < len / 2; k++) {
        const a = i + k, b = a + len / 2;
        const tr = re[b] * cr - im[b] * ci, ti = re[b] * ci + im[b] * cr;
        re[b] = re[a] - tr; im[b] = im[a] - ti;
        re[a] += tr; im[a] += ti;
        const ncr = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = ncr;
      }
    }
  }
  const power = new Float64Array(n / 2);
  for (let k = 0; k < n / 2; k++) power[k] = re[k] * re[k] + im[k] * im[k];
  return { power, n };
}

// Dominant frequency in 50 Hz..min(fs/2, 20 kHz) and the tone-band/rest power ratio.
export function analyseTone(samples, sampleRate) {
  const { power, n } = powerSpectrum(samples);
  const binHz = sampleRate / n;
  const lo = Math.ceil(50 / binHz), hi = Math.min(power.length - 2, Math.floor(Math.min(sampleRate / 2, 20000) / binHz));
  let peak = lo;
  for (let k = lo; k <= hi; k++) if (power[k] > power[peak]) peak = k;
  // Parabolic interpolation on log power refines the peak between bins.
  const [a, b, c] = [power[peak - 1], power[peak], power[peak + 1]].map((v) => Math.log(v + 1e-30));
  const denom = a - 2 * b + c;
  const offset = denom !== 0 ? (0.5 * (a - c)) / denom : 0;
  const dominantHz = (peak + offset) * binHz;
  const bandBins = Math.max(3, Math.ceil(5 / binHz)); // +-5 Hz holds the Hann main lobe
  let tone = 0, rest = 0, sumSq = 0;
  for (let k = lo; k <= hi; k++) {
    if (Math.abs(k - peak) <= bandBins) tone += power[k];
    else rest += power[k];
  }
  for (const v of samples) sumSq += v * v;
  return {
    dominant_hz: Number(dominantHz.toFixed(2)),
    tone_snr_db: Number((10 * Math.log10(tone / Math.max(rest, 1e-30))).toFixed(1)),
    rms_dbfs: Number((10 * Math.log10(sumSq / samples.length + 1e-30)).toFixed(1)),
    fft_size: n, bin_hz: Number(binHz.toFixed(3)),
  };
}

// RMS level of samples[from, to) in dBFS (-100 for digital silence), the "is it silent" measure.
export function rmsDbfs(samples, from = 0, to = samples.length) {
  let sumSq = 0;
  for (let i = from; i < to; i++) sumSq += samples[i] * samples[i];
  const n = Math.max(1, to - from);
  return sumSq > 0 ? Math.max(-100, 10 * Math.log10(sumSq / n)) : -100;
}
