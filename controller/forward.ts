// A follower replica's part of the API (docs/controller.md, "Replicas"): what it answers itself and
// what it forwards to the leader. It answers reads of the desired state and the agents' policy
// watches from its own copy (kept current from etcd); it forwards every change (all methods but GET
// and HEAD: the northbound writes and the agents' acks, heartbeats and health reports, so that health
// reaches the leader, which alone computes policy from it) and the reads only the leader can answer
// (the agents' views and acks: GET /v1/agents..., GET /v1/generations/N). The answer is the leader's,
// passed through with `slbx-forwarded-by: ID` added. No leader known, or the leader unreachable: 503
// naming why, and nothing was changed (the client may retry, here or at another replica).
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { ReplicaView } from './replica.js';

export const FORWARDED_HEADER = 'slbx-forwarded-by';
export const FORWARD_TIMEOUT_MS = 30_000;

/** Whether a follower forwards this request (`seg`: the path's segments, ['v1', ...]). */
export function forwardsToLeader(method: string, seg: readonly string[]): boolean {
  if (method !== 'GET' && method !== 'HEAD') return true;
  if (seg[1] === 'agents') return seg[4] !== 'policy';
  return seg[1] === 'generations' && seg.length === 3;
}

/** Sends the request to the leader and its answer back. */
export function forwardToLeader(req: IncomingMessage, res: ServerResponse, replica: ReplicaView, pathAndQuery: string): void {
  const fail = (why: string) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = `${JSON.stringify({ error: why, replica: replica.id, leader: replica.leader() }, null, 2)}\n`;
    res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'retry-after': '1' });
    res.end(text);
    req.resume();
  };
  const problem = replica.problem();
  const why = problem === null ? 'an election is under way' : `etcd: ${problem}`;
  if (req.headers[FORWARDED_HEADER] !== undefined) {
    fail(
      `this replica (${replica.id}) is not the leader either (forwarded by ${String(req.headers[FORWARDED_HEADER])}; ${why}); nothing was changed: retry`,
    );
    return;
  }
  const leader = replica.leader();
  if (leader === null) {
    fail(`no controller replica is the leader now (${why}); nothing was changed: retry`);
    return;
  }
  let target: URL;
  try {
    target = new URL(pathAndQuery, leader.url);
  } catch {
    fail(`the leader's URL ${JSON.stringify(leader.url)} is not a URL`);
    return;
  }
  const headers = { ...req.headers, [FORWARDED_HEADER]: replica.id, host: target.host };
  const out = request({
    host: target.hostname.replace(/^\[|\]$/g, ''),
    port: target.port === '' ? 80 : Number(target.port),
    path: `${target.pathname}${target.search}`,
    method: req.method,
    headers,
    timeout: FORWARD_TIMEOUT_MS,
  });
  out.on('timeout', () => out.destroy(new Error(`no answer within ${FORWARD_TIMEOUT_MS} ms`)));
  // a write the leader may have taken cannot be said to be refused: only a failure to connect is
  let connected = false;
  out.on('socket', (s) => s.once('connect', () => (connected = true)));
  out.on('error', (e) =>
    fail(
      connected
        ? `the leader ${leader.id} at ${leader.url} did not answer (${e.message}): the change may or may not be made; read the state before retrying`
        : `the leader ${leader.id} at ${leader.url} is unreachable (${e.message}); nothing was changed: retry`,
    ),
  );
  out.on('response', (r) => {
    const h = { ...r.headers, [FORWARDED_HEADER]: replica.id };
    res.writeHead(r.statusCode ?? 502, h);
    r.pipe(res);
  });
  res.on('close', () => {
    if (!res.writableFinished) out.destroy();
  });
  req.pipe(out);
}
