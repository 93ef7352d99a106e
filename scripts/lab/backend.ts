#!/usr/bin/env node
// The lab's backend services, one process per kind inside each nic's namespace (so a scenario can stop
// the HTTP server alone and watch the probes fail):
//   node dist/scripts/lab/backend.js http --name h1vm1 --ports 80,8000
//   node dist/scripts/lab/backend.js udp-echo --name h1vm1 --ports 7,7002,7003
// Both listen on :: (dual stack). No reverse DNS and no log line per request: one JSON line when
// every port listens ({"event":"ready",...}), which scripts/lab/lib.sh waits for, and one per error.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSocket } from 'node:dgram';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';

/** Upper bounds that keep a typo from tying a backend up for hours. */
export const MAX_BYTES = 16 * 1024 * 1024 * 1024;
export const MAX_SLOW_MS = 10 * 60 * 1000;
const CHUNK_BYTES = 64 * 1024;

function log(event: string, fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), event, ...fields })}\n`);
}

/** Parses "80,8000" into distinct ports; throws UsageError. */
export function parsePorts(text: string): number[] {
  const ports = text.split(',').map((p) => p.trim());
  const out: number[] = [];
  for (const p of ports) {
    if (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535)
      throw new UsageError(`--ports: ${JSON.stringify(p)} is not a port 1..65535 (give a list: --ports 80,8000)`);
    if (!out.includes(Number(p))) out.push(Number(p));
  }
  return out;
}

function unmap(a: string | undefined): string {
  return a === undefined ? '?' : a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a;
}

function hostPort(a: string | undefined, p: number | undefined): string {
  const h = unmap(a);
  return h.includes(':') ? `[${h}]:${p}` : `${h}:${p}`;
}

/** Answers one request: see the usage text. */
export function handleRequest(name: string, req: IncomingMessage, res: ServerResponse): void {
  const headers = {
    'x-backend': name,
    // what the backend saw: the client's address (unchanged by the NAT) and the DIP:port it was sent to
    'x-client': hostPort(req.socket.remoteAddress, req.socket.remotePort),
    'x-server': hostPort(req.socket.localAddress, req.socket.localPort),
  };
  const path = (req.url ?? '/').split('?')[0]!;
  const text = (status: number, body: string) => {
    res.writeHead(status, { ...headers, 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  if (path === '/health') {
    text(200, 'ok');
    return;
  }
  if (path === '/upload') {
    // reads the whole request body, then answers with its size (for uploads through the VIP: the
    // client's large packets cross the MUX, where path MTU discovery matters)
    let n = 0;
    req.on('data', (d: Buffer) => {
      n += d.length;
    });
    req.on('end', () => text(200, `${name} ${n}\n`));
    return;
  }
  let m = /^\/bytes\/(\d{1,12})$/.exec(path);
  if (m !== null) {
    const n = Number(m[1]);
    if (n > MAX_BYTES) {
      text(400, `at most ${MAX_BYTES} bytes\n`);
      return;
    }
    res.writeHead(200, { ...headers, 'content-type': 'application/octet-stream', 'content-length': n });
    const chunk = Buffer.alloc(Math.min(CHUNK_BYTES, Math.max(n, 1)), 0x78);
    let left = n;
    const pump = () => {
      while (left > 0) {
        const k = Math.min(left, chunk.length);
        left -= k;
        if (!res.write(k === chunk.length ? chunk : chunk.subarray(0, k))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    res.on('close', () => {
      left = 0;
    });
    pump();
    return;
  }
  m = /^\/slow\/(\d{1,9})$/.exec(path);
  if (m !== null) {
    const ms = Number(m[1]);
    if (ms > MAX_SLOW_MS) {
      text(400, `at most ${MAX_SLOW_MS} ms\n`);
      return;
    }
    const t = setTimeout(() => text(200, `${name}\n`), ms);
    res.on('close', () => clearTimeout(t));
    return;
  }
  text(200, `${name}\n`);
}

function listenHttp(name: string, port: number): Promise<void> {
  const server = createServer((req, res) => handleRequest(name, req, res));
  // an idle keep-alive connection is closed after 60 s, not 5: a connection waiting out a restarted host
  // agent or MUX (TCP retransmitting the next request) can be idle for seconds on a busy machine
  server.keepAliveTimeout = 60_000;
  server.on('clientError', (_e, socket) => socket.destroy());
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    // ipv6Only false: one socket for both families (IPv4 clients appear as ::ffff:a.b.c.d)
    server.listen({ port, host: '::', ipv6Only: false }, () => {
      server.off('error', reject);
      server.on('error', (e) => log('error', { kind: 'http', port, error: e.message }));
      resolve();
    });
  });
}

function listenUdpEcho(name: string, port: number): Promise<void> {
  const sock = createSocket({ type: 'udp6', ipv6Only: false });
  const prefix = Buffer.from(`${name} `);
  return new Promise((resolve, reject) => {
    sock.once('error', reject);
    sock.bind({ port, address: '::' }, () => {
      sock.off('error', reject);
      sock.on('error', (e) => log('error', { kind: 'udp-echo', port, error: e.message }));
      sock.on('message', (msg, rinfo) => {
        sock.send(Buffer.concat([prefix, msg]), rinfo.port, rinfo.address, (e) => {
          if (e) log('error', { kind: 'udp-echo', port, error: e.message });
        });
      });
      resolve();
    });
  });
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'name', value: 'NIC', help: 'the backend name: HTTP body and X-Backend header, UDP answer prefix' },
  { name: 'ports', value: 'P,P...', help: 'ports to listen on (TCP for http, UDP for udp-echo), on :: (IPv4 and IPv6)' },
  { name: 'help', help: 'this help' },
];

const HELP_EXTRA = `modes:
  http      HTTP/1.1 on every port: any path -> 200 "NIC\\n" with header X-Backend: NIC
            (also X-Client: the client's address:port as seen, X-Server: the local address:port);
            /health -> 200 "ok"; /bytes/N -> N bytes; /slow/MS -> "NIC\\n" after MS milliseconds; /upload reads the body -> "NIC BYTES\\n"
  udp-echo  answers each datagram from the same socket with "NIC " followed by the datagram`;

const USAGE = 'backend.js http|udp-echo --name NIC --ports P,P...';
const COMMAND: CommandSpec = {
  program: 'backend',
  usage: USAGE,
  options: OPTIONS,
  extraHelp: HELP_EXTRA,
  errorSuffix: `\nusage: ${USAGE} (see --help)`,
  about: 'A lab backend service (scripts/lab/lib.sh starts two per nic namespace).',
};

export const main = (argv: readonly string[]): Promise<number> => runCommandAsync(COMMAND, argv, runParsed);

async function runParsed(args: ParsedArgs): Promise<number> {
  const mode = args.positional[0];
  if (mode !== 'http' && mode !== 'udp-echo')
    throw new UsageError(`first argument must be the mode, http or udp-echo${mode === undefined ? '' : `, got ${JSON.stringify(mode)}`}`);
  if (args.positional.length > 1) throw new UsageError(`unexpected argument ${args.positional[1]}`);
  const name = one(args, 'name');
  if (name === undefined || name === '') throw new UsageError('--name NIC is required');
  const p = one(args, 'ports');
  if (p === undefined) throw new UsageError('--ports P,P... is required');
  const ports = parsePorts(p);
  try {
    await Promise.all(ports.map((p) => (mode === 'http' ? listenHttp(name, p) : listenUdpEcho(name, p))));
  } catch (e) {
    log('error', { kind: mode, error: (e as Error).message });
    return 1;
  }
  log('ready', { kind: mode, name, ports, pid: process.pid });
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => process.exit(0));
  return -1; // keep running
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => {
      if (rc >= 0) process.exit(rc);
    },
    (e) => {
      process.stderr.write(`backend: ${(e as Error).stack}\n`);
      process.exit(1);
    },
  );
}
