// A small etcd v3 client over etcd's HTTP/JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke; keys and values base64, 64-bit integers as
// decimal strings). The gateway rather than the `etcd3` npm client: the controller needs five calls,
// which are plain JSON requests over the HTTP client slbx already has (runtime/http-json.ts), so no
// gRPC stack and no new dependency; every etcd 3.4+ serves it on the client port.
//
// A request goes to the endpoint that answered last; on a network error or timeout it is tried on
// the next one, each at most once. An etcd error (no leader, request timed out, ...) is an answer, not
// a network failure: it is thrown as an EtcdError naming it, without trying another member (a member
// without quorum answers the same everywhere, and a write must not be sent twice).
import { Agent } from 'node:http';
import { HttpJsonError, requestJson } from '../runtime/http-json.js';

export interface EtcdKv {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  lease: string;
}

export type EtcdCompare =
  | { key: string; target: 'CREATE'; createRevision: number }
  | { key: string; target: 'MOD'; modRevision: number }
  | { key: string; target: 'VALUE'; value: string };

export type EtcdOp = { put: { key: string; value: string; lease?: string } } | { range: { key: string; prefix?: boolean } };

export interface EtcdTxnResult {
  succeeded: boolean;
  /** The store's revision after the transaction (a write's kv has this mod revision). */
  revision: number;
  /** The kvs of each range op, in order (puts give an empty list). */
  ranges: EtcdKv[][];
}

export class EtcdError extends Error {
  constructor(
    message: string,
    /** 'network' (no member answered), or 'etcd' (a member answered with an error). */
    readonly kind: 'network' | 'etcd',
  ) {
    super(message);
  }
}

export const ETCD_REQUEST_TIMEOUT_MS = 3000;

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: unknown) => (typeof s === 'string' ? Buffer.from(s, 'base64').toString('utf8') : '');
const int = (s: unknown) => (typeof s === 'string' || typeof s === 'number' ? Number(s) : 0);

/** The end of the range holding every key that starts with `prefix` (etcd's prefix convention). */
export function prefixEnd(prefix: string): string {
  const b = Buffer.from(prefix, 'utf8');
  for (let i = b.length - 1; i >= 0; i--) {
    if (b[i]! < 0xff) {
      const out = Buffer.from(b.subarray(0, i + 1));
      out[i] = b[i]! + 1;
      return out.toString('base64');
    }
  }
  return Buffer.from([0]).toString('base64'); // every key
}

/** `host:port` endpoints (IPv6 in brackets) from `etcd://h:p,h:p[/prefix]`; an error message or the parts. */
export function parseEtcdUrl(text: string): { endpoints: string[]; prefix: string } | string {
  const m = /^etcd:\/\/([^/]+)(\/.*)?$/.exec(text);
  if (m === null) return `expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX], got ${JSON.stringify(text)}`;
  const endpoints: string[] = [];
  for (const ep of m[1]!.split(',')) {
    const e = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(ep);
    if (e === null || Number(e[2]) < 1 || Number(e[2]) > 65535)
      return `etcd endpoint ${JSON.stringify(ep)} is not HOST:PORT (an IPv6 address in brackets: [2001:db8::5]:2379)`;
    endpoints.push(ep);
  }
  const prefix = (m[2] ?? '/slbx').replace(/\/+$/, '');
  if (prefix === '') return 'the etcd key prefix cannot be / alone: name the cluster (etcd://HOST:PORT/slbx/NAME)';
  return { endpoints, prefix };
}

