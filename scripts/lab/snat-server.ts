#!/usr/bin/env node
// The lab's remote server for outbound NAT (docs/outbound.md, issue 15): a TCP and UDP echo on the client
// side (198.51.100.0/24, 2001:db8:c::/48) that tells each peer the source address and port it saw and
// records every connection and UDP flow, so a scenario can check from the server's own view that every
// backend's connection left from the frontend IP and that no two live flows shared (source, port, server).
//   node dist/scripts/lab/snat-server.js --tcp-port 9000 --udp-port 9001 --records /tmp/server.json
// TCP: on accept the server writes one line "SRC <address> <port>\n", then echoes every byte it reads;
// when the peer closes its side the server closes its own. UDP: each datagram is answered from the same
// socket with "SRC <address> <port>\n" followed by the datagram. Listens on :: (IPv4 and IPv6). One JSON
// line when both listen ({"event":"ready",...}); the records file is written on SIGTERM or SIGINT (and on
// SIGUSR2 without exiting), as one JSON document (see --help).
import { createServer, type Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import { writeFileSync, renameSync } from 'node:fs';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';

export interface SnatServerTcpRecord {
  /** The peer's address and port as the server saw them (after the NAT). */
  src: string;
  sport: number;
  /** The server's own address and port of the connection (the remote endpoint, seen from the backend). */
  dst: string;
  dport: number;
  openedMs: number;
  /** When the connection closed (null: still open when the records were written). */
  closedMs: number | null;
  bytesIn: number;
  bytesOut: number;
  /** fin: the peer closed cleanly; reset: an error or RST; open: still open. */
  end: 'fin' | 'reset' | 'open';
  error?: string;
}

export interface SnatServerUdpRecord {
  src: string;
  sport: number;
  /** The server's port (node's dgram gives no local address of a datagram: the client knows which one it asked). */
  dport: number;
  firstMs: number;
  lastMs: number;
  datagrams: number;
  bytesIn: number;
}

export interface SnatServerRecords {
  tcpPort: number;
  udpPort: number;
  writtenMs: number;
  tcp: SnatServerTcpRecord[];
  udp: SnatServerUdpRecord[];
}

const UDP_RCVBUF_BYTES = 4 * 1024 * 1024;

function log(event: string, fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), event, ...fields })}\n`);
}

/** An IPv4-mapped IPv6 address as plain IPv4 (the dual-stack socket's view of an IPv4 peer). */
export function unmapAddress(a: string | undefined): string {
  return a === undefined ? '?' : a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

function portArg(args: ParsedArgs, name: string): number {
  const v = one(args, name);
  if (v === undefined) throw new UsageError(`--${name} PORT is required`);
  if (!/^\d{1,5}$/.test(v) || Number(v) < 1 || Number(v) > 65535)
    throw new UsageError(`--${name}: ${JSON.stringify(v)} is not a port 1..65535`);
  return Number(v);
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'tcp-port', value: 'PORT', help: 'the TCP echo port' },
  { name: 'udp-port', value: 'PORT', help: 'the UDP echo port' },
  { name: 'records', value: 'FILE', help: 'where the records go (JSON), written on SIGTERM/SIGINT/SIGUSR2' },
  { name: 'help', help: 'this help' },
];

const HELP_EXTRA = `records (one JSON document):
  {tcpPort, udpPort, writtenMs,
   tcp: [{src, sport, dst, dport, openedMs, closedMs, bytesIn, bytesOut, end: fin|reset|open, error?}],
   udp: [{src, sport, dport, firstMs, lastMs, datagrams, bytesIn}]}   (one per source address and port)
