// The MUX's traffic counters per backend and per (VIP, rule) (docs/metrics.md): plain Float64Arrays
// indexed by what the data plane already hands the daemon after VERDICT_FORWARD (ctx.lastNic.id and
// ctx.lastRule.slot), bumped in the daemon's send step (mux/daemon.ts onFrame) and read at scrape or
// heartbeat time. Nic ids and rule slots are stable for the process's life and never reused
// (mux/tables.ts), so counts carry over every new config; grow() makes room for new ones.
//
// A new flow is one for which the data plane bumped flow_new while placing it: the daemon reads flow_new
// before processPacket and compares after (no change to the data plane's flow code).
import type { MuxContext } from './data-plane.js';
import type { MuxTables } from './tables.js';

/** Counts per slot: [STRIDE s] packets, [STRIDE s + 1] bytes, [STRIDE s + 2] new flows. */
export const TRAFFIC_STRIDE = 3;

export interface BackendTraffic {
  backend: string;
  vni: number | null;
  /** VXLAN frames forwarded to the backend, and their bytes. */
  packets: number;
  bytes: number;
  /** New flows placed on the backend (flow_new), forwarded. */
  newFlows: number;
}

export interface RuleTraffic {
  vip: string;
  rule: string;
  /** Frames to the VIP forwarded under the rule, and their bytes as captured (the client's frames). */
  packets: number;
  bytes: number;
  /** New flows under the rule (flow_new), forwarded. */
  newFlows: number;
}

export class MuxTrafficCounters {
  /** By nic id (tables.nicIds): packets, VXLAN bytes, new flows. */
  nic = new Float64Array(0);
  /** By rule slot (tables.ruleSlots): packets, captured bytes, new flows. */
  rule = new Float64Array(0);

  /** Room for every nic id and rule slot of `t` (ids and slots only grow). */
  grow(t: MuxTables): void {
    this.nic = grown(this.nic, t.nicIds.size * TRAFFIC_STRIDE);
    this.rule = grown(this.rule, t.ruleSlots.length * TRAFFIC_STRIDE);
  }

  /**
   * A frame forwarded (VERDICT_FORWARD, the daemon's and each worker's send step): its backend's slot
   * (ctx.lastNic) counts it and its VXLAN bytes (ctx.outLen), its rule's (ctx.lastRule; none for outbound
   * NAT's replies, counted in snat_forwarded) it and its captured bytes `len`; `newFlow` 1 when flow_new moved.
   */
  forwarded(ctx: Pick<MuxContext, 'lastNic' | 'lastRule' | 'outLen'>, len: number, newFlow: number): void {
    const k = ctx.lastNic!.id * TRAFFIC_STRIDE;
    this.nic[k]!++;
    this.nic[k + 1]! += ctx.outLen;
    this.nic[k + 2]! += newFlow;
    if (ctx.lastRule !== null) {
      const r = ctx.lastRule.slot * TRAFFIC_STRIDE;
      this.rule[r]!++;
      this.rule[r + 1]! += len;
      this.rule[r + 2]! += newFlow;
    }
  }

  /** Per backend ever configured (by the tables' nic ids). */
  backends(t: MuxTables): BackendTraffic[] {
    const out: BackendTraffic[] = [];
    for (const [name, id] of t.nicIds) {
      const k = id * TRAFFIC_STRIDE;
      out.push({
        backend: name,
        vni: t.nicsById[id]?.vni ?? null,
        packets: this.nic[k] ?? 0,
        bytes: this.nic[k + 1] ?? 0,
        newFlows: this.nic[k + 2] ?? 0,
      });
    }
    return out;
  }

  /** Per (VIP, rule) ever configured. */
  rules(t: MuxTables): RuleTraffic[] {
    return t.ruleSlots.map((r, s) => {
      const k = s * TRAFFIC_STRIDE;
      return { vip: r.vip, rule: r.rule, packets: this.rule[k] ?? 0, bytes: this.rule[k + 1] ?? 0, newFlows: this.rule[k + 2] ?? 0 };
    });
  }
}

function grown(a: Float64Array<ArrayBuffer>, need: number): Float64Array<ArrayBuffer> {
  if (a.length >= need) return a;
  const next = new Float64Array(need);
  next.set(a);
  return next;
}