export class EtcdClient {
  private next = 0;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 8 });

  constructor(
    readonly endpoints: readonly string[],
    private readonly timeoutMs = ETCD_REQUEST_TIMEOUT_MS,
  ) {
    if (endpoints.length === 0) throw new Error('no etcd endpoint');
  }

  /** The endpoint requests go to now. */
  get endpoint(): string {
    return this.endpoints[this.next % this.endpoints.length]!;
  }

  close(): void {
    this.agent.destroy();
  }

  private async call(path: string, body: unknown): Promise<Record<string, unknown>> {
    const errors: string[] = [];
    for (let i = 0; i < this.endpoints.length; i++) {
      const ep = this.endpoint;
      let r;
      try {
        r = await requestJson(new URL(`http://${ep}/v3/${path}`), {
          method: 'POST',
          body,
          timeoutMs: this.timeoutMs,
          agent: this.agent,
        });
      } catch (e) {
        errors.push(`${ep}: ${e instanceof HttpJsonError ? e.message : String(e)}`);
        this.next = (this.next + 1) % this.endpoints.length;
        continue;
      }
      // a streamed answer (lease keepalive) is one JSON object per line, wrapped in {result}
      let b = r.body as Record<string, unknown> | null;
      if (b === null) {
        try {
          b = JSON.parse(r.text.split('\n')[0] ?? '') as Record<string, unknown>;
        } catch {
          b = null;
        }
      }
      if (b !== null && typeof b === 'object' && 'result' in b && typeof b['result'] === 'object')
        b = b['result'] as Record<string, unknown>;
      if (r.status !== 200 || b === null || typeof b !== 'object' || 'error' in b) {
        const msg = b !== null && typeof b === 'object' ? (b['message'] ?? b['error']) : null;
        throw new EtcdError(`etcd ${ep} answered ${r.status}: ${typeof msg === 'string' ? msg : r.text.trim().slice(0, 200)}`, 'etcd');
      }
      return b;
    }
    throw new EtcdError(`no etcd member answered (${errors.join('; ')})`, 'network');
  }

  async range(key: string, prefix = false): Promise<{ kvs: EtcdKv[]; revision: number }> {
    const b = await this.call('kv/range', prefix ? { key: b64(key), range_end: prefixEnd(key) } : { key: b64(key) });
    return { kvs: kvsOf(b['kvs']), revision: int((b['header'] as Record<string, unknown> | undefined)?.['revision']) };
  }

  async txn(compare: readonly EtcdCompare[], success: readonly EtcdOp[], failure: readonly EtcdOp[]): Promise<EtcdTxnResult> {
    const b = await this.call('kv/txn', {
      compare: compare.map((c) =>
        c.target === 'CREATE'
          ? { key: b64(c.key), target: 'CREATE', result: 'EQUAL', create_revision: String(c.createRevision) }
          : c.target === 'MOD'
            ? { key: b64(c.key), target: 'MOD', result: 'EQUAL', mod_revision: String(c.modRevision) }
            : { key: b64(c.key), target: 'VALUE', result: 'EQUAL', value: b64(c.value) },
      ),
      success: success.map(opJson),
      failure: failure.map(opJson),
    });
    const succeeded = b['succeeded'] === true;
    const ops = succeeded ? success : failure;
    const responses = Array.isArray(b['responses']) ? (b['responses'] as Record<string, unknown>[]) : [];
    const ranges = ops.map((op, i) =>
      'range' in op ? kvsOf((responses[i]?.['response_range'] as Record<string, unknown> | undefined)?.['kvs']) : [],
    );
    return { succeeded, revision: int((b['header'] as Record<string, unknown> | undefined)?.['revision']), ranges };
  }

  /** A new lease; its ID (a decimal string). */
  async leaseGrant(ttlS: number): Promise<string> {
    const b = await this.call('lease/grant', { TTL: String(ttlS) });
    if (typeof b['ID'] !== 'string') throw new EtcdError('etcd granted no lease ID', 'etcd');
    return b['ID'];
  }

  /** Renews the lease; its remaining TTL in seconds, 0 when it is gone (expired or revoked). */
  async leaseKeepAlive(id: string): Promise<number> {
    const b = await this.call('lease/keepalive', { ID: id });
    return int(b['TTL']);
  }

  async leaseRevoke(id: string): Promise<void> {
    await this.call('lease/revoke', { ID: id });
  }
}

function opJson(op: EtcdOp): unknown {
  if ('put' in op) {
    const p: Record<string, string> = { key: b64(op.put.key), value: b64(op.put.value) };
    if (op.put.lease !== undefined) p['lease'] = op.put.lease;
    return { request_put: p };
  }
  return {
    request_range: op.range.prefix === true ? { key: b64(op.range.key), range_end: prefixEnd(op.range.key) } : { key: b64(op.range.key) },
  };
}

function kvsOf(v: unknown): EtcdKv[] {
  if (!Array.isArray(v)) return [];
  return v.map((x: Record<string, unknown>) => ({
    key: unb64(x['key']),
    value: unb64(x['value']),
    createRevision: int(x['create_revision']),
    modRevision: int(x['mod_revision']),
    lease: typeof x['lease'] === 'string' ? x['lease'] : '0',
  }));
}
