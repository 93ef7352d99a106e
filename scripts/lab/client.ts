#!/usr/bin/env node
// The lab's traffic and measurement client, run inside a client namespace (or any lab namespace):
//   client.js http    --url http://203.0.113.10/ --count 1000 --concurrency 8 [--rate N] [--source A|A-B|A,B]
//   client.js udp     --target 203.0.113.10:7 --flows 200 [--sources 198.51.100.10-198.51.100.41]
//   client.js ping    --target 198.51.100.1 [--count 3]
//   client.js inject  --interface fab0 --in FRAMES.pcap [--gap-us N]
//   client.js hold    --url http://203.0.113.10/health --connections 500 --duration-ms 6000 [--interval-ms 200]
//   client.js download --url http://203.0.113.10/bytes/16000000 --rate 2000000 [--hold-at 8000000 --release-file F]
// http and udp record every request / flow (source address and port, backend, error, latency), print a
// summary and write the records with --json. Exit status: 0 when everything succeeded, 1 when something
// failed, 2 for bad arguments.
import { request } from 'node:http';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createRequire } from 'node:module';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket as NetSocket } from 'node:net';
import { formatIpv4, formatIpv6, parseIpAddr } from '../../shared/addr.js';
import { finishChecksum, sumBytes } from '../../shared/checksum.js';
import { ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST, ICMP_HEADER_LEN } from '../../shared/icmp.js';
import { ICMPV6_ECHO_REPLY, ICMPV6_ECHO_REQUEST } from '../../shared/icmpv6.js';
import { codecErrorName } from '../../shared/codec-error.js';
import { LINKTYPE_ETHERNET, readPcap } from '../../shared/pcap-file.js';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';

const require = createRequire(import.meta.url);

/** Most addresses a --source/--sources range may expand to. */
export const MAX_SOURCES = 65536;
/** Largest UDP payload of one IPv4 datagram (65535 - 20 - 8). */
export const MAX_UDP_PAYLOAD = 65507;
/** Bytes of an HTTP body kept in a record (the backend name is a few bytes; /bytes/N bodies are counted only). */
const BODY_KEEP_BYTES = 256;

// ---------------------------------------------------------------------------------------------
// Arguments

function intOption(args: ParsedArgs, name: string, min: number, max: number): number {
  const v = one(args, name);
  if (v === undefined) throw new UsageError(`--${name} is required`);
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
    throw new UsageError(`--${name} must be an integer ${min}..${max}, got ${JSON.stringify(v)}`);
  return Number(v);
}

/** "A", "A-B" (inclusive, same family) or "A,B,C" into address texts. */
export function parseAddressList(text: string, option: string): string[] {
  const out: string[] = [];
  for (const part of text.split(',')) {
    const dash = part.indexOf('-');
    if (dash < 0) {
      const a = parseIpAddr(part.trim());
      if (a === null) throw new UsageError(`--${option}: ${JSON.stringify(part)} is not an IP address`);
      out.push(a.text);
      continue;
    }
    const a = parseIpAddr(part.slice(0, dash).trim());
    const b = parseIpAddr(part.slice(dash + 1).trim());
    if (a === null || b === null || a.family !== b.family)
      throw new UsageError(`--${option}: ${JSON.stringify(part)} is not a range FIRST-LAST of one family`);
    const w = Uint32Array.from(a.words);
    const cmp = () => {
      for (let i = 0; i < w.length; i++) if (w[i] !== b.words[i]) return w[i]! < b.words[i]! ? -1 : 1;
      return 0;
    };
    if (cmp() > 0) throw new UsageError(`--${option}: range ${part} ends before it starts`);
    for (;;) {
      out.push(a.family === 4 ? formatIpv4(w[0]!) : formatIpv6(w, 0));
      if (out.length > MAX_SOURCES) throw new UsageError(`--${option}: more than ${MAX_SOURCES} addresses`);
      if (cmp() === 0) break;
      for (let i = w.length - 1; i >= 0; i--) {
        w[i] = (w[i]! + 1) >>> 0;
        if (w[i] !== 0) break;
      }
    }
  }
  return out;
}

/** "203.0.113.10:7" or "[2001:db8:ff::10]:7". */
export function parseTarget(text: string): { host: string; port: number; family: 4 | 6 } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  const a = m === null ? null : parseIpAddr(m[1] ?? m[2]!);
  if (m === null || a === null || Number(m[3]) < 1 || Number(m[3]) > 65535) {
    throw new UsageError(`--target: expected ADDRESS:PORT or [IPV6]:PORT, got ${JSON.stringify(text)}`);
  }
  return { host: a.text, port: Number(m[3]), family: a.family };
}

// ---------------------------------------------------------------------------------------------
// the records: what --json FILE holds, typed for the verifiers (scripts/scenarios/lib, which import
// these types and read a file with readClientJson instead of guessing at field names)

/** The record type of each mode that writes --json. */
export interface ClientRecordOf {
  http: HttpRecord;
  udp: UdpRecord;
  hold: HoldRecord;
  download: DownloadRecord;
}
export type ClientRecordMode = keyof ClientRecordOf;

/** The summary of a hold run: per connection, and the requests on them. */
export interface HoldSummary {
  total: number;
  ok: number;
  failed: number;
  requests: number;
  answered: number;
  movedBackend: number;
  maxGapMs: number;
  elapsedMs: number;
  perBackend: Record<string, number>;
  errors: Record<string, number>;
}

/** The summary type of each mode. */
export interface ClientSummaryOf {
  http: Summary;
  udp: Summary;
  hold: HoldSummary;
  download: { ok: number; failed: number };
}

/** What --json FILE holds; FILE.jsonl holds the records alone, one a line. */
export interface ClientJson<M extends ClientRecordMode> {
  mode: M;
  target: string;
  summary: ClientSummaryOf[M];
  records: ClientRecordOf[M][];
}

