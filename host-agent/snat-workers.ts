// Outbound NAT with host agent workers (--workers N >= 2, docs/outbound.md "Workers"): what the main thread
// makes of the workers' reports, and of their answers to a withdrawal. Pure: no threads, timers or I/O.
//
// Every worker runs its own SnatEngine over the SAME port chunks (the policy's ranges for each nic, less
// the chunks being given back). That cannot put two live flows on one (frontend IP, port, remote IP,
// remote port): the kernel steers every frame of a flow, both ways, to the worker of its remote end
// (host-agent/worker-steering.ts), so every flow toward one remote endpoint is in one worker's engine, and
// that engine takes a port toward a remote endpoint only when no flow of its own holds it toward that
// endpoint. The same port is used toward other remote endpoints by other workers, as one engine uses it.
//
// The plan (host-agent/snat-control.ts) then reads, per nic and family:
//   ports in use: the SUM over the workers. Each flow is in exactly one worker, so the sum is the number
//     of flows one engine would hold for the same traffic: the demand threshold (75 % of the ports held)
//     means what it means with one thread. The max would ask later than one thread would (two workers at
//     40 % each are 80 % of the flows on the same ports), and the ports are not split among the workers:
//     every worker holds all of them, so a worker's own share says nothing of the nic's.
//   exhaustion drops: the SUM (each refused connection was refused by one worker); a worker's count of an
//     earlier life is carried (it restarts from 0), so the total never goes back.
//   chunks carrying a flow: the UNION: a chunk is idle only when no worker has a flow on it.
// A release withdraws its chunks from EVERY worker before it is sent: each worker leaves them out of its
// engine (from then on no flow opens there on them) unless one of its live flows holds a port of one,
// which it keeps and names in its answer (a flow opened between its last report and the withdrawal);
// settleWithdrawal then keeps those chunks for everyone and releases the rest. A worker that does not
// answer in time keeps every chunk of the release (nothing is given back that one may still use); a worker
// that exited had its flows end with it and answers nothing.

/** One worker's outbound NAT, in its report (every 250 ms). */
export interface SnatWorkerReport {
  /** Live flows (TIME-WAIT included). */
  flows: number;
  /** Per nic name: ports in use (flows) IPv4, IPv6, exhaustion drops IPv4, IPv6 since the worker started. */
  nics: [string, number, number, number, number][];
  /** The chunks ("ip:first") a live flow of this worker holds a port of (sampled at most every second). */
  used: string[];
}

/** What the main thread plans from: keyed "nic/family". */
export interface SnatUsage {
  flows: number;
  inUse: Map<string, number>;
  exhausted: Map<string, number>;
  used: Set<string>;
}

/**
 * The workers' reports (null: none yet, or the worker is not running) summed: flows and ports in use summed,
 * exhaustion drops summed with `carried` (keyed "nic/family": the drops of the workers' earlier lives), the
 * chunks carrying a flow united.
 */
export function mergeSnatReports(reports: readonly (SnatWorkerReport | null)[], carried: ReadonlyMap<string, number>): SnatUsage {
  const u: SnatUsage = { flows: 0, inUse: new Map(), exhausted: new Map(carried), used: new Set() };
  const add = (m: Map<string, number>, k: string, v: number) => {
    if (Number.isFinite(v) && v > 0) m.set(k, (m.get(k) ?? 0) + v);
  };
  for (const r of reports) {
    if (r === null) continue;
    if (Number.isFinite(r.flows) && r.flows > 0) u.flows += r.flows;
    for (const [nic, in4, in6, ex4, ex6] of r.nics) {
      add(u.inUse, `${nic}/4`, in4);
      add(u.inUse, `${nic}/6`, in6);
      add(u.exhausted, `${nic}/4`, ex4);
      add(u.exhausted, `${nic}/6`, ex6);
    }
    for (const k of r.used) u.used.add(k);
  }
  return u;
}

/** A worker's exhaustion drops added to `carried` when it exits (its next life counts from 0). */
export function carrySnatExhausted(carried: Map<string, number>, r: SnatWorkerReport | null): void {
  for (const [nic, , , ex4, ex6] of r?.nics ?? []) {
    if (ex4 > 0) carried.set(`${nic}/4`, (carried.get(`${nic}/4`) ?? 0) + ex4);
    if (ex6 > 0) carried.set(`${nic}/6`, (carried.get(`${nic}/6`) ?? 0) + ex6);
  }
}

/** A worker's answer to a withdrawal: the withdrawn chunks it still has a flow on; 'exited': it ended (its flows with it); 'timeout': none in time. */
export type WithdrawAnswer = string[] | 'exited' | 'timeout';

/**
 * The chunks of a withdrawal (`chunks`, "ip:first") that must stay: every chunk a worker still has a flow
 * on, and every chunk if a running worker did not answer.
 */
export function settleWithdrawal(chunks: readonly string[], answers: readonly WithdrawAnswer[]): Set<string> {
  const keep = new Set<string>();
  const mine = new Set(chunks);
  for (const a of answers) {
    if (a === 'exited') continue;
    if (a === 'timeout') return new Set(chunks);
    for (const k of a) if (mine.has(k)) keep.add(k);
  }
  return keep;
}
