// Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on fd 3, answers and events on fd 4, each a JSON text ended by a
// NUL byte), for tests that open a page as a browser does: its console errors and exceptions, every
// request it makes, its DOM (Runtime.evaluate) and a PNG screenshot. And a PNG decoder for the
// screenshot's pixels (8-bit RGB or RGBA, not interlaced: what Chromium writes).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import type { Readable, Writable } from 'node:stream';

/** Null when `chromium` runs here, else why not. */
export function chromiumMissing(): string | null {
  const r = spawnSync('chromium', ['--version'], { encoding: 'utf8' });
  if (r.error !== undefined) return 'chromium is not installed (apt-get install chromium; scripts/lib/setup.sh installs it)';
  return r.status === 0 ? null : `chromium --version failed: ${r.stderr.trim()}`;
}

export interface PageVisit {
  /** console.error/warn calls, uncaught exceptions and the browser's own error log entries. */
  errors: string[];
  /** Every URL the page asked for (the page itself included). */
  requests: string[];
  /** The answers of `evaluate` (each expression's JSON value). */
  values: unknown[];
  png: Buffer;
}

type Message = { id?: number; method?: string; params?: any; result?: any; error?: { message: string }; sessionId?: string };

/** Opens `url` in a fresh headless Chromium, evaluates `expressions` in it, takes a screenshot, closes it. */
export async function visitPage(url: string, expressions: string[], size = { width: 1200, height: 1900 }): Promise<PageVisit> {
  const profile = mkdtempSync(join(tmpdir(), 'slbx-chromium-'));
  const proc: ChildProcess = spawn(
    'chromium',
    [
      '--headless',
      '--no-sandbox', // root, in a test
      '--disable-gpu',
      '--hide-scrollbars',
      '--no-first-run',
      '--remote-debugging-pipe',
      '--disable-breakpad', // no crash handler process writing into the profile
      `--user-data-dir=${profile}`,
      `--window-size=${size.width},${size.height}`,
      'about:blank',
    ],
    // its own process group: its helpers (zygote, renderers, utilities) can be ended with it, below
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true },
  );
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const toBrowser = proc.stdio[3] as Writable;
  const fromBrowser = proc.stdio[4] as Readable;
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  const listeners: ((m: Message) => void)[] = [];
  let nextId = 1;
  let buf = '';
  fromBrowser.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    let i: number;
    while ((i = buf.indexOf('\0')) >= 0) {
      const m = JSON.parse(buf.slice(0, i)) as Message;
      buf = buf.slice(i + 1);
      if (m.id !== undefined && pending.has(m.id)) {
        const p = pending.get(m.id)!;
        pending.delete(m.id);
        if (m.error !== undefined) p.reject(new Error(m.error.message));
        else p.resolve(m.result);
      } else for (const l of listeners) l(m);
    }
  });
  const exited = new Promise<never>((_, reject) =>
    proc.on('exit', (code) => reject(new Error(`chromium exited (${code}) before the visit ended: ${stderr.slice(-2000)}`))),
  );
  const send = (method: string, params: object = {}, sessionId?: string): Promise<any> => {
    const id = nextId++;
    const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
    toBrowser.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    return Promise.race([done, exited]);
  };
  try {
    const errors: string[] = [];
    const requests: string[] = [];
    let loaded!: () => void;
    const load = new Promise<void>((r) => (loaded = r));
    listeners.push((m) => {
      if (m.method === 'Runtime.consoleAPICalled' && (m.params.type === 'error' || m.params.type === 'warning'))
        errors.push(`console.${m.params.type}: ${m.params.args.map((a: any) => a.value ?? a.description).join(' ')}`);
      else if (m.method === 'Runtime.exceptionThrown')
        errors.push(`exception: ${m.params.exceptionDetails.exception?.description ?? m.params.exceptionDetails.text}`);
      else if (m.method === 'Log.entryAdded' && m.params.entry.level === 'error')
        errors.push(`log: ${m.params.entry.text} ${m.params.entry.url ?? ''}`);
      else if (m.method === 'Network.requestWillBeSent') requests.push(m.params.request.url);
      else if (m.method === 'Network.loadingFailed') errors.push(`load failed: ${m.params.errorText}`);
      else if (m.method === 'Page.loadEventFired') loaded();
    });
    const { targetInfos } = await send('Target.getTargets');
    const page = (targetInfos as { type: string; targetId: string }[]).find((t) => t.type === 'page');
    if (page === undefined) throw new Error('chromium opened no page');
    const { sessionId } = await send('Target.attachToTarget', { targetId: page.targetId, flatten: true });
    for (const d of ['Runtime', 'Log', 'Network', 'Page']) await send(`${d}.enable`, {}, sessionId);
    await send('Page.navigate', { url }, sessionId);
    await Promise.race([load, exited]);
    const values: unknown[] = [];
    for (const e of expressions) {
      const r = await send('Runtime.evaluate', { expression: e, returnByValue: true }, sessionId);
      if (r.exceptionDetails !== undefined)
        throw new Error(`${e}: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
      values.push(r.result.value);
    }
    const shot = await send('Page.captureScreenshot', { format: 'png' }, sessionId);
    return { errors, requests, values, png: Buffer.from(shot.data as string, 'base64') };
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once('exit', r)));
    // Chromium's helper processes may still write into the profile after the browser exits (rmSync then
    // failed with ENOTEMPTY, even retried for 2 s): end what is left of its process group (ours: it was
    // started detached) and wait until none is left before the profile goes
    const group = proc.pid!;
    const groupAlive = () => {
      try {
        process.kill(-group, 0);
        return true;
      } catch {
        return false;
      }
    };
    if (groupAlive()) process.kill(-group, 'SIGKILL');
    for (let i = 0; i < 100 && groupAlive(); i++) await new Promise((r) => setTimeout(r, 50));
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
}

export interface Pixels {
  width: number;
  height: number;
  /** RGBA, 4 bytes a pixel. */
  rgba: Uint8Array;
}

/** Decodes an 8-bit RGB or RGBA, non-interlaced PNG (PNG specification 11.2.2 and 9). */
export function decodePng(png: Buffer): Pixels {
  if (png.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let off = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (off < png.length) {
    const len = png.readUInt32BE(off);
    const type = png.toString('latin1', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8]!;
      const colour = data[9]!;
      if (depth !== 8 || (colour !== 2 && colour !== 6) || data[12] !== 0)
        throw new Error(`unsupported PNG (depth ${depth}, colour type ${colour})`);
      channels = colour === 6 ? 4 : 3;
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const cur = new Uint8Array(stride);
  const prev = new Uint8Array(stride);
  const rgba = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    const base = y * (stride + 1);
    const filter = raw[base]!;
    for (let i = 0; i < stride; i++) {
      const x = raw[base + 1 + i]!;
      const a = i >= channels ? cur[i - channels]! : 0;
      const b = prev[i]!;
      const c = i >= channels ? prev[i - channels]! : 0;
      let v: number;
      if (filter === 0) v = x;
      else if (filter === 1) v = x + a;
      else if (filter === 2) v = x + b;
      else if (filter === 3) v = x + ((a + b) >>> 1);
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v = x + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
      } else throw new Error(`PNG row ${y}: unknown filter ${filter}`);
      cur[i] = v & 0xff;
    }
    for (let px = 0; px < width; px++) {
      const o = (y * width + px) * 4;
      rgba[o] = cur[px * channels]!;
      rgba[o + 1] = cur[px * channels + 1]!;
      rgba[o + 2] = cur[px * channels + 2]!;
      rgba[o + 3] = channels === 4 ? cur[px * channels + 3]! : 255;
    }
    prev.set(cur);
  }
  return { width, height, rgba };
}

/** The share of pixels that have the most common colour, and how many colours there are. */
export function colourSpread(p: Pixels): { dominantShare: number; colours: number } {
  const counts = new Map<number, number>();
  for (let i = 0; i < p.rgba.length; i += 4) {
    const k = (p.rgba[i]! << 16) | (p.rgba[i + 1]! << 8) | p.rgba[i + 2]!;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const max = Math.max(...counts.values());
  return { dominantShare: max / (p.width * p.height), colours: counts.size };
}
