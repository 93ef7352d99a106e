#!/usr/bin/env node
// The soak's traffic (scripts/soak.sh, docs/soak.md), run inside a client namespace for a fixed time at a
// fixed rate, open loop (a slow answer does not slow the schedule down):
//   http4, http6   one GET per new TCP connection (Connection: close) to http://VIP4/ and http://[VIP6]/
//   udp4, udp6     one UDP echo flow each: a new socket (new source port), one datagram, its echo
//   ka4, ka6       long-lived keep-alive connections, each asking GET / every --ka-interval-ms for a random
//                  life in --ka-life-s, then closed by us (FIN) and replaced by a new one
// Every request is one JSON line in --out when it ends: kind, start and end (epoch ms), the 5-tuple, the
// backend that answered (X-Backend, or the echo's prefix) and the error, if any. A keep-alive request also
// carries its connection id, its sequence number on that connection and the backend that answered the
// previous one. Sources rotate over --sources4 / --sources6.
//   node dist/scripts/soak/traffic.js --duration-s 60 --out records.jsonl [options]
import { createWriteStream, type WriteStream } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import { parseIpAddr } from '../../shared/addr.js';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { parseAddressList } from '../lab/client.js';

export type TrafficKind = 'http4' | 'http6' | 'udp4' | 'udp6' | 'ka4' | 'ka6';
export const TRAFFIC_KINDS: readonly TrafficKind[] = ['http4', 'http6', 'udp4', 'udp6', 'ka4', 'ka6'];

/** One finished request (a line of the records file). Times are epoch milliseconds. */
export interface TrafficRecord {
  k: TrafficKind;
  /** Sequence number within its kind. */
  id: number;
  t0: number;
  t1: number;
  src: string;
  sp: number | null;
  dst: string;
  dp: number;
  /** The backend that answered, or null. */
  be: string | null;
  err: string | null;
  /** Keep-alive only: connection id, request number on it (0 = the first, which includes the connect), the backend of the previous answer. */
  conn?: number;
  seq?: number;
  prev?: string | null;
  /** Keep-alive only: the connection failed while no request was outstanding (the server closed or reset it). */
  idle?: true;
}

const TCP_TIMEOUT_MS = 5000;
const UDP_TIMEOUT_MS = 2000;
/** After a keep-alive connection failed, wait this long before opening its replacement. */
const KA_REOPEN_AFTER_FAILURE_MS = 500;
/** At the end: in-flight requests get this long to finish. */
const DRAIN_MS = 6000;

/** Wall clock, epoch ms: the daemons' logs and the soak's events use the same clock. */
const nowMs = (): number => Date.now();
/** The end of a record: its start plus the monotonic time since (sub-millisecond). */
const endOf = (r: { t0: number }, p0: number): number => Math.round((r.t0 + performance.now() - p0) * 1000) / 1000;

function errorName(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err?.code ?? err?.message ?? String(e);
}

/** The parts of an HTTP/1.1 response head the soak needs. */
export function parseResponseHead(head: string): { status: number; backend: string | null; length: number | null } {
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? '0');
  const backend = /\r\nx-backend:[ \t]*([^\r]*)/i.exec(head)?.[1]?.trim() ?? null;
  const cl = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head)?.[1];
  return { status, backend, length: cl === undefined ? null : Number(cl) };
}

interface Target {
  host: string;
  family: 4 | 6;
  hostHeader: string;
}

function target(text: string): Target {
  const a = parseIpAddr(text);
  if (a === null) throw new UsageError(`not an IP address: ${JSON.stringify(text)}`);
  return { host: a.text, family: a.family, hostHeader: a.family === 6 ? `[${a.text}]` : a.text };
}