// every field of each record type (the compiler checks the lists are complete and exact)
const HTTP_FIELDS = {
  i: 1,
  startMs: 1,
  latencyMs: 1,
  sourceAddress: 1,
  sourcePort: 1,
  status: 1,
  backend: 1,
  bytes: 1,
  body: 1,
  ok: 1,
  error: 1,
} satisfies Record<keyof HttpRecord, 1>;
const UDP_FIELDS = {
  i: 1,
  startMs: 1,
  latencyMs: 1,
  sourceAddress: 1,
  sourcePort: 1,
  backend: 1,
  reply: 1,
  ok: 1,
  error: 1,
} satisfies Record<keyof UdpRecord, 1>;
const HOLD_FIELDS = {
  i: 1,
  sourceAddress: 1,
  sourcePort: 1,
  connectMs: 1,
  startMs: 1,
  endMs: 1,
  requests: 1,
  answered: 1,
  backends: 1,
  maxGapMs: 1,
  ok: 1,
  error: 1,
} satisfies Record<keyof HoldRecord, 1>;
const DOWNLOAD_FIELDS = {
  sourceAddress: 1,
  sourcePort: 1,
  status: 1,
  backend: 1,
  bytes: 1,
  expectedBytes: 1,
  heldMs: 1,
  receivedAtRelease: 1,
  elapsedMs: 1,
  ok: 1,
  error: 1,
} satisfies Record<keyof DownloadRecord, 1>;
const RECORD_FIELDS: { [M in ClientRecordMode]: readonly string[] } = {
  http: Object.keys(HTTP_FIELDS),
  udp: Object.keys(UDP_FIELDS),
  hold: Object.keys(HOLD_FIELDS),
  download: Object.keys(DOWNLOAD_FIELDS),
};

/**
 * Checks that RECORDS are records of MODE: every field of the type present, `ok` a boolean, the source
 * port a number or null. Throws an Error naming WHERE, the record and the field.
 */
export function checkClientRecords<M extends ClientRecordMode>(records: unknown, mode: M, where: string): ClientRecordOf[M][] {
  if (!Array.isArray(records)) throw new Error(`${where}: no records array`);
  records.forEach((r: unknown, i) => {
    if (r === null || typeof r !== 'object' || Array.isArray(r)) throw new Error(`${where}: record ${i} is not an object`);
    const o = r as Record<string, unknown>;
    for (const k of RECORD_FIELDS[mode])
      if (!(k in o)) throw new Error(`${where}: record ${i} has no ${k} (not a client.js ${mode} record)`);
    if (typeof o.ok !== 'boolean') throw new Error(`${where}: record ${i}: ok is not a boolean`);
    if (o.sourcePort !== null && typeof o.sourcePort !== 'number')
      throw new Error(`${where}: record ${i}: sourcePort is not a number or null`);
  });
  return records as ClientRecordOf[M][];
}

/** The --json FILE of a client.js MODE run (FILE.jsonl: the records alone, with mode and target as asked and no summary). */
export function readClientJson<M extends ClientRecordMode>(file: string, mode: M): ClientJson<M> {
  const text = readFileSync(file, 'utf8');
  if (file.endsWith('.jsonl')) {
    const records = text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as unknown);
    return { mode, target: '', summary: null as unknown as ClientJson<M>['summary'], records: checkClientRecords(records, mode, file) };
  }
  const doc = JSON.parse(text) as { mode?: unknown; target?: unknown; summary?: unknown; records?: unknown };
  if (doc === null || typeof doc !== 'object') throw new Error(`${file}: not a client.js --json file`);
  if (doc.mode !== mode) throw new Error(`${file}: the records of client.js ${String(doc.mode)}, not ${mode}`);
  return {
    mode,
    target: String(doc.target),
    summary: doc.summary as ClientJson<M>['summary'],
    records: checkClientRecords(doc.records, mode, file),
  };
}

/** The records of a client.js MODE run (readClientJson(file, mode).records). */
export function readClientRecordsOf<M extends ClientRecordMode>(file: string, mode: M): ClientRecordOf[M][] {
  return readClientJson(file, mode).records;
}