src/sport: the peer as the server saw it (a backend behind outbound NAT shows as its frontend IP:port).
The lab runs it in a client namespace: scripts/lab/outbound.sh (lab_snat_server_start).`;

const USAGE = 'snat-server.js --tcp-port PORT --udp-port PORT --records FILE';
const COMMAND: CommandSpec = {
  program: 'snat-server',
  usage: USAGE,
  options: OPTIONS,
  extraHelp: HELP_EXTRA,
  errorSuffix: `\nusage: ${USAGE} (see --help)`,
  about: "The lab's remote server for outbound NAT: TCP and UDP echo that tells each peer its source as seen, and records it.",
};

export const main = (argv: readonly string[]): Promise<number> => runCommandAsync(COMMAND, argv, runParsed);

/** A running server (tests start one in-process). */
export interface SnatServer {
  readonly tcpPort: number;
  readonly udpPort: number;
  records(): SnatServerRecords;
  close(): Promise<void>;
}

/** Starts the TCP and UDP echo on :: (port 0: any free port; the actual ports are in the result). */
export async function startSnatServer(tcpPort: number, udpPort: number): Promise<SnatServer> {
  const tcp: SnatServerTcpRecord[] = [];
  const udp = new Map<string, SnatServerUdpRecord>();
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    const r: SnatServerTcpRecord = {
      src: unmapAddress(s.remoteAddress),
      sport: s.remotePort ?? 0,
      dst: unmapAddress(s.localAddress),
      dport: s.localPort ?? 0,
      openedMs: Date.now(),
      closedMs: null,
      bytesIn: 0,
      bytesOut: 0,
      end: 'open',
    };
    tcp.push(r);
    const hello = Buffer.from(`SRC ${r.src} ${r.sport}\n`);
    r.bytesOut += hello.length;
    s.write(hello);
    s.on('data', (d: Buffer) => {
      r.bytesIn += d.length;
      r.bytesOut += d.length;
      s.write(d);
    });
    s.on('end', () => {
      if (r.end === 'open') r.end = 'fin';
      s.end();
    });
    s.on('error', (e) => {
      r.end = 'reset';
      r.error = e.message;
    });
    s.on('close', (hadError) => {
      sockets.delete(s);
      r.closedMs = Date.now();
      if (hadError || r.end === 'open') r.end = 'reset';
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // 2,000 backends' connections may arrive within a second: a deep accept queue (capped by somaxconn)
    server.listen({ port: tcpPort, host: '::', ipv6Only: false, backlog: 8192 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (e) => log('error', { kind: 'tcp', error: e.message }));
  const sock = createSocket({ type: 'udp6', ipv6Only: false });
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.bind({ port: udpPort, address: '::' }, () => {
      sock.off('error', reject);
      resolve();
    });
  });
  // 2,000 flows' datagrams arrive in bursts: a deep receive buffer (capped by net.core.rmem_max), else the
  // kernel drops what the process has not read yet (a loaded machine reads late)
  try {
    sock.setRecvBufferSize(UDP_RCVBUF_BYTES);
  } catch {
    // an unprivileged process above rmem_max: the default buffer
  }
  const udpLocal = sock.address().port;
  sock.on('error', (e) => log('error', { kind: 'udp', error: e.message }));
  sock.on('message', (msg, rinfo) => {
    const src = unmapAddress(rinfo.address);
    const key = `${src} ${rinfo.port}`;
    const now = Date.now();
    let r = udp.get(key);
    if (r === undefined) {
      r = { src, sport: rinfo.port, dport: udpLocal, firstMs: now, lastMs: now, datagrams: 0, bytesIn: 0 };
      udp.set(key, r);
    }
    r.lastMs = now;
    r.datagrams++;
    r.bytesIn += msg.length;
    sock.send(Buffer.concat([Buffer.from(`SRC ${src} ${rinfo.port}\n`), msg]), rinfo.port, rinfo.address, (e) => {
      if (e) log('error', { kind: 'udp', error: e.message });
    });
  });
  const addr = server.address();
  const actualTcp = typeof addr === 'object' && addr !== null ? addr.port : tcpPort;
  return {
    tcpPort: actualTcp,
    udpPort: udpLocal,
    records: () => ({
      tcpPort: actualTcp,
      udpPort: udpLocal,
      writtenMs: Date.now(),
      tcp: tcp.map((r) => ({ ...r })),
      udp: [...udp.values()].map((r) => ({ ...r })),
    }),
    close: async () => {
      sock.close();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function writeRecords(file: string, r: SnatServerRecords): void {
  writeFileSync(`${file}.tmp`, `${JSON.stringify(r)}\n`);
  renameSync(`${file}.tmp`, file);
}

async function runParsed(args: ParsedArgs): Promise<number> {
  if (args.positional.length > 0) throw new UsageError(`unexpected argument ${args.positional[0]}`);
  const tcpPort = portArg(args, 'tcp-port');
  const udpPort = portArg(args, 'udp-port');
  const file = one(args, 'records');
  if (file === undefined || file === '') throw new UsageError('--records FILE is required');
  let srv: SnatServer;
  try {
    srv = await startSnatServer(tcpPort, udpPort);
  } catch (e) {
    log('error', { kind: 'listen', error: (e as Error).message });
    return 1;
  }
  log('ready', { tcpPort, udpPort, pid: process.pid });
  process.on('SIGUSR2', () => writeRecords(file, srv.records()));
  for (const sig of ['SIGTERM', 'SIGINT'] as const)
    process.on(sig, () => {
      const r = srv.records();
      writeRecords(file, r);
      log('records', { file, tcp: r.tcp.length, udp: r.udp.length });
      process.exit(0);
    });
  return -1; // keep running
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => {
      if (rc >= 0) process.exit(rc);
    },
    (e) => {
      process.stderr.write(`snat-server: ${(e as Error).stack}\n`);
      process.exit(1);
    },
  );
}