class Traffic {
  private readonly out: WriteStream;
  private stopping = false;
  private inFlight = 0;
  private readonly ids: Record<TrafficKind, number> = { http4: 0, http6: 0, udp4: 0, udp6: 0, ka4: 0, ka6: 0 };
  readonly totals: Record<TrafficKind, { total: number; ok: number; failed: number }> = Object.fromEntries(
    TRAFFIC_KINDS.map((k) => [k, { total: 0, ok: 0, failed: 0 }]),
  ) as never;
  private kaConns = 0;
  private readonly kaOpen = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly o: {
      out: string;
      durationMs: number;
      rate: number;
      keepAlive: number;
      kaIntervalMs: number;
      kaLifeMs: [number, number];
      vip4: Target;
      vip6: Target;
      sources4: string[];
      sources6: string[];
      httpPort: number;
      udpPort: number;
    },
  ) {
    this.out = createWriteStream(o.out, { flags: 'w' });
  }

  private write(r: TrafficRecord): void {
    const t = this.totals[r.k];
    t.total++;
    if (r.err === null) t.ok++;
    else t.failed++;
    this.out.write(`${JSON.stringify(r)}\n`);
  }

  private src(kind: TrafficKind, i: number): string {
    const list = kind.endsWith('4') ? this.o.sources4 : this.o.sources6;
    return list[i % list.length]!;
  }

  private later(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      f();
    }, ms);
    this.timers.add(t);
  }

  /** Open loop: request i of a kind starts at start + offset + i / rate, whatever the answers do. */
  private every(kind: TrafficKind, start: number, offsetMs: number, launch: (id: number) => void): void {
    const period = 1000 / this.o.rate;
    const count = Math.floor((this.o.durationMs / 1000) * this.o.rate);
    let i = 0;
    const tick = () => {
      if (this.stopping || i >= count) return;
      launch(this.ids[kind]++);
      i++;
      this.later(Math.max(0, start + offsetMs + i * period - nowMs()), tick);
    };
    this.later(offsetMs, tick);
  }

  run(): Promise<void> {
    const start = nowMs();
    process.stdout.write(`${JSON.stringify({ event: 'traffic_started', t: start, rate: this.o.rate, keepAlive: this.o.keepAlive })}\n`);
    const period = 1000 / this.o.rate;
    const kinds: [TrafficKind, (id: number) => void][] = [
      ['http4', (id) => this.httpNew('http4', id, this.o.vip4)],
      ['http6', (id) => this.httpNew('http6', id, this.o.vip6)],
      ['udp4', (id) => this.udp('udp4', id, this.o.vip4)],
      ['udp6', (id) => this.udp('udp6', id, this.o.vip6)],
    ];
    kinds.forEach(([k, f], j) => this.every(k, start, (period * j) / kinds.length, f));
    for (let c = 0; c < this.o.keepAlive; c++) {
      // spread the connections' first requests over one interval
      this.later((this.o.kaIntervalMs * c) / this.o.keepAlive, () => this.keepAlive('ka4', this.o.vip4));
      this.later((this.o.kaIntervalMs * (c + 0.5)) / this.o.keepAlive, () => this.keepAlive('ka6', this.o.vip6));
    }
    return new Promise((resolve) => {
      const end = setTimeout(() => this.stop().then(resolve), this.o.durationMs);
      this.stopNow = () => {
        clearTimeout(end);
        void this.stop().then(resolve);
      };
    });
  }

  stopNow: () => void = () => {};

  private async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const deadline = Date.now() + DRAIN_MS;
    while ((this.inFlight > 0 || this.kaOpen.size > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const s of this.kaOpen) s.destroy();
    for (const t of this.timers) clearTimeout(t);
    await new Promise<void>((r) => this.out.end(r));
  }

  private httpNew(kind: TrafficKind, id: number, t: Target): void {
    const src = this.src(kind, id);
    const rec: TrafficRecord = { k: kind, id, t0: nowMs(), t1: 0, src, sp: null, dst: t.host, dp: this.o.httpPort, be: null, err: null };
    const p0 = performance.now();
    this.inFlight++;
    const sock = netConnect({ host: t.host, port: this.o.httpPort, localAddress: src, family: t.family });
    const chunks: Buffer[] = [];
    let done = false;
    const notePort = () => {
      try {
        if (sock.localPort !== undefined) rec.sp = sock.localPort;
      } catch {
        /* not bound */
      }
    };
    // node binds and calls connect(2) on the next tick (net.connect to an IP address); a tick queued now
    // runs right after it, before any answer can come, so even a refused connection says which source
    // port, hence which 5-tuple and Maglev slot, it used (setImmediate was too late for some refusals)
    process.nextTick(notePort);
    const finish = (err: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      notePort();
      rec.t1 = endOf(rec, p0);
      rec.err = err;
      sock.destroy();
      this.inFlight--;
      this.write(rec);
    };
    const timer = setTimeout(() => finish('timeout'), TCP_TIMEOUT_MS);
    sock.setNoDelay(true);
    sock.once('connect', () => {
      notePort();
      sock.write(`GET / HTTP/1.1\r\nHost: ${t.hostHeader}\r\nConnection: close\r\nUser-Agent: slbx-soak\r\n\r\n`);
    });
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('end', () => {
      const buf = Buffer.concat(chunks);
      const headEnd = buf.indexOf('\r\n\r\n');
      if (headEnd < 0) {
        finish(buf.length === 0 ? 'closed before the response' : 'truncated head');
        return;
      }
      const h = parseResponseHead(buf.subarray(0, headEnd).toString('latin1'));
      rec.be = h.backend;
      const bodyLen = buf.length - headEnd - 4;
      if (h.status !== 200) finish(`status ${h.status}`);
      else if (h.length !== null && bodyLen !== h.length) finish(`short body ${bodyLen}/${h.length}`);
      else finish(null);
    });
    sock.on('error', (e) => finish(errorName(e)));
    sock.on('close', () => finish('closed'));
  }

  private udp(kind: TrafficKind, id: number, t: Target): void {
    const src = this.src(kind, id);
    const rec: TrafficRecord = { k: kind, id, t0: nowMs(), t1: 0, src, sp: null, dst: t.host, dp: this.o.udpPort, be: null, err: null };
    const payload = `soak ${kind} ${id}`;
    const p0 = performance.now();
    this.inFlight++;
    const sock = createSocket(t.family === 4 ? 'udp4' : 'udp6');
    let done = false;
    const finish = (err: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      rec.t1 = endOf(rec, p0);
      rec.err = err;
      try {
        sock.close();
      } catch {
        /* closed */
      }
      this.inFlight--;
      this.write(rec);
    };
    const timer = setTimeout(() => finish('timeout'), UDP_TIMEOUT_MS);
    // a connected UDP socket reports ICMP port unreachable as an error: without a handler node dies
    sock.on('error', (e) => finish(errorName(e)));
    sock.on('message', (msg) => {
      const text = msg.toString('utf8');
      const sp = text.indexOf(' ');
      rec.be = sp > 0 ? text.slice(0, sp) : null;
      finish(sp > 0 && text.slice(sp + 1) === payload ? null : 'echo mismatch');
    });
    sock.bind({ port: 0, address: src }, () => {
      rec.sp = sock.address().port;
      sock.connect(this.o.udpPort, t.host, () =>
        sock.send(payload, (e) => {
          if (e) finish(errorName(e));
        }),
      );
    });
  }

  /** One keep-alive connection for its whole life; opens its successor when it ends. */
  private keepAlive(kind: TrafficKind, t: Target): void {
    if (this.stopping) return;
    const conn = this.kaConns++;
    const src = this.src(kind, conn);
    const [lo, hi] = this.o.kaLifeMs;
    const opened = nowMs();
    const closeAt = opened + lo + Math.random() * (hi - lo);
    let connected = false;
    const sock = netConnect({ host: t.host, port: this.o.httpPort, localAddress: src, family: t.family });
    this.kaOpen.add(sock);
    let sp: number | null = null;
    let seq = 0;
    let prev: string | null = null;
    let pending: TrafficRecord | null = null;
    let buf: Buffer = Buffer.alloc(0);
    let timer: NodeJS.Timeout | null = null;
    let over = false;
    const notePort = () => {
      try {
        if (sock.localPort !== undefined) sp = sock.localPort;
      } catch {
        /* not bound */
      }
    };
    process.nextTick(notePort); // as in httpNew
    const newRec = (): TrafficRecord => ({
      k: kind,
      id: this.ids[kind]++,
      t0: nowMs(),
      t1: 0,
      src,
      sp,
      dst: t.host,
      dp: this.o.httpPort,
      be: null,
      err: null,
      conn,
      seq,
      prev,
    });
    // the end of this connection: a failure (recorded against the request in flight, or as an idle
    // failure) or our own close; either way a new connection takes its place
    const end = (err: string | null) => {
      if (over) return;
      over = true;
      if (timer !== null) clearTimeout(timer);
      notePort();
      if (err !== null) {
        // no request in flight: a failed connect (request 0, dated from the connect) or an idle failure
        const r = pending ?? (connected ? { ...newRec(), idle: true as const } : { ...newRec(), t0: opened });
        r.sp = sp;
        r.t1 = nowMs();
        r.err = err;
        if (pending !== null) this.inFlight--;
        pending = null;
        this.write(r);
        sock.destroy();
      }
      this.kaOpen.delete(sock);
      if (!this.stopping) this.later(err === null ? 0 : KA_REOPEN_AFTER_FAILURE_MS, () => this.keepAlive(kind, t));
    };
    const ask = () => {
      timer = null;
      if (over) return;
      if (this.stopping || nowMs() >= closeAt) {
        // our close: FIN, and whatever the server does next is no failure
        over = true;
        this.kaOpen.delete(sock);
        sock.end();
        sock.once('close', () => {});
        this.later(2000, () => sock.destroy());
        if (!this.stopping) this.keepAlive(kind, t);
        return;
      }
      pending = newRec();
      this.inFlight++;
      sock.write(`GET / HTTP/1.1\r\nHost: ${t.hostHeader}\r\nConnection: keep-alive\r\nUser-Agent: slbx-soak\r\n\r\n`);
      timer = setTimeout(() => end('timeout'), TCP_TIMEOUT_MS);
    };
    sock.setNoDelay(true);
    sock.once('connect', () => {
      connected = true;
      notePort();
      ask();
    });
    sock.on('data', (d: Buffer) => {
      if (over) return;
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      for (;;) {
        const headEnd = buf.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const h = parseResponseHead(buf.subarray(0, headEnd).toString('latin1'));
        const len = h.length ?? 0;
        if (buf.length < headEnd + 4 + len) return;
        buf = buf.subarray(headEnd + 4 + len);
        if (pending === null) {
          end('unexpected response');
          return;
        }
        if (timer !== null) clearTimeout(timer);
        timer = null;
        const r = pending;
        r.t1 = nowMs();
        r.be = h.backend;
        r.sp = sp;
        // end() records the request in flight (pending) and counts it out of inFlight
        if (h.status !== 200) {
          end(`status ${h.status}`);
          return;
        }
        pending = null;
        this.inFlight--;
        this.write(r);
        prev = h.backend;
        seq++;
        timer = setTimeout(ask, this.o.kaIntervalMs);
      }
    });
    sock.on('end', () => end('closed by the server'));
    sock.on('error', (e) => end(errorName(e)));
    sock.on('close', () => end('closed'));
  }
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'duration-s', value: 'S', help: 'how long to send', default: '60' },
  { name: 'out', value: 'FILE', help: 'the records, one JSON line per request (JSONL)' },
  { name: 'rate', value: 'N', help: 'new flows per second of each of http4, http6, udp4, udp6', default: '20' },
  { name: 'keepalive', value: 'N', help: 'keep-alive connections open at any time, per family', default: '4' },
  { name: 'ka-interval-ms', value: 'MS', help: 'pause between an answer and the next request on a keep-alive connection', default: '250' },
  { name: 'ka-life-s', value: 'MIN-MAX', help: 'life of a keep-alive connection, seconds, random in the range', default: '2-5' },
  { name: 'vip4', value: 'ADDR', help: 'IPv4 VIP', default: '203.0.113.10' },
  { name: 'vip6', value: 'ADDR', help: 'IPv6 VIP', default: '2001:db8:ff::10' },
  { name: 'http-port', value: 'N', help: "the VIPs' HTTP port (a rule with a probe)", default: '80' },
  { name: 'udp-port', value: 'N', help: "the VIPs' UDP echo port", default: '7' },
  { name: 'sources4', value: 'A-B', help: 'IPv4 source addresses, round robin', default: '198.51.100.10-198.51.100.41' },
  { name: 'sources6', value: 'A-B', help: 'IPv6 source addresses, round robin', default: '2001:db8:c::10-2001:db8:c::2f' },
  { name: 'help', help: 'this help' },
];