function writeRecords<M extends ClientRecordMode>(file: string, doc: ClientJson<M>): void {
  const text = file.endsWith('.jsonl')
    ? doc.records.map((r) => JSON.stringify(r)).join('\n') + (doc.records.length > 0 ? '\n' : '')
    : `${JSON.stringify(doc, null, 1)}\n`;
  if (file === '-') process.stdout.write(text);
  else writeFileSync(file, text);
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (x: number) => Math.round(x * 1000) / 1000;

/** Runs `count` jobs with at most `concurrency` at once. */
async function runPool(count: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await job(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

export interface Summary {
  total: number;
  ok: number;
  failed: number;
  elapsedMs: number;
  perBackend: Record<string, number>;
  errors: Record<string, number>;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
}

function summarize(
  records: readonly { ok: boolean; backend: string | null; error: string | null; latencyMs: number }[],
  elapsedMs: number,
): Summary {
  const perBackend: Record<string, number> = {};
  const errors: Record<string, number> = {};
  let ok = 0;
  for (const r of records) {
    if (r.ok) ok++;
    if (r.ok && r.backend !== null) perBackend[r.backend] = (perBackend[r.backend] ?? 0) + 1;
    if (r.error !== null) errors[r.error] = (errors[r.error] ?? 0) + 1;
  }
  const lat = records
    .filter((r) => r.ok)
    .map((r) => r.latencyMs)
    .sort((a, b) => a - b);
  return {
    total: records.length,
    ok,
    failed: records.length - ok,
    elapsedMs: round(elapsedMs),
    perBackend: Object.fromEntries(Object.entries(perBackend).sort(([a], [b]) => (a < b ? -1 : 1))),
    errors,
    latencyMs: {
      p50: round(percentile(lat, 50)),
      p90: round(percentile(lat, 90)),
      p99: round(percentile(lat, 99)),
      max: round(lat[lat.length - 1] ?? 0),
    },
  };
}

function printSummary(out: NodeJS.WritableStream, what: string, s: Summary): void {
  const rate = s.elapsedMs > 0 ? Math.round((s.total / s.elapsedMs) * 1000) : 0;
  out.write(
    `${what}: ${s.total} total, ${s.ok} ok, ${s.failed} failed in ${(s.elapsedMs / 1000).toFixed(2)} s (${rate}/s); ` +
      `latency ms p50 ${s.latencyMs.p50} p90 ${s.latencyMs.p90} p99 ${s.latencyMs.p99} max ${s.latencyMs.max}\n`,
  );
  for (const [b, n] of Object.entries(s.perBackend)) out.write(`  backend ${b}: ${n}\n`);
  for (const [e, n] of Object.entries(s.errors)) out.write(`  error ${e}: ${n}\n`);
}

// ---------------------------------------------------------------------------------------------
// http

export interface HttpRecord {
  i: number;
  startMs: number;
  latencyMs: number;
  sourceAddress: string | null;
  sourcePort: number | null;
  status: number | null;
  backend: string | null;
  bytes: number;
  body: string | null;
  ok: boolean;
  error: string | null;
}

function errorName(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err?.code ?? err?.message ?? String(e);
}

function httpOnce(url: URL, i: number, source: string | undefined, timeoutMs: number, t0: bigint): Promise<HttpRecord> {
  return new Promise((resolve) => {
    const start = process.hrtime.bigint();
    const rec: HttpRecord = {
      i,
      startMs: round(Number(start - t0) / 1e6),
      latencyMs: 0,
      sourceAddress: source ?? null,
      sourcePort: null,
      status: null,
      backend: null,
      bytes: 0,
      body: null,
      ok: false,
      error: null,
    };
    let sock: NetSocket | null = null;
    let done = false;
    const notePort = () => {
      if (sock === null) return;
      try {
        if (sock.localPort !== undefined) rec.sourcePort = sock.localPort;
        if (sock.localAddress !== undefined) rec.sourceAddress = sock.localAddress;
      } catch {
        /* not bound yet */
      }
    };
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      notePort();
      rec.latencyMs = round(Number(process.hrtime.bigint() - start) / 1e6);
      rec.error = error;
      rec.ok = error === null && rec.status !== null && rec.status >= 200 && rec.status < 300;
      if (error === null && !rec.ok) rec.error = `status ${rec.status}`;
      resolve(rec);
    };
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const req = request({
      host,
      port: url.port === '' ? 80 : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      agent: false,
      headers: { connection: 'close', host: url.host },
      ...(source !== undefined ? { localAddress: source } : {}),
    });
    const timer = setTimeout(() => {
      notePort();
      req.destroy(new Error('timeout'));
    }, timeoutMs);
    req.on('socket', (s) => {
      sock = s as NetSocket;
      s.once('connect', notePort);
      // connect(2) runs on a later tick; once it has, the source port is bound and readable (and cached
      // by node), so a refused or timed-out connection still reports the port it used
      setImmediate(notePort);
    });
    req.on('error', (e) => finish(errorName(e) === 'timeout' ? 'timeout' : errorName(e)));
    req.on('response', (res) => {
      rec.status = res.statusCode ?? null;
      const hb = res.headers['x-backend'];
      if (typeof hb === 'string') rec.backend = hb;
      const kept: Buffer[] = [];
      let keptLen = 0;
      res.on('data', (d: Buffer) => {
        rec.bytes += d.length;
        if (keptLen < BODY_KEEP_BYTES) {
          kept.push(d.subarray(0, BODY_KEEP_BYTES - keptLen));
          keptLen += Math.min(d.length, BODY_KEEP_BYTES - keptLen);
        }
      });
      res.on('aborted', () => finish('aborted'));
      res.on('error', (e) => finish(errorName(e)));
      res.on('end', () => {
        const body = Buffer.concat(kept).toString('utf8');
        rec.body = rec.bytes <= BODY_KEEP_BYTES ? body : null;
        if (rec.backend === null && rec.body !== null) rec.backend = rec.body.trim();
        const cl = res.headers['content-length'];
        if (cl !== undefined && Number(cl) !== rec.bytes) {
          finish(`short body ${rec.bytes}/${cl}`);
          return;
        }
        finish(null);
      });
    });
    req.end();
  });
}

const HTTP_OPTIONS: readonly OptionSpec[] = [
  { name: 'url', value: 'URL', help: 'http://ADDRESS[:PORT]/PATH; IPv6 as http://[2001:db8:ff::10]/' },
  { name: 'count', value: 'N', help: 'requests, each on a new TCP connection', default: '1' },
  { name: 'concurrency', value: 'N', help: 'requests in flight at once', default: '1' },
  {
    name: 'rate',
    value: 'N',
    help: 'start request i no earlier than i/N s after the start: a steady stream of N new connections per second (as long as --concurrency allows); default: as fast as --concurrency allows',
  },
  { name: 'source', value: 'ADDRS', help: 'local address(es) to connect from: A, A-B or A,B,...; round robin per request' },
  { name: 'timeout-ms', value: 'MS', help: 'per request, connect to last byte', default: '3000' },
  {
    name: 'end-file',
    value: 'FILE',
    help: 'start no request once FILE exists (polled every 50 ms; --count is then at most): a scenario ends the stream after its change',
  },
  { name: 'json', value: 'FILE', help: 'write {mode,target,summary,records}; FILE.jsonl: one record per line; -: stdout' },
  { name: 'help', help: 'this help' },
];

const HTTP_COMMAND: CommandSpec = {
  program: 'client http',
  usage: 'client.js http --url URL [options]',
  options: HTTP_OPTIONS,
  errorSuffix: ' (see client.js http --help)',
  about:
    'HTTP GETs, a new TCP connection each (Connection: close); records source port, status, backend (X-Backend or body), error and latency.',
};

async function runHttp(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const urlText = one(args, 'url');
  if (urlText === undefined) throw new UsageError('--url is required, e.g. --url http://203.0.113.10/');
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw new UsageError(`--url: not a URL: ${JSON.stringify(urlText)}`);
  }
  if (url.protocol !== 'http:') throw new UsageError(`--url: only http:// URLs, got ${url.protocol}`);
  const count = intOption(args, 'count', 1, 10_000_000);
  const concurrency = intOption(args, 'concurrency', 1, 4096);
  const rate = one(args, 'rate') === undefined ? 0 : intOption(args, 'rate', 1, 1_000_000);
  const timeoutMs = intOption(args, 'timeout-ms', 1, 3_600_000);
  const srcText = one(args, 'source');
  const sources = srcText === undefined ? [] : parseAddressList(srcText, 'source');
  const json = one(args, 'json');
  const endFile = one(args, 'end-file');
  let endSeen = false;
  const endPoll =
    endFile === undefined
      ? null
      : setInterval(() => {
          if (existsSync(endFile)) endSeen = true;
        }, 50);
  const all: (HttpRecord | undefined)[] = new Array(count);
  const t0 = process.hrtime.bigint();
  await runPool(count, concurrency, async (i) => {
    if (endSeen) return;
    if (rate > 0) {
      // a timer may fire up to a millisecond early (libuv's clock): look again until the time has come
      const dueMs = (i * 1000) / rate;
      const leftMs = () => dueMs - Number(process.hrtime.bigint() - t0) / 1e6;
      for (let left = leftMs(); left > 0; left = leftMs()) await new Promise((r) => setTimeout(r, Math.ceil(left)));
      if (endSeen) return;
    }
    all[i] = await httpOnce(url, i, sources.length > 0 ? sources[i % sources.length] : undefined, timeoutMs, t0);
  });
  if (endPoll !== null) clearInterval(endPoll);
  const records = all.filter((r): r is HttpRecord => r !== undefined); // --end-file: the requests started before it
  const summary = summarize(records, Number(process.hrtime.bigint() - t0) / 1e6);
  const out = json === '-' ? process.stderr : process.stdout;
  printSummary(out, `http ${url.href}`, summary);
  if (json !== undefined) writeRecords(json, { mode: 'http', target: url.href, summary, records });
  return summary.failed === 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// udp

export interface UdpRecord {
  i: number;
  startMs: number;
  latencyMs: number;
  sourceAddress: string | null;
  sourcePort: number | null;
  backend: string | null;
  reply: string | null;
  ok: boolean;
  error: string | null;
}

function udpOnce(
  target: { host: string; port: number; family: 4 | 6 },
  i: number,
  source: string | undefined,
  payload: string,
  timeoutMs: number,
  t0: bigint,
  datagrams = 1,
  keep: UdpSocket[] | null = null,
): Promise<UdpRecord> {
  return new Promise((resolve) => {
    const start = process.hrtime.bigint();
    const rec: UdpRecord = {
      i,
      startMs: round(Number(start - t0) / 1e6),
      latencyMs: 0,
      sourceAddress: source ?? null,
      sourcePort: null,
      backend: null,
      reply: null,
      ok: false,
      error: null,
    };
    const sock: UdpSocket = createSocket(target.family === 4 ? 'udp4' : 'udp6');
    let done = false;
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      rec.latencyMs = round(Number(process.hrtime.bigint() - start) / 1e6);
      rec.error = error;
      rec.ok = error === null;
      if (keep !== null) {
        // --distinct-ports: closed when the run ends, so no later flow gets this source port
        sock.removeAllListeners('message');
        keep.push(sock);
      } else {
        try {
          sock.close();
        } catch {
          /* already closed */
        }
      }
      resolve(rec);
    };
    let timer = setTimeout(() => finish('timeout'), timeoutMs);
    // --datagrams N: datagram k (0..N-1) is the payload and " #k", sent once the previous one is echoed
    let k = 0;
    const expected = () => (datagrams === 1 ? payload : `${payload} #${k}`);
    const send = () =>
      sock.send(expected(), (e) => {
        if (e) finish(errorName(e));
      });
    // a connected UDP socket reports ICMP port-unreachable as an error: without a handler node dies
    sock.on('error', (e) => finish(errorName(e)));
    sock.on('message', (msg) => {
      if (done) return;
      const text = msg.toString('utf8');
      rec.reply = text.length <= BODY_KEEP_BYTES ? text : text.slice(0, BODY_KEEP_BYTES);
      const sp = text.indexOf(' ');
      const backend = sp > 0 ? text.slice(0, sp) : null;
      if (k > 0 && backend !== rec.backend) {
        finish('moved backend');
        return;
      }
      rec.backend = backend;
      if (!(sp > 0 && text.slice(sp + 1) === expected())) {
        finish('echo mismatch');
        return;
      }
      if (++k >= datagrams) {
        finish(null);
        return;
      }
      clearTimeout(timer);
      timer = setTimeout(() => finish('timeout'), timeoutMs);
      send();
    });
    sock.bind({ port: 0, ...(source !== undefined ? { address: source } : {}) }, () => {
      const a = sock.address();
      rec.sourcePort = a.port;
      if (source === undefined && a.address !== '0.0.0.0' && a.address !== '::') rec.sourceAddress = a.address;
      sock.connect(target.port, target.host, () => {
        try {
          const local = sock.address();
          rec.sourceAddress = local.address;
        } catch {
          /* closed */
        }
        send();
      });
    });
  });
}

const UDP_OPTIONS: readonly OptionSpec[] = [
  { name: 'target', value: 'ADDR:PORT', help: 'the VIP and port, e.g. 203.0.113.10:7 or [2001:db8:ff::10]:7' },
  { name: 'flows', value: 'N', help: 'flows: each a new socket (new source port) sending one datagram', default: '1' },
  {
    name: 'datagrams',
    value: 'N',
    help: 'datagrams per flow, each sent once the previous one is echoed (datagram k: the payload and " #k"); every echo must match, from one backend',
    default: '1',
  },
  {
    name: 'sources',
    value: 'ADDRS',
    help: 'local addresses, round robin per flow: A, A-B or A,B,... (client1 has 198.51.100.10-198.51.100.41)',
  },
  { name: 'concurrency', value: 'N', help: 'flows in flight at once', default: '32' },
  {
    name: 'distinct-ports',
    help: "keep each flow's socket open until the run ends: no two flows share a source port (the kernel may otherwise give a closed flow's port to a later one)",
  },
  { name: 'payload', value: 'TEXT', help: 'datagram text; {i} is replaced by the flow number', default: 'flow {i}' },
  {
    name: 'size',
    value: 'BYTES',
    help: `datagram size: the text padded with '.' (or cut) to BYTES, 1..${MAX_UDP_PAYLOAD}; above the MTU it is sent in IP fragments`,
  },
  { name: 'timeout-ms', value: 'MS', help: 'wait for the echo this long', default: '1000' },
  { name: 'json', value: 'FILE', help: 'write {mode,target,summary,records}; FILE.jsonl: one record per line; -: stdout' },
  { name: 'help', help: 'this help' },
];

const UDP_COMMAND: CommandSpec = {
  program: 'client udp',
  usage: 'client.js udp --target ADDR:PORT [options]',
  options: UDP_OPTIONS,
  errorSuffix: ' (see client.js udp --help)',
  about: 'UDP flows to an echo service (the lab backends answer "NIC " + the datagram); records source address and port and the backend.',
};

async function runUdp(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const t = one(args, 'target');
  if (t === undefined) throw new UsageError('--target is required, e.g. --target 203.0.113.10:7');
  const target = parseTarget(t);
  const flows = intOption(args, 'flows', 1, 10_000_000);
  const datagrams = intOption(args, 'datagrams', 1, 1_000_000);
  const keep: UdpSocket[] | null = args.flags.has('distinct-ports') ? [] : null;
  const concurrency = intOption(args, 'concurrency', 1, 4096);
  const timeoutMs = intOption(args, 'timeout-ms', 1, 3_600_000);
  const srcText = one(args, 'sources');
  const sources = srcText === undefined ? [] : parseAddressList(srcText, 'sources');
  for (const s of sources) {
    if ((s.includes(':') ? 6 : 4) !== target.family)
      throw new UsageError(`--sources: ${s} is not of the target's family (IPv${target.family})`);
  }
  const payload = one(args, 'payload')!;
  const size = one(args, 'size') === undefined ? null : intOption(args, 'size', 1, MAX_UDP_PAYLOAD);
  const json = one(args, 'json');
  const datagram = (i: number) => {
    const text = payload.replaceAll('{i}', String(i));
    return size === null ? text : text.length >= size ? text.slice(0, size) : text + '.'.repeat(size - text.length);
  };
  const records: UdpRecord[] = new Array(flows);
  const t0 = process.hrtime.bigint();
  await runPool(flows, concurrency, async (i) => {
    records[i] = await udpOnce(
      target,
      i,
      sources.length > 0 ? sources[i % sources.length] : undefined,
      datagram(i),
      timeoutMs,
      t0,
      datagrams,
      keep,
    );
  });
  for (const sock of keep ?? []) sock.close();
  const summary = summarize(records, Number(process.hrtime.bigint() - t0) / 1e6);
  const out = json === '-' ? process.stderr : process.stdout;
  const name = target.family === 6 ? `[${target.host}]:${target.port}` : `${target.host}:${target.port}`;
  printSummary(out, `udp ${name}`, summary);
  if (json !== undefined) writeRecords(json, { mode: 'udp', target: name, summary, records });
  return summary.failed === 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// hold: long-lived, chatty TCP connections (keep-alive HTTP), e.g. across a MUX failure

export interface HoldRecord {
  i: number;
  sourceAddress: string | null;
  sourcePort: number | null;
  connectMs: number | null;
  startMs: number;
  endMs: number;
  requests: number;
  answered: number;
  backends: string[];
  maxGapMs: number;
  ok: boolean;
  error: string | null;
}

/**
 * One connection: connect, then GET the URL's path on it again and again (HTTP/1.1 keep-alive), each
 * after the previous answer plus intervalMs, until durationMs is over (or `ended()`); then close it. It fails on a
 * reset, an error, a request without an answer within timeoutMs, or a close by the server.
 */
function holdOnce(
  url: URL,
  i: number,
  source: string | undefined,
  durationMs: number,
  intervalMs: number,
  timeoutMs: number,
  t0: bigint,
  ended: () => boolean = () => false,
  maxRequests = 0,
): Promise<HoldRecord> {
  return new Promise((resolve) => {
    const now = () => Number(process.hrtime.bigint() - t0) / 1e6;
    const start = now();
    const rec: HoldRecord = {
      i,
      sourceAddress: source ?? null,
      sourcePort: null,
      connectMs: null,
      startMs: round(start),
      endMs: 0,
      requests: 0,
      answered: 0,
      backends: [],
      maxGapMs: 0,
      ok: false,
      error: null,
    };
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const sock = netConnect({
      host,
      port: url.port === '' ? 80 : Number(url.port),
      ...(source !== undefined ? { localAddress: source } : {}),
    });
    sock.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    let sentAt = 0;
    let done = false;
    let timer: NodeJS.Timeout | null = null;
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      if (timer !== null) clearTimeout(timer);
      rec.endMs = round(now());
      rec.error = error;
      rec.ok = error === null && rec.requests === rec.answered && rec.answered > 0;
      if (error === null && !rec.ok) rec.error = 'no answer';
      if (error === null) sock.end();
      else sock.destroy();
      resolve(rec);
    };
    const ask = () => {
      if (done) return;
      if (now() - start >= durationMs || ended() || (maxRequests > 0 && rec.answered >= maxRequests)) {
        finish(null);
        return;
      }
      rec.requests++;
      sentAt = now();
      sock.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: keep-alive\r\n\r\n`);
      timer = setTimeout(() => finish('timeout'), timeoutMs);
    };
    sock.once('connect', () => {
      rec.connectMs = round(now() - start);
      rec.sourcePort = sock.localPort ?? null;
      rec.sourceAddress = sock.localAddress ?? rec.sourceAddress;
      ask();
    });
    sock.on('data', (d: Buffer) => {
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? '0');
        if (buf.length < end + 4 + len) return;
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? '0');
        const backend = /\r\nx-backend:\s*([^\r]*)/i.exec(head)?.[1] ?? null;
        buf = buf.subarray(end + 4 + len);
        if (timer !== null) clearTimeout(timer);
        timer = null;
        if (status !== 200) {
          finish(`status ${status}`);
          return;
        }
        rec.answered++;
        rec.maxGapMs = Math.max(rec.maxGapMs, round(now() - sentAt));
        if (backend !== null && !rec.backends.includes(backend)) rec.backends.push(backend);
        setTimeout(ask, intervalMs);
      }
    });
    sock.on('error', (e) => finish(errorName(e)));
    sock.on('close', () => finish(done ? null : 'closed by the server'));
  });
}

const HOLD_OPTIONS: readonly OptionSpec[] = [
  { name: 'url', value: 'URL', help: 'http://ADDRESS[:PORT]/PATH asked again and again on each connection (e.g. /health)' },
  { name: 'connections', value: 'N', help: 'connections, all opened at the start', default: '1' },
  { name: 'duration-ms', value: 'MS', help: 'how long each connection lives (with --end-file: at most)', default: '5000' },
  {
    name: 'end-file',
    value: 'FILE',
    help: 'end every connection (after its current answer) once FILE exists, polled every 50 ms: a scenario ends them after its change, so they outlive it by construction',
  },
  { name: 'interval-ms', value: 'MS', help: 'pause between an answer and the next request', default: '200' },
  {
    name: 'requests',
    value: 'N',
    help: 'end each connection after N answers (0: only --duration-ms or --end-file end it)',
    default: '0',
  },
  { name: 'source', value: 'ADDRS', help: 'local address(es): A, A-B or A,B,...; round robin per connection' },
  { name: 'timeout-ms', value: 'MS', help: 'per request', default: '10000' },
  { name: 'json', value: 'FILE', help: 'write {mode,target,summary,records}' },
  { name: 'help', help: 'this help' },
];

const HOLD_COMMAND: CommandSpec = {
  program: 'client hold',
  usage: 'client.js hold --url URL --connections N --duration-ms MS [options]',
  options: HOLD_OPTIONS,
  errorSuffix: ' (see client.js hold --help)',
  about:
    'Long-lived keep-alive HTTP connections, each asking again and again for its whole life; records per connection the requests, answers, backends seen (one expected), the longest wait and any error (a reset is ECONNRESET).',
};

async function runHold(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const urlText = one(args, 'url');
  if (urlText === undefined) throw new UsageError('--url is required');
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw new UsageError(`--url: not a URL: ${JSON.stringify(urlText)}`);
  }
  if (url.protocol !== 'http:') throw new UsageError('--url: only http:// URLs');
  const n = intOption(args, 'connections', 1, 100_000);
  const durationMs = intOption(args, 'duration-ms', 1, 3_600_000);
  const intervalMs = intOption(args, 'interval-ms', 0, 3_600_000);
  const timeoutMs = intOption(args, 'timeout-ms', 1, 3_600_000);
  const maxRequests = intOption(args, 'requests', 0, 100_000_000);
  const srcText = one(args, 'source');
  const sources = srcText === undefined ? [] : parseAddressList(srcText, 'source');
  const json = one(args, 'json');
  const endFile = one(args, 'end-file');
  let endSeen = false;
  const endPoll =
    endFile === undefined
      ? null
      : setInterval(() => {
          if (existsSync(endFile)) endSeen = true;
        }, 50);
  const t0 = process.hrtime.bigint();
  const records = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      holdOnce(
        url,
        i,
        sources.length > 0 ? sources[i % sources.length] : undefined,
        durationMs,
        intervalMs,
        timeoutMs,
        t0,
        () => endSeen,
        maxRequests,
      ),
    ),
  );
  if (endPoll !== null) clearInterval(endPoll);
  const ok = records.filter((r) => r.ok).length;
  const errors: Record<string, number> = {};
  for (const r of records) if (r.error !== null) errors[r.error] = (errors[r.error] ?? 0) + 1;
  const perBackend: Record<string, number> = {};
  for (const r of records) for (const b of r.backends) perBackend[b] = (perBackend[b] ?? 0) + 1;
  const summary: HoldSummary = {
    total: n,
    ok,
    failed: n - ok,
    requests: records.reduce((a, r) => a + r.requests, 0),
    answered: records.reduce((a, r) => a + r.answered, 0),
    movedBackend: records.filter((r) => r.backends.length > 1).length,
    maxGapMs: Math.max(0, ...records.map((r) => r.maxGapMs)),
    elapsedMs: round(Number(process.hrtime.bigint() - t0) / 1e6),
    perBackend,
    errors,
  };
  const out = json === '-' ? process.stderr : process.stdout;
  out.write(
    `hold ${url.href}: ${n} connections, ${ok} ok, ${n - ok} failed; ${summary.answered}/${summary.requests} requests answered; ` +
      `${summary.movedBackend} saw more than one backend; longest wait ${summary.maxGapMs} ms\n`,
  );
  for (const [e, k] of Object.entries(errors)) out.write(`  error ${e}: ${k}\n`);
  if (json !== undefined) writeRecords(json, { mode: 'hold', target: url.href, summary, records });
  return ok === n && summary.movedBackend === 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// download (one long, paced transfer that a scenario can make outlive a change by construction)

export interface DownloadRecord {
  sourceAddress: string | null;
  sourcePort: number | null;
  status: number | null;
  backend: string | null;
  bytes: number;
  expectedBytes: number | null;
  heldMs: number;
  receivedAtRelease: number | null;
  elapsedMs: number;
  ok: boolean;
  error: string | null;
}

const DOWNLOAD_OPTIONS: readonly OptionSpec[] = [
  { name: 'url', value: 'URL', help: 'http://ADDRESS[:PORT]/PATH of a long body, e.g. http://203.0.113.10/bytes/16000000' },
  {
    name: 'rate',
    value: 'BYTES',
    help: 'read at most BYTES a second (the socket is paused when ahead: TCP flow control paces the sender)',
    default: '2000000',
  },
  { name: 'hold-at', value: 'BYTES', help: 'once this much is read, stop reading until --release-file exists (0: never)', default: '0' },
  {
    name: 'release-file',
    value: 'FILE',
    help: 'the scenario creates it after its change; the client notes how much it had read when it first saw it (polled every 20 ms)',
  },
  { name: 'source', value: 'ADDR', help: 'local address to connect from' },
  { name: 'timeout-ms', value: 'MS', help: 'for the whole transfer', default: '120000' },
  { name: 'json', value: 'FILE', help: 'write {mode,target,summary,records} (one record)' },
  { name: 'help', help: 'this help' },
];

function downloadOnce(
  url: URL,
  rate: number,
  holdAt: number,
  releaseFile: string | undefined,
  source: string | undefined,
  timeoutMs: number,
): Promise<DownloadRecord> {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const elapsedMs = () => Number(process.hrtime.bigint() - t0) / 1e6;
    const rec: DownloadRecord = {
      sourceAddress: null,
      sourcePort: null,
      status: null,
      backend: null,
      bytes: 0,
      expectedBytes: null,
      heldMs: 0,
      receivedAtRelease: null,
      elapsedMs: 0,
      ok: false,
      error: null,
    };
    let done = false;
    let heldSince: number | null = null;
    let res: import('node:http').IncomingMessage | null = null;
    let paceTimer: NodeJS.Timeout | null = null;
    const released = () => rec.receivedAtRelease !== null;
    // the release file, polled for the whole transfer: the bytes read when it first appears
    const poll = setInterval(() => {
      if (releaseFile === undefined || released() || !existsSync(releaseFile)) return;
      rec.receivedAtRelease = rec.bytes;
      if (heldSince !== null) {
        rec.heldMs += elapsedMs() - heldSince;
        heldSince = null;
        pump();
      }
    }, 20);
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearInterval(poll);
      if (paceTimer !== null) clearTimeout(paceTimer);
      rec.elapsedMs = round(elapsedMs());
      rec.heldMs = round(rec.heldMs);
      rec.error = error;
      rec.ok = error === null && rec.status === 200 && rec.expectedBytes !== null && rec.bytes === rec.expectedBytes;
      if (error === null && !rec.ok)
        rec.error = rec.status !== 200 ? `status ${rec.status}` : `short body ${rec.bytes}/${rec.expectedBytes}`;
      resolve(rec);
    };
    // reading: paused while ahead of the rate, or at the hold point until released
    const pump = () => {
      if (res === null || done) return;
      if (holdAt > 0 && rec.bytes >= holdAt && releaseFile !== undefined && !released()) {
        if (heldSince === null) {
          heldSince = elapsedMs();
          process.stdout.write(`held ${rec.sourceAddress} ${rec.sourcePort} ${rec.bytes}\n`);
        }
        res.pause();
        return;
      }
      const aheadMs = (rec.bytes / rate) * 1000 - elapsedMs() + rec.heldMs;
      if (aheadMs > 1) {
        res.pause();
        if (paceTimer === null)
          paceTimer = setTimeout(() => {
            paceTimer = null;
            pump();
          }, aheadMs);
        return;
      }
      res.resume();
    };
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const req = request({
      host,
      port: url.port === '' ? 80 : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      agent: false,
      headers: { connection: 'close', host: url.host },
      ...(source !== undefined ? { localAddress: source } : {}),
    });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), timeoutMs);
    req.on('socket', (s) => {
      s.once('connect', () => {
        rec.sourceAddress = (s as NetSocket).localAddress ?? null;
        rec.sourcePort = (s as NetSocket).localPort ?? null;
        process.stdout.write(`connected ${rec.sourceAddress} ${rec.sourcePort}\n`);
      });
    });
    req.on('error', (e) => finish(errorName(e) === 'timeout' ? 'timeout' : errorName(e)));
    req.on('response', (r) => {
      res = r;
      rec.status = r.statusCode ?? null;
      const hb = r.headers['x-backend'];
      if (typeof hb === 'string') rec.backend = hb;
      const cl = r.headers['content-length'];
      rec.expectedBytes = cl === undefined ? null : Number(cl);
      r.on('data', (d: Buffer) => {
        rec.bytes += d.length;
        pump();
      });
      r.on('aborted', () => finish('aborted'));
      r.on('error', (e) => finish(errorName(e)));
      r.on('end', () => finish(null));
      pump();
    });
    req.end();
  });
}

const DOWNLOAD_COMMAND: CommandSpec = {
  program: 'client download',
  usage: 'client.js download --url URL [--rate BYTES] [--hold-at BYTES --release-file FILE] [options]',
  about:
    'One HTTP download on one connection, read at a steady rate. Prints "connected ADDR PORT" once connected, "held ADDR PORT BYTES" if it stops at --hold-at, ' +
    'and at the end "ADDR PORT BYTES STATUS". With --hold-at and --release-file a scenario makes the transfer outlive its change by construction: ' +
    'the client reads no further than --hold-at before the file exists, so the sender still has the rest to send after it (less what the kernel buffers). ' +
    'The record says how much it had read when the file appeared (receivedAtRelease) and how long it waited (heldMs).',
  options: DOWNLOAD_OPTIONS,
  errorSuffix: ' (see client.js download --help)',
};

async function runDownload(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const urlText = one(args, 'url');
  if (urlText === undefined) throw new UsageError('--url is required');
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw new UsageError(`--url: not a URL: ${JSON.stringify(urlText)}`);
  }
  if (url.protocol !== 'http:') throw new UsageError('--url: only http:// URLs');
  const rate = intOption(args, 'rate', 1000, 10_000_000_000);
  const holdAt = intOption(args, 'hold-at', 0, 1_000_000_000_000);
  const releaseFile = one(args, 'release-file');
  if (holdAt > 0 && releaseFile === undefined) throw new UsageError('--hold-at needs --release-file (what ends the hold)');
  const timeoutMs = intOption(args, 'timeout-ms', 1, 3_600_000);
  const source = one(args, 'source');
  if (source !== undefined && parseIpAddr(source) === null)
    throw new UsageError(`--source: ${JSON.stringify(source)} is not an IP address`);
  const json = one(args, 'json');
  const r = await downloadOnce(url, rate, holdAt, releaseFile, source, timeoutMs);
  process.stdout.write(`${r.sourceAddress} ${r.sourcePort} ${r.bytes} ${r.status ?? 0}\n`);
  if (r.error !== null) process.stderr.write(`download ${url.href}: ${r.error}\n`);
  if (json !== undefined)
    writeRecords(json, { mode: 'download', target: url.href, summary: { ok: r.ok ? 1 : 0, failed: r.ok ? 0 : 1 }, records: [r] });
  return r.ok ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// ping (ICMP echo over a raw socket: the lab has no ping binary)

interface RawSocket {
  on(event: 'message', l: (buf: Buffer, source: string) => void): void;
  on(event: 'error', l: (e: Error) => void): void;
  send(buf: Buffer, off: number, len: number, addr: string, after: (e: Error | null, bytes: number) => void): void;
  close(): void;
}
interface RawModule {
  createSocket(o: { protocol: number; addressFamily?: number }): RawSocket;
  AddressFamily: { IPv4: number; IPv6: number };
  Protocol: { ICMP: number; ICMPv6: number };
}

const PING_OPTIONS: readonly OptionSpec[] = [
  { name: 'target', value: 'ADDR', help: 'IPv4 or IPv6 address' },
  { name: 'count', value: 'N', help: 'echo requests', default: '3' },
  { name: 'interval-ms', value: 'MS', help: 'between requests', default: '200' },
  { name: 'timeout-ms', value: 'MS', help: 'wait for the last reply', default: '1000' },
  { name: 'help', help: 'this help' },
];

const PING_COMMAND: CommandSpec = {
  program: 'client ping',
  usage: 'client.js ping --target ADDR [options]',
  options: PING_OPTIONS,
  errorSuffix: ' (see client.js ping --help)',
  about: 'ICMP / ICMPv6 echo over a raw socket (root). Exit 0 when at least one reply came back, 1 when none did.',
};

async function runPing(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const t = one(args, 'target');
  const target = t === undefined ? null : parseIpAddr(t);
  if (target === null)
    throw new UsageError(`--target: an IPv4 or IPv6 address is required${t === undefined ? '' : `, got ${JSON.stringify(t)}`}`);
  const count = intOption(args, 'count', 1, 1_000_000);
  const intervalMs = intOption(args, 'interval-ms', 0, 3_600_000);
  const timeoutMs = intOption(args, 'timeout-ms', 1, 3_600_000);
  const raw = require('raw-socket') as RawModule;
  const v6 = target.family === 6;
  const sock = raw.createSocket(
    v6 ? { protocol: raw.Protocol.ICMPv6, addressFamily: raw.AddressFamily.IPv6 } : { protocol: raw.Protocol.ICMP },
  );
  const id = process.pid & 0xffff;
  const sent = new Map<number, bigint>();
  const rtts: number[] = [];
  sock.on('error', (e) => process.stderr.write(`ping: socket error: ${e.message}\n`));
  sock.on('message', (buf, source) => {
    // IPv4 raw sockets deliver the IP header too; IPv6 raw sockets deliver ICMPv6 only
    const off = v6 ? 0 : (buf[0]! & 0x0f) * 4;
    if (buf.length < off + ICMP_HEADER_LEN) return;
    if (buf[off] !== (v6 ? ICMPV6_ECHO_REPLY : ICMP_ECHO_REPLY)) return;
    if (buf.readUInt16BE(off + 4) !== id || parseIpAddr(source)?.text !== target.text) return;
    const seq = buf.readUInt16BE(off + 6);
    const at = sent.get(seq);
    if (at === undefined) return;
    sent.delete(seq);
    const ms = Number(process.hrtime.bigint() - at) / 1e6;
    rtts.push(ms);
    process.stdout.write(`reply from ${target.text}: seq ${seq} time ${ms.toFixed(3)} ms\n`);
  });
  for (let seq = 1; seq <= count; seq++) {
    const pkt = Buffer.alloc(ICMP_HEADER_LEN + 32, 0x61);
    pkt[0] = v6 ? ICMPV6_ECHO_REQUEST : ICMP_ECHO_REQUEST;
    pkt[1] = 0;
    pkt.writeUInt16BE(0, 2);
    pkt.writeUInt16BE(id, 4);
    pkt.writeUInt16BE(seq, 6);
    // the kernel fills in the ICMPv6 checksum (it needs the pseudo-header); ICMPv4 has none
    if (!v6) pkt.writeUInt16BE(finishChecksum(sumBytes(pkt, 0, pkt.length, 0)), 2);
    sent.set(seq, process.hrtime.bigint());
    await new Promise<void>((res) =>
      sock.send(pkt, 0, pkt.length, target.text, (e) => {
        if (e) process.stderr.write(`ping: send seq ${seq}: ${e.message}\n`);
        res();
      }),
    );
    if (seq < count) await new Promise((r) => setTimeout(r, intervalMs));
  }
  const deadline = Date.now() + timeoutMs;
  while (sent.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  sock.close();
  process.stdout.write(`ping ${target.text}: ${count} sent, ${rtts.length} received\n`);
  return rtts.length > 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// inject

interface CapHandle {
  open(device: string, filter: string, bufSize: number, buffer: Buffer): string;
  send(buffer: Buffer, size?: number): void;
  close(): void;
}

const INJECT_OPTIONS: readonly OptionSpec[] = [
  { name: 'interface', value: 'IF', help: 'the interface to send on (in the current namespace)' },
  { name: 'in', value: 'FILE', help: 'a pcap file (not pcapng) of Ethernet frames' },
  { name: 'gap-us', value: 'N', help: 'pause between frames, microseconds', default: '0' },
  { name: 'allow-errors', help: 'exit 0 even when some frames could not be sent (for deliberately oversized frames)' },
  { name: 'help', help: 'this help' },
];

function sleepUs(us: number): Promise<void> {
  if (us >= 2000) return new Promise((r) => setTimeout(r, Math.round(us / 1000)));
  const end = process.hrtime.bigint() + BigInt(us) * 1000n;
  while (process.hrtime.bigint() < end) {
    /* short gaps: spin, timers are too coarse */
  }
  return Promise.resolve();
}

const INJECT_COMMAND: CommandSpec = {
  program: 'client inject',
  usage: 'client.js inject --interface IF --in FRAMES.pcap [--gap-us N]',
  options: INJECT_OPTIONS,
  errorSuffix: ' (see client.js inject --help)',
  about:
    'Sends every frame of a pcap file on an interface with libpcap (cap), as it is: for malformed and hand-built frames. Errors are reported per frame.',
};

async function runInject(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const iface = one(args, 'interface');
  const file = one(args, 'in');
  if (iface === undefined) throw new UsageError('--interface is required');
  if (file === undefined) throw new UsageError('--in is required');
  const gapUs = intOption(args, 'gap-us', 0, 60_000_000);
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    process.stderr.write(`inject: cannot read ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const pcap = readPcap(bytes);
  if (typeof pcap === 'number') {
    process.stderr.write(`inject: ${file} is not a pcap file (${codecErrorName(pcap)}); convert pcapng with 'editcap -F pcap IN OUT'\n`);
    return 1;
  }
  if (pcap.linkType !== LINKTYPE_ETHERNET) {
    process.stderr.write(`inject: ${file} has link type ${pcap.linkType}, not Ethernet (1)\n`);
    return 1;
  }
  if (pcap.truncated)
    process.stderr.write(`inject: warning: ${file} ends in a truncated record; sending the ${pcap.packets.length} whole ones\n`);
  const { Cap } = require('cap') as { Cap: new () => CapHandle };
  const cap = new Cap();
  try {
    // a filter that matches nothing: we only send, and should not copy every frame on the link
    cap.open(iface, 'less 1', 10 * 1024 * 1024, Buffer.alloc(65536));
  } catch (e) {
    process.stderr.write(`inject: cannot open ${iface}: ${(e as Error).message}\n`);
    return 1;
  }
  let sent = 0;
  let failed = 0;
  for (let i = 0; i < pcap.packets.length; i++) {
    const p = pcap.packets[i]!;
    if (p.data.length < p.origLen)
      process.stderr.write(`inject: frame ${i + 1}: captured ${p.data.length} of ${p.origLen} bytes; sending what was captured\n`);
    const buf = Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength);
    try {
      cap.send(buf, buf.length);
      sent++;
    } catch (e) {
      failed++;
      process.stderr.write(`inject: frame ${i + 1} (${buf.length} bytes): ${(e as Error).message}\n`);
    }
    if (gapUs > 0 && i + 1 < pcap.packets.length) await sleepUs(gapUs);
  }
  cap.close();
  process.stdout.write(`inject ${file} -> ${iface}: ${pcap.packets.length} frames, ${sent} sent, ${failed} failed\n`);
  return failed === 0 || args.flags.has('allow-errors') ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------

const MODES: Record<string, [CommandSpec, (args: ParsedArgs) => Promise<number>]> = {
  http: [HTTP_COMMAND, runHttp],
  udp: [UDP_COMMAND, runUdp],
  hold: [HOLD_COMMAND, runHold],
  download: [DOWNLOAD_COMMAND, runDownload],
  ping: [PING_COMMAND, runPing],
  inject: [INJECT_COMMAND, runInject],
};

const USAGE = `usage: client.js MODE [options]   (client.js MODE --help for the options of a mode)

The lab's traffic and measurement client; run it inside a lab namespace:
  scripts/lab.sh exec client1 node dist/scripts/lab/client.js http --url http://203.0.113.10/ --count 100

modes:
  http     HTTP GETs, a new TCP connection each; per-request source port, backend, latency
  udp      UDP flows to an echo service, a new socket (source port) per flow, round robin over sources
  ping     ICMP / ICMPv6 echo (raw socket; the lab has no ping binary)
  inject   send the frames of a pcap file on an interface (libpcap)
  hold     long-lived keep-alive HTTP connections asking again and again (e.g. across a MUX failure)
  download one long HTTP download read at a steady rate; can stop reading until a file exists (outlives a change)
exit status: 0 all succeeded, 1 something failed, 2 bad arguments
`;

export async function main(argv: readonly string[]): Promise<number> {
  const mode = argv[0];
  if (mode === undefined || mode === '--help' || mode === '-h' || mode === 'help') {
    (mode === undefined ? process.stderr : process.stdout).write(USAGE);
    return mode === undefined ? 2 : 0;
  }
  const run = MODES[mode];
  if (run === undefined) {
    process.stderr.write(`client: unknown mode ${JSON.stringify(mode)}; modes: ${Object.keys(MODES).join(', ')} (see --help)\n`);
    return 2;
  }
  return runCommandAsync(run[0], argv.slice(1), run[1]);
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => {
      process.exitCode = rc;
    },
    (e) => {
      process.stderr.write(`client: ${(e as Error).stack}\n`);
      process.exitCode = 1;
    },
  );
}
