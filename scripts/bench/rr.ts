// Request/response latency over TCP, for scripts/bench (the rr-* variants of send-paths.sh):
//
//   node dist/scripts/bench/rr.js server --port P [--address A]
//     echoes every byte it receives (TCP_NODELAY)
//   node dist/scripts/bench/rr.js client --target ADDR:PORT --mode persistent|connect --rate N
//        --seconds S [--warmup W] [--size BYTES] [--json FILE]
//     persistent: one connection; a BYTES-byte request, then wait for its BYTES-byte echo; requests start
//                 on a schedule of N per second (never two outstanding)
//     connect:    a new connection per request (connect, request, echo, close), N per second
//     The first W seconds are not recorded. Prints and writes (--json) count, errors, achieved rate and
//     the round-trip percentiles in microseconds (p50, p90, p99, p99.9, max, mean), measured with
//     process.hrtime from just before connect (connect mode) or write (persistent) to the last echoed byte.
import { createConnection, createServer, type Socket } from 'node:net';
import { writeFileSync } from 'node:fs';

function usage(msg: string): never {
  process.stderr.write(
    `rr.js: ${msg}\nusage: rr.js server --port P [--address A]\n       rr.js client --target ADDR:PORT --mode persistent|connect --rate N --seconds S [--warmup W] [--size BYTES] [--json FILE]\n`,
  );
  process.exit(2);
}

function parse(argv: readonly string[], known: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    if (!k.startsWith('--') || !known.includes(k.slice(2))) usage(`unknown argument ${JSON.stringify(k)}`);
    const v = argv[i + 1];
    if (v === undefined) usage(`${k} needs a value`);
    m.set(k.slice(2), v);
  }
  return m;
}

function num(m: Map<string, string>, k: string, def: number | null, min: number): number {
  const t = m.get(k);
  if (t === undefined) {
    if (def === null) usage(`--${k} is required`);
    return def;
  }
  const v = Number(t);
  if (!Number.isFinite(v) || v < min) usage(`--${k} must be a number >= ${min} (got ${t})`);
  return v;
}

function server(argv: readonly string[]): void {
  const o = parse(argv, ['port', 'address']);
  const port = num(o, 'port', null, 1);
  const srv = createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
    s.on('error', () => s.destroy());
  });
  srv.listen(port, o.get('address') ?? '0.0.0.0', () => process.stdout.write(`rr server on ${o.get('address') ?? '0.0.0.0'}:${port}\n`));
  const stop = () => srv.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

export interface RrResult {
  target: string;
  mode: string;
  size: number;
  seconds: number;
  count: number;
  errors: number;
  rate: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
  meanUs: number;
}

/** The q-quantile (0..1) of sorted samples, nearest rank. */
export function quantile(sorted: Float64Array | number[], q: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

async function client(argv: readonly string[]): Promise<void> {
  const o = parse(argv, ['target', 'mode', 'rate', 'seconds', 'warmup', 'size', 'json']);
  const target = o.get('target') ?? usage('--target is required');
  const m = /^(.+):(\d+)$/.exec(target);
  if (m === null) usage(`--target must be ADDR:PORT (got ${target})`);
  const host = m[1]!.replace(/^\[|\]$/g, '');
  const port = Number(m[2]);
  const mode = o.get('mode') ?? 'persistent';
  if (mode !== 'persistent' && mode !== 'connect') usage('--mode must be persistent or connect');
  const rate = num(o, 'rate', null, 1);
  const seconds = num(o, 'seconds', null, 0.1);
  const warmup = num(o, 'warmup', 1, 0);
  const size = num(o, 'size', 64, 1);
  const req = Buffer.alloc(size, 0x61);
  const samples: number[] = [];
  let errors = 0;
  const t0 = process.hrtime.bigint();
  const elapsedS = () => Number(process.hrtime.bigint() - t0) / 1e9;
  const intervalS = 1 / rate;

  // one request on `sock` (already connected): resolves with the round trip in µs from `start`
  const exchange = (sock: Socket, start: bigint): Promise<number> =>
    new Promise((resolve, reject) => {
      let got = 0;
      const onData = (d: Buffer) => {
        got += d.length;
        if (got >= size) {
          sock.off('data', onData);
          sock.off('error', onErr);
          resolve(Number(process.hrtime.bigint() - start) / 1000);
        }
      };
      const onErr = (e: Error) => {
        sock.off('data', onData);
        reject(e);
      };
      sock.on('data', onData);
      sock.once('error', onErr);
      sock.write(req);
    });
  const connect = (): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const s = createConnection({ host, port, noDelay: true });
      s.once('connect', () => {
        s.off('error', reject);
        resolve(s);
      });
      s.once('error', reject);
    });
  const sleepUntil = (tS: number) =>
    new Promise<void>((r) => {
      const d = (tS - elapsedS()) * 1000;
      if (d > 0.2) setTimeout(r, Math.max(0, d - 0.1));
      else setImmediate(r);
    });

  let persistent: Socket | null = null;
  if (mode === 'persistent') persistent = await connect();
  let i = 0;
  let recordedFrom = -1;
  for (;;) {
    const slot = i * intervalS;
    if (slot >= warmup + seconds) break;
    await sleepUntil(slot);
    const record = slot >= warmup;
    if (record && recordedFrom < 0) recordedFrom = elapsedS();
    try {
      if (persistent !== null) {
        const us = await exchange(persistent, process.hrtime.bigint());
        if (record) samples.push(us);
      } else {
        const start = process.hrtime.bigint();
        const s = await connect();
        const us = await exchange(s, start);
        s.end();
        s.on('error', () => {});
        if (record) samples.push(us);
      }
    } catch {
      if (record) errors++;
      if (persistent !== null) {
        persistent.destroy();
        try {
          persistent = await connect();
        } catch {
          /* counted; try again next slot */
        }
      }
    }
    i++;
  }
  const span = recordedFrom < 0 ? 0 : elapsedS() - recordedFrom;
  persistent?.end();
  const sorted = Float64Array.from(samples).sort();
  const mean = samples.length === 0 ? 0 : samples.reduce((a, b) => a + b, 0) / samples.length;
  const r1 = (x: number) => Math.round(x * 10) / 10;
  const result: RrResult = {
    target,
    mode,
    size,
    seconds,
    count: samples.length,
    errors,
    rate: span > 0 ? samples.length / span : 0,
    p50Us: r1(quantile(sorted, 0.5)),
    p90Us: r1(quantile(sorted, 0.9)),
    p99Us: r1(quantile(sorted, 0.99)),
    p999Us: r1(quantile(sorted, 0.999)),
    maxUs: r1(sorted.length > 0 ? sorted[sorted.length - 1]! : 0),
    meanUs: r1(mean),
  };
  const text = JSON.stringify(result);
  process.stdout.write(`${text}\n`);
  const json = o.get('json');
  if (json !== undefined) writeFileSync(json, `${JSON.stringify(result, null, 2)}\n`);
  process.exit(samples.length > 0 ? 0 : 1);
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'server') server(rest);
else if (cmd === 'client') void client(rest);
else usage(cmd === undefined ? 'a command is required' : `unknown command ${JSON.stringify(cmd)}`);
