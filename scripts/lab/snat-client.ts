#!/usr/bin/env node
// The lab's outbound NAT client (docs/outbound.md, issue 15), run inside a backend's namespace: opens N
// concurrent TCP connections and M UDP flows to the remote server (scripts/lab/snat-server.ts), each
// exchanging data for S seconds, and writes a JSON record of each: ok, failed or reset, the bytes sent
// and echoed, its own local port, and the source address and port the server saw (its "SRC" line).
//   node dist/scripts/lab/snat-client.js --server 198.51.100.50 --tcp 500 --udp 500 --seconds 5 --json out.json
// A TCP connection is ok when it connected, read the server's SRC line, got every byte it sent echoed
// and closed cleanly (its FIN, then the server's). A UDP flow (one socket, one local port) sends one
// datagram a second (--udp-interval-ms) for S seconds, each retried up to --udp-retries times until its echo comes back; ok
// when every one came back, each from the server's address and port.
import { connect, type Socket } from 'node:net';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { isIP } from 'node:net';
import { writeFileSync, renameSync } from 'node:fs';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { unmapAddress } from './snat-server.js';

export interface SnatClientTcpRecord {
  i: number;
  /** ok: completed as described above; failed: never connected (or no SRC line); reset: broken after connecting. */
  result: 'ok' | 'failed' | 'reset';
  localPort: number;
  /** What the server saw as the source (null: no SRC line). */
  seenSrc: string | null;
  seenPort: number | null;
  bytesSent: number;
  bytesEchoed: number;
  connectMs: number | null;
  error?: string;
}

export interface SnatClientUdpRecord {
  i: number;
  result: 'ok' | 'failed';
  localPort: number;
  seenSrc: string | null;
  seenPort: number | null;
  /** Distinct sources the server named over the flow's datagrams (1 when the NAT kept the flow on one port). */
  seenSources: number;
  exchanges: number;
  answered: number;
  retries: number;
  /** Answers from another address or port than the server's (never expected). */
  strangers: number;
  error?: string;
}

export interface SnatClientReport {
  server: string;
  tcpPort: number;
  udpPort: number;
  seconds: number;
  startedMs: number;
  endedMs: number;
  tcp: { opened: number; ok: number; failed: number; reset: number };
  udp: { opened: number; ok: number; failed: number; retries: number };
  tcpRecords: SnatClientTcpRecord[];
  udpRecords: SnatClientUdpRecord[];
}

export interface SnatClientOptions {
  server: string;
  tcpPort: number;
  udpPort: number;
  tcp: number;
  udp: number;
  seconds: number;
  /** Bytes per TCP message (one message every intervalMs). */
  messageBytes: number;
  intervalMs: number;
  /** Connections and flows are opened over this many milliseconds (not all in one tick). */
  rampMs: number;
  /** Generous: the machine may be loaded. */
  timeoutMs: number;
  udpRetries: number;
  udpRetryMs: number;
  /** Between two exchanges of a UDP flow: S s of a flow make max(1, floor(S * 1000 / udpIntervalMs)) exchanges. */
  udpIntervalMs: number;
}

const SRC_LINE = /^SRC (\S+) (\d+)$/;

