#!/usr/bin/env node
// Measures what a delay link does, from outside it (docs/lab.md, "Delay links"): a UDP echo server and a
// client that sends numbered datagrams at a steady rate and reports the round trips (median, p99, min,
// max), the datagrams lost and those that came back out of order or twice. Knows nothing of the device.
//
//   node dist/scripts/lab/delay-rtt.js echo --listen 198.18.0.21:7900
//   node dist/scripts/lab/delay-rtt.js measure --target 198.18.0.21:7900 --count 200 --rate 50 [--json FILE]
//   node dist/scripts/lab/delay-rtt.js measure --target 198.18.0.21:7900 --rate 2000 --until FILE --count 4000
import { createSocket } from 'node:dgram';
import { existsSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { one, UsageError, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';

const MAGIC = 0x736c6472; // 'sldr'
const HEADER_LEN = 8;

export interface RttReport {
  sent: number;
  received: number;
  lost: number;
  /** Answers whose sequence number is below one already received. */
  reordered: number;
  duplicates: number;
  /** Round trips in ms. */
  minMs: number;
  medianMs: number;
  p99Ms: number;
  maxMs: number;
}

/** The q-quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

function parseAddr(text: string | undefined, what: string): { host: string; port: number } {
  const m = text === undefined ? null : /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (m === null || host === undefined || isIP(host) === 0 || port < 1 || port > 65535)
    throw new UsageError(`--${what}: expected ADDR:PORT or [ADDR6]:PORT, got ${JSON.stringify(text)}`);
  return { host, port };
}

function intOpt(args: ParsedArgs, name: string, min: number, max: number): number {
  const v = Number(one(args, name));
  if (!Number.isInteger(v) || v < min || v > max) throw new UsageError(`--${name}: an integer ${min}..${max}, got ${one(args, name)}`);
  return v;
}

const ECHO: CommandSpec = {
  program: 'delay-rtt echo',
  usage: 'delay-rtt.js echo --listen ADDR:PORT',
  about: 'Answers every UDP datagram with itself (until SIGTERM or SIGINT).',
  options: [
    { name: 'listen', value: 'ADDR:PORT', help: 'where to listen' },
    { name: 'help', help: 'this help' },
  ],
  noPositional: true,
};

async function runEcho(args: ParsedArgs): Promise<number> {
  const a = parseAddr(one(args, 'listen'), 'listen');
  const sock = createSocket({ type: isIP(a.host) === 6 ? 'udp6' : 'udp4', recvBufferSize: 4 * 1024 * 1024 });
  sock.on('message', (msg, from) => sock.send(msg, from.port, from.address));
  await new Promise<void>((res, rej) => {
    sock.once('error', rej);
    sock.bind(a.port, a.host, () => res());
  });
  process.stdout.write(`echo listening on ${a.host}:${a.port}\n`);
  await new Promise<void>((res) => {
    process.once('SIGTERM', res);
    process.once('SIGINT', res);
  });
  sock.close();
  return 0;
}

const MEASURE: CommandSpec = {
  program: 'delay-rtt measure',
  usage: 'delay-rtt.js measure --target ADDR:PORT [--count N] [--rate PPS] [--size BYTES] [--until FILE] [--timeout-ms MS] [--json FILE]',
  about:
    'Sends N numbered datagrams at PPS a second (one socket; with --until, until FILE exists and then N more) and prints one JSON line: sent, received, lost, reordered, duplicates, and the round trips (minMs, medianMs, p99Ms, maxMs). Exit 0 when at least one came back.',
  options: [
    { name: 'target', value: 'ADDR:PORT', help: 'the echo server' },
    { name: 'count', value: 'N', help: 'datagrams', default: '200' },
    { name: 'rate', value: 'PPS', help: 'datagrams a second', default: '50' },
    { name: 'size', value: 'BYTES', help: 'payload size (at least 16)', default: '64' },
    {
      name: 'until',
      value: 'FILE',
      help: 'send at the rate for as long as FILE does not exist, then --count more (a stream that spans a change made from outside, however long that takes)',
    },
    { name: 'timeout-ms', value: 'MS', help: 'wait for the last answers', default: '3000' },
    { name: 'json', value: 'FILE', help: 'also write the report and every round trip (ms, by sequence) here' },
    { name: 'help', help: 'this help' },
  ],
  noPositional: true,
};

async function runMeasure(args: ParsedArgs): Promise<number> {
  const t = parseAddr(one(args, 'target'), 'target');
  const count = intOpt(args, 'count', 1, 10_000_000);
  const rate = intOpt(args, 'rate', 1, 1_000_000);
  const size = intOpt(args, 'size', 16, 1400);
  const timeoutMs = intOpt(args, 'timeout-ms', 1, 600_000);
  const until = one(args, 'until');
  const sock = createSocket({ type: isIP(t.host) === 6 ? 'udp6' : 'udp4', recvBufferSize: 4 * 1024 * 1024 });
  // with --until the number sent is known only once FILE exists: the arrays grow as the stream goes
  let sentAt = new Float64Array(count).fill(-1);
  let rtt = new Float64Array(count).fill(-1);
  const grow = () => {
    const s = new Float64Array(sentAt.length * 2).fill(-1);
    const r = new Float64Array(sentAt.length * 2).fill(-1);
    s.set(sentAt);
    r.set(rtt);
    sentAt = s;
    rtt = r;
  };
  let received = 0;
  let reordered = 0;
  let duplicates = 0;
  let highest = -1;
  sock.on('message', (msg) => {
    const now = performance.now();
    if (msg.length < HEADER_LEN || msg.readUInt32BE(0) !== MAGIC) return;
    const seq = msg.readUInt32BE(4);
    if (seq >= sentAt.length || sentAt[seq]! < 0) return;
    if (rtt[seq]! >= 0) {
      duplicates++;
      return;
    }
    rtt[seq] = now - sentAt[seq]!;
    received++;
    if (seq < highest) reordered++;
    else highest = seq;
  });
  await new Promise<void>((res, rej) => {
    sock.once('error', rej);
    sock.connect(t.port, t.host, () => res());
  });
  const buf = Buffer.alloc(size);
  buf.writeUInt32BE(MAGIC, 0);
  const t0 = performance.now();
  let sendErrors = 0;
  let total = until === undefined ? count : Infinity;
  for (let seq = 0; seq < total; seq++) {
    if (total === Infinity && existsSync(until!)) total = seq + count;
    if (seq >= sentAt.length) grow();
    // steady pacing against the clock: a late timer sends the ones due at once
    const due = t0 + (seq * 1000) / rate;
    const wait = due - performance.now();
    if (wait >= 1) await new Promise((r) => setTimeout(r, Math.floor(wait)));
    buf.writeUInt32BE(seq, 4);
    sentAt[seq] = performance.now();
    sock.send(buf, (e) => {
      if (e) sendErrors++;
    });
  }
  const deadline = performance.now() + timeoutMs;
  const sent = total;
  while (received < sent && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  sock.close();
  const rtts = [...rtt].filter((x) => x >= 0).sort((a, b) => a - b);
  const r3 = (x: number) => Number(x.toFixed(3));
  const report: RttReport & { sendErrors: number } = {
    sent,
    received,
    lost: sent - received,
    reordered,
    duplicates,
    minMs: r3(rtts[0] ?? NaN),
    medianMs: r3(quantile(rtts, 0.5)),
    p99Ms: r3(quantile(rtts, 0.99)),
    maxMs: r3(rtts[rtts.length - 1] ?? NaN),
    sendErrors,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
  const file = one(args, 'json');
  if (file !== undefined)
    writeFileSync(file, `${JSON.stringify({ ...report, rttMs: [...rtt.subarray(0, sent)].map((x) => (x < 0 ? null : r3(x))) })}\n`);
  return received > 0 ? 0 : 1;
}

const USAGE = `usage: delay-rtt.js echo|measure [options]   (delay-rtt.js MODE --help)

Round trips through the lab's delay links, measured from outside them (docs/lab.md, "Delay links"):
  echo     a UDP echo server
  measure  numbered datagrams at a steady rate: round trips (median, p99), lost, reordered
`;

export async function main(argv: readonly string[]): Promise<number> {
  const mode = argv[0];
  if (mode === undefined || mode === '--help' || mode === '-h' || mode === 'help') {
    (mode === undefined ? process.stderr : process.stdout).write(USAGE);
    return mode === undefined ? 2 : 0;
  }
  if (mode === 'echo') return runCommandAsync(ECHO, argv.slice(1), runEcho);
  if (mode === 'measure') return runCommandAsync(MEASURE, argv.slice(1), runMeasure);
  process.stderr.write(`delay-rtt: unknown mode ${JSON.stringify(mode)}; modes: echo, measure (see --help)\n`);
  return 2;
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => {
      process.exitCode = rc;
    },
    (e) => {
      process.stderr.write(`delay-rtt: ${(e as Error).stack}\n`);
      process.exitCode = 1;
    },
  );
}
