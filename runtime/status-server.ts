// The loopback status endpoint of a daemon: GET paths answer JSON (counters, tables, flows). It listens
// on loopback unless told otherwise; it never changes state (but for the test hooks' POST paths, with
// --test-hooks only: runtime/test-hooks.ts).
import { createServer, type Server, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';

export interface ListenAddress {
  host: string;
  port: number;
}

/** Parses `127.0.0.1:9180`, `[::1]:9180` or `:9180` (loopback). Returns an error message on failure. */
export function parseListen(text: string): ListenAddress | string {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (m === null) return `expected HOST:PORT, [IPV6]:PORT or :PORT, got ${JSON.stringify(text)}`;
  const host = m[1] ?? (m[2] === '' ? '127.0.0.1' : m[2]!);
  const port = Number(m[3]);
  if (isIP(host) === 0) return `not an IP address: ${JSON.stringify(host)}`;
  if (port < 1 || port > 65535) return `port must be 1..65535, got ${port}`;
  return { host, port };
}

export function isLoopback(host: string): boolean {
  return host === '::1' || host.startsWith('127.');
}

export type StatusHandler = (path: string, query: URLSearchParams) => unknown;

/** A handler's answer sent as it is (GET /metrics: the Prometheus text format), not as JSON. */
export class TextBody {
  constructor(
    readonly text: string,
    readonly contentType: string,
  ) {}
}

/**
 * Starts the server; resolves once it listens, rejects with the listen error. `post`: answers POST (the
 * test hooks; undefined: 404); without it POST is refused like any other method. An error a handler
 * throws with a numeric `status` is answered with that status.
 */
export function startStatusServer(addr: ListenAddress, handler: StatusHandler, post?: StatusHandler): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' && (req.method !== 'POST' || post === undefined)) {
      res.writeHead(405, { 'content-type': 'application/json', allow: 'GET' });
      res.end('{"error":"only GET: the status endpoint is read-only"}\n');
      return;
    }
    const url = new URL(req.url ?? '/', 'http://status');
    const fail = (e: unknown): void => {
      const status = (e as { status?: unknown }).status;
      res.writeHead(typeof status === 'number' ? status : 500, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify({ error: (e as Error).message })}\n`);
    };
    let body: unknown;
    try {
      body = (req.method === 'POST' ? post! : handler)(url.pathname, url.searchParams);
    } catch (e) {
      fail(e);
      return;
    }
    // a handler may answer later (a daemon with workers first brings their counters up to date)
    if (body instanceof Promise) body.then((b: unknown) => send(res, url, b), fail);
    else send(res, url, body);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Writes a handler's answer: 404 for undefined, a TextBody as it is, anything else as JSON. */
function send(res: ServerResponse, url: URL, body: unknown): void {
  if (body === undefined) {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(`${JSON.stringify({ error: `no such path ${url.pathname}` })}\n`);
    return;
  }
  if (body instanceof TextBody) {
    res.writeHead(200, { 'content-type': body.contentType, 'content-length': Buffer.byteLength(body.text) });
    res.end(body.text);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(`${JSON.stringify(body, null, 2)}\n`);
}