function runTcp(o: SnatClientOptions, i: number, startAt: number): Promise<SnatClientTcpRecord> {
  return new Promise((resolve) => {
    const r: SnatClientTcpRecord = {
      i,
      result: 'failed',
      localPort: 0,
      seenSrc: null,
      seenPort: null,
      bytesSent: 0,
      bytesEchoed: 0,
      connectMs: null,
    };
    let s: Socket | null = null;
    let connected = false;
    let finished = false;
    let head = '';
    let timer: NodeJS.Timeout | null = null;
    let sendTimer: NodeJS.Timeout | null = null;
    let endAt = 0;
    const payload = Buffer.alloc(o.messageBytes, 0x61 + (i % 26));
    const done = (result: SnatClientTcpRecord['result'], error?: string) => {
      if (finished) return;
      finished = true;
      if (timer) clearTimeout(timer);
      if (sendTimer) clearInterval(sendTimer);
      clearTimeout(deadline);
      r.result = result;
      if (error !== undefined) r.error = error;
      if (result !== 'ok') s?.destroy();
      resolve(r);
    };
    const deadline = setTimeout(() => done(connected ? 'reset' : 'failed', 'timeout'), o.timeoutMs + o.seconds * 1000 + o.rampMs);
    const finish = () => {
      // everything echoed: close our side; the server closes its own
      if (r.bytesEchoed === r.bytesSent && Date.now() >= endAt && s !== null && !s.writableEnded) s.end();
    };
    timer = setTimeout(() => {
      timer = null;
      const t0 = Date.now();
      s = connect({ host: o.server, port: o.tcpPort });
      s.setNoDelay(true);
      s.on('connect', () => {
        connected = true;
        r.connectMs = Date.now() - t0;
        r.localPort = s!.localPort ?? 0;
        endAt = Date.now() + o.seconds * 1000;
        const send = () => {
          if (Date.now() >= endAt) {
            if (sendTimer) clearInterval(sendTimer);
            sendTimer = null;
            finish();
            return;
          }
          r.bytesSent += payload.length;
          s!.write(payload);
        };
        send();
        sendTimer = setInterval(send, o.intervalMs);
      });
      s.on('data', (d: Buffer) => {
        if (r.seenSrc === null) {
          head += d.toString('latin1');
          const nl = head.indexOf('\n');
          if (nl < 0) return;
          const m = SRC_LINE.exec(head.slice(0, nl));
          if (m === null) return done('reset', `bad SRC line ${JSON.stringify(head.slice(0, nl))}`);
          r.seenSrc = m[1]!;
          r.seenPort = Number(m[2]);
          r.bytesEchoed += head.length - nl - 1;
        } else r.bytesEchoed += d.length;
        finish();
      });
      s.on('error', (e) => done(connected ? 'reset' : 'failed', e.message));
      s.on('close', (hadError) => {
        if (hadError) return done(connected ? 'reset' : 'failed', 'closed with an error');
        if (!connected) return done('failed', 'closed before connecting');
        if (r.seenSrc === null) return done('reset', 'no SRC line');
        if (r.bytesEchoed !== r.bytesSent || !s!.writableEnded)
          return done('reset', `closed by the server after ${r.bytesEchoed} of ${r.bytesSent} bytes echoed`);
        done('ok');
      });
    }, startAt);
  });
}

function runUdp(o: SnatClientOptions, i: number, startAt: number): Promise<SnatClientUdpRecord> {
  return new Promise((resolve) => {
    const r: SnatClientUdpRecord = {
      i,
      result: 'failed',
      localPort: 0,
      seenSrc: null,
      seenPort: null,
      seenSources: 0,
      exchanges: Math.max(1, Math.floor((o.seconds * 1000) / o.udpIntervalMs)),
      answered: 0,
      retries: 0,
      strangers: 0,
    };
    const sources = new Set<string>();
    const six = isIP(o.server) === 6;
    let sock: UdpSocket | null = null;
    let k = 0; // the exchange in flight
    let tries = 0;
    let retry: NodeJS.Timeout | null = null;
    let next: NodeJS.Timeout | null = null;
    let finished = false;
    const t0 = Date.now();
    const done = (result: SnatClientUdpRecord['result'], error?: string) => {
      if (finished) return;
      finished = true;
      if (retry) clearTimeout(retry);
      if (next) clearTimeout(next);
      r.result = result;
      r.seenSources = sources.size;
      if (error !== undefined) r.error = error;
      sock?.close();
      resolve(r);
    };
    const send = () => {
      const msg = Buffer.from(`u${i} ${k}`);
      sock!.send(msg, o.udpPort, o.server, (e) => {
        if (e) done('failed', e.message);
      });
      retry = setTimeout(() => {
        if (++tries > o.udpRetries) return done('failed', `exchange ${k} unanswered after ${tries} tries`);
        r.retries++;
        send();
      }, o.udpRetryMs);
    };
    setTimeout(() => {
      sock = createSocket(six ? 'udp6' : 'udp4');
      sock.on('error', (e) => done('failed', e.message));
      sock.on('message', (msg, rinfo) => {
        if (unmapAddress(rinfo.address) !== o.server || rinfo.port !== o.udpPort) {
          r.strangers++;
          return;
        }
        const text = msg.toString('latin1');
        const nl = text.indexOf('\n');
        const m = nl < 0 ? null : SRC_LINE.exec(text.slice(0, nl));
        if (m === null || text.slice(nl + 1) !== `u${i} ${k}`) return; // a late answer to an earlier try
        r.seenSrc = m[1]!;
        r.seenPort = Number(m[2]);
        sources.add(`${m[1]} ${m[2]}`);
        r.answered++;
        if (retry) clearTimeout(retry);
        retry = null;
        tries = 0;
        k++;
        if (k >= r.exchanges) return done(r.answered === r.exchanges && r.strangers === 0 ? 'ok' : 'failed');
        // one exchange every udpIntervalMs from the flow's start
        next = setTimeout(send, Math.max(0, t0 + startAt + k * o.udpIntervalMs - Date.now()));
      });
      sock.bind(0, () => {
        r.localPort = sock!.address().port;
        send();
      });
    }, startAt);
  });
}