function intArg(args: ParsedArgs, name: string, min: number, max: number): number {
  const v = one(args, name)!;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
    throw new UsageError(`--${name} must be an integer ${min}..${max}, got ${JSON.stringify(v)}`);
  return Number(v);
}

const COMMAND: CommandSpec = {
  program: 'traffic',
  usage: 'traffic.js --duration-s S --out FILE [options]',
  options: OPTIONS,
  errorSuffix: ' (see --help)',
  about: "The soak's mixed traffic (see the top of scripts/soak/traffic.ts); run it in a client namespace.",
};

export const main = (argv: readonly string[]): Promise<number> => runCommandAsync(COMMAND, argv, runParsed);

async function runParsed(args: ParsedArgs): Promise<number> {
  let t: Traffic;
  {
    const out = one(args, 'out');
    if (out === undefined) throw new UsageError('--out FILE is required');
    const life = /^(\d+)-(\d+)$/.exec(one(args, 'ka-life-s')!);
    if (life === null || Number(life[1]) < 1 || Number(life[2]) < Number(life[1]))
      throw new UsageError('--ka-life-s must be MIN-MAX seconds, 1 <= MIN <= MAX');
    const vip4 = target(one(args, 'vip4')!);
    const vip6 = target(one(args, 'vip6')!);
    if (vip4.family !== 4 || vip6.family !== 6) throw new UsageError('--vip4 must be IPv4 and --vip6 IPv6');
    t = new Traffic({
      out,
      durationMs: intArg(args, 'duration-s', 1, 86400) * 1000,
      rate: intArg(args, 'rate', 1, 1000),
      keepAlive: intArg(args, 'keepalive', 0, 1000),
      kaIntervalMs: intArg(args, 'ka-interval-ms', 0, 60000),
      kaLifeMs: [Number(life[1]) * 1000, Number(life[2]) * 1000],
      vip4,
      vip6,
      sources4: parseAddressList(one(args, 'sources4')!, 'sources4'),
      sources6: parseAddressList(one(args, 'sources6')!, 'sources6'),
      httpPort: intArg(args, 'http-port', 1, 65535),
      udpPort: intArg(args, 'udp-port', 1, 65535),
    });
  }
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => t.stopNow());
  const started = Date.now();
  await t.run();
  process.stdout.write(`${JSON.stringify({ event: 'traffic_done', elapsedS: (Date.now() - started) / 1000, totals: t.totals })}\n`);
  return 0;
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => {
      process.exitCode = rc;
    },
    (e) => {
      process.stderr.write(`traffic: ${(e as Error).stack}\n`);
      process.exitCode = 1;
    },
  );
}
