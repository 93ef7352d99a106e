// JSON over HTTP, client side, for slbctl and the daemons' policy client (runtime/policy-client.ts):
// one request, a JSON body in, the answer's status and parsed JSON out. Plain `http:` only (the
// controller's API is HTTP on the fabric or loopback). Never throws synchronously; the promise rejects
// with an HttpJsonError on a network failure or timeout (code ECONNREFUSED, ETIMEDOUT, ...), never on
// an HTTP status: 4xx and 5xx answers resolve like any other.
import { request, type Agent, type IncomingHttpHeaders } from 'node:http';

export interface JsonResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The parsed JSON body; null when the body was empty or not JSON (see `text`). */
  readonly body: unknown;
  readonly text: string;
}

export interface JsonRequestOptions {
  method?: string;
  /** Sent as JSON (content-type application/json); undefined sends no body. */
  body?: unknown;
  /** Whole request, connect to last byte of the answer (default 10 s). */
  timeoutMs?: number;
  /** A keep-alive agent, or false for a fresh connection (the default). */
  agent?: Agent | false;
  headers?: Record<string, string>;
  /** Aborts the request (the promise rejects with code ABORTED). */
  signal?: AbortSignal;
  /** Answers larger than this are cut off with an error (default 16 MiB). */
  maxBytes?: number;
}

export class HttpJsonError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

export const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

/** Parses and checks a controller URL (`http://198.18.0.5:8480`); returns an error message or the URL. */
export function parseControllerUrl(text: string): URL | string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return `not a URL: ${JSON.stringify(text)} (expected http://ADDRESS:PORT)`;
  }
  if (u.protocol !== 'http:') return `only http:// URLs are supported, got ${JSON.stringify(text)}`;
  if (u.search !== '' || u.hash !== '') return `the controller URL takes no query or fragment: ${JSON.stringify(text)}`;
  return u;
}

/**
 * A list of controller URLs, comma-separated (`http://198.18.0.21:8480,http://198.18.0.22:8480`: the
 * replicas of one controller, docs/controller.md); an error message naming the bad one, or the URLs.
 */
export function parseControllerUrls(text: string): URL[] | string {
  const out: URL[] = [];
  for (const part of text.split(',')) {
    const u = parseControllerUrl(part.trim());
    if (typeof u === 'string') return text.includes(',') ? `${u} (in the list ${JSON.stringify(text)})` : u;
    out.push(u);
  }
  return out;
}

/** `base` + `path` (path starts with /; base may carry a path prefix). */
export function joinUrl(base: URL, path: string): URL {
  const prefix = base.pathname.replace(/\/+$/, '');
  return new URL(`${base.protocol}//${base.host}${prefix}${path}`);
}

export function requestJson(url: URL, o: JsonRequestOptions = {}): Promise<JsonResponse> {
  return new Promise((resolve, reject) => {
    const payload = o.body === undefined ? undefined : Buffer.from(JSON.stringify(o.body));
    const headers: Record<string, string> = { accept: 'application/json', ...(o.headers ?? {}) };
    if (payload !== undefined) {
      headers['content-type'] ??= 'application/json';
      headers['content-length'] = String(payload.length);
    }
    let settled = false;
    const fail = (message: string, code: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
      reject(new HttpJsonError(message, code));
    };
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    let req: ReturnType<typeof request>;
    try {
      req = request({
        host,
        port: url.port === '' ? 80 : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: o.method ?? 'GET',
        headers,
        agent: o.agent ?? false,
      });
    } catch (e) {
      fail((e as Error).message, 'EINVAL');
      return;
    }
    const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const timer = setTimeout(() => {
      fail(`no answer from ${url.host} within ${timeoutMs} ms`, 'ETIMEDOUT');
      req.destroy();
    }, timeoutMs);
    const onAbort = () => {
      fail('aborted', 'ABORTED');
      req.destroy();
    };
    // before any destroy(): a request destroyed without an error listener (one made after its signal was
    // aborted, e.g. a heartbeat posted after stop()) threw "socket hang up" as an uncaught exception
    req.on('error', (e: NodeJS.ErrnoException) => fail(`${url.host}: ${e.message}`, e.code ?? 'EIO'));
    if (o.signal !== undefined) {
      if (o.signal.aborted) {
        onAbort();
        return;
      }
      o.signal.addEventListener('abort', onAbort, { once: true });
    }
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let n = 0;
      const max = o.maxBytes ?? DEFAULT_MAX_BYTES;
      res.on('data', (d: Buffer) => {
        n += d.length;
        if (n > max) {
          fail(`answer from ${url.host} larger than ${max} bytes`, 'E2BIG');
          req.destroy();
          return;
        }
        chunks.push(d);
      });
      res.on('error', (e: NodeJS.ErrnoException) => fail(`${url.host}: ${e.message}`, e.code ?? 'EIO'));
      res.on('aborted', () => fail(`${url.host}: the answer was cut off`, 'ECONNRESET'));
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        o.signal?.removeEventListener('abort', onAbort);
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = null;
        if (text.trim() !== '') {
          try {
            body = JSON.parse(text);
          } catch {
            body = null;
          }
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text });
      });
    });
    req.end(payload);
  });
}