/** Runs the connections and flows; resolves when every one has ended. */
export async function runSnatClient(o: SnatClientOptions): Promise<SnatClientReport> {
  const startedMs = Date.now();
  const ramp = (i: number, n: number) => (n <= 1 ? 0 : Math.floor((o.rampMs * i) / n));
  const tcp = Promise.all(Array.from({ length: o.tcp }, (_, i) => runTcp(o, i, ramp(i, o.tcp))));
  const udp = Promise.all(Array.from({ length: o.udp }, (_, i) => runUdp(o, i, ramp(i, o.udp))));
  const [tcpRecords, udpRecords] = await Promise.all([tcp, udp]);
  const count = <T extends { result: string }>(rs: T[], what: string) => rs.filter((r) => r.result === what).length;
  return {
    server: o.server,
    tcpPort: o.tcpPort,
    udpPort: o.udpPort,
    seconds: o.seconds,
    startedMs,
    endedMs: Date.now(),
    tcp: { opened: tcpRecords.length, ok: count(tcpRecords, 'ok'), failed: count(tcpRecords, 'failed'), reset: count(tcpRecords, 'reset') },
    udp: {
      opened: udpRecords.length,
      ok: count(udpRecords, 'ok'),
      failed: count(udpRecords, 'failed'),
      retries: udpRecords.reduce((a, r) => a + r.retries, 0),
    },
    tcpRecords,
    udpRecords,
  };
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'server', value: 'ADDR', help: 'the remote server (IPv4 or IPv6 address)' },
  { name: 'tcp-port', value: 'PORT', help: "the server's TCP echo port", default: '9000' },
  { name: 'udp-port', value: 'PORT', help: "the server's UDP echo port", default: '9001' },
  { name: 'tcp', value: 'N', help: 'concurrent TCP connections', default: '0' },
  { name: 'udp', value: 'M', help: 'UDP flows (one socket each)', default: '0' },
  { name: 'seconds', value: 'S', help: 'how long each connection and flow exchanges data', default: '5' },
  { name: 'message-bytes', value: 'B', help: 'bytes per TCP message', default: '64' },
  { name: 'interval-ms', value: 'MS', help: 'between two TCP messages of a connection', default: '500' },
  { name: 'ramp-ms', value: 'MS', help: 'the connections and flows start spread over this time', default: '1000' },
  {
    name: 'timeout-ms',
    value: 'MS',
    help: 'a connection or flow still unfinished after S s plus this (and the ramp) failed',
    default: '60000',
  },
  { name: 'udp-retries', value: 'N', help: 'tries of one UDP exchange beyond the first', default: '5' },
  { name: 'udp-retry-ms', value: 'MS', help: 'wait for a UDP echo before trying again', default: '2000' },
  { name: 'udp-interval-ms', value: 'MS', help: 'between two exchanges of a UDP flow (S s make S*1000/MS exchanges)', default: '1000' },
  { name: 'json', value: 'FILE', help: 'write the report here (else on stdout)' },
  { name: 'help', help: 'this help' },
];

const HELP_EXTRA = `report (JSON):
  {server, tcpPort, udpPort, seconds, startedMs, endedMs,
   tcp: {opened, ok, failed, reset}, udp: {opened, ok, failed, retries},
   tcpRecords: [{i, result: ok|failed|reset, localPort, seenSrc, seenPort, bytesSent, bytesEchoed, connectMs, error?}],
   udpRecords: [{i, result: ok|failed, localPort, seenSrc, seenPort, seenSources, exchanges, answered, retries, strangers, error?}]}
seenSrc/seenPort: the source the server saw (behind outbound NAT: the frontend IP and port).
Exit status 0 once every connection and flow ended (the report says how); 2 on a usage error.
In the lab: scripts/lab/outbound.sh (lab_snat_client NIC ARGS...).`;

const USAGE = 'snat-client.js --server ADDR [--tcp N] [--udp M] [--seconds S] [--json FILE]';
const COMMAND: CommandSpec = {
  program: 'snat-client',
  usage: USAGE,
  options: OPTIONS,
  extraHelp: HELP_EXTRA,
  errorSuffix: `\nusage: ${USAGE} (see --help)`,
  about: "The lab's outbound NAT client: N TCP connections and M UDP flows to the remote server, a JSON record of each.",
};

function intArg(args: ParsedArgs, name: string, min: number, max: number): number {
  const v = one(args, name)!;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
    throw new UsageError(`--${name}: ${JSON.stringify(v)} must be an integer ${min}..${max}`);
  return Number(v);
}

export const main = (argv: readonly string[]): Promise<number> => runCommandAsync(COMMAND, argv, runParsed);

async function runParsed(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const server = one(args, 'server');
  if (server === undefined || isIP(server) === 0)
    throw new UsageError(
      `--server ADDR (an IPv4 or IPv6 address) is required${server === undefined ? '' : `, got ${JSON.stringify(server)}`}`,
    );
  const o: SnatClientOptions = {
    server,
    tcpPort: intArg(args, 'tcp-port', 1, 65535),
    udpPort: intArg(args, 'udp-port', 1, 65535),
    tcp: intArg(args, 'tcp', 0, 20000),
    udp: intArg(args, 'udp', 0, 20000),
    seconds: intArg(args, 'seconds', 0, 3600),
    messageBytes: intArg(args, 'message-bytes', 1, 65536),
    intervalMs: intArg(args, 'interval-ms', 10, 60000),
    rampMs: intArg(args, 'ramp-ms', 0, 600000),
    timeoutMs: intArg(args, 'timeout-ms', 100, 3600000),
    udpRetries: intArg(args, 'udp-retries', 0, 100),
    udpRetryMs: intArg(args, 'udp-retry-ms', 10, 60000),
    udpIntervalMs: intArg(args, 'udp-interval-ms', 10, 60000),
  };
  const report = await runSnatClient(o);
  const text = `${JSON.stringify(report)}\n`;
  const file = one(args, 'json');
  if (file === undefined) process.stdout.write(text);
  else {
    writeFileSync(`${file}.tmp`, text);
    renameSync(`${file}.tmp`, file);
    process.stdout.write(
      `${JSON.stringify({ event: 'done', file, tcp: report.tcp, udp: report.udp, ms: report.endedMs - report.startedMs })}\n`,
    );
  }
  return 0;
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => process.exit(rc),
    (e) => {
      process.stderr.write(`snat-client: ${(e as Error).stack}\n`);
      process.exit(1);
    },
  );
}
