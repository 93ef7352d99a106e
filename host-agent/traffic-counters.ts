// The host agent's traffic counters per backend (docs/metrics.md): one slot per nic of the tables (its
// index, the port number the data plane hands the daemon), bumped in the daemon's send steps
// (host-agent/daemon.ts: judgeInbound for frames NATed and delivered to the nic's port, onPortFrame for
// the nic's replies sent by DSR) and read at scrape or heartbeat time. A new config renumbers the nics:
// remap() carries each nic's counts over by name, and keeps those of a nic that left (a nic that comes
// back continues from them), so a counter never goes down.
import type { HostNic } from './tables.js';

/** Counts per nic index: [STRIDE i] packets, [STRIDE i + 1] bytes. */
export const HOST_TRAFFIC_STRIDE = 2;

export interface HostBackendTraffic {
  backend: string;
  /** Frames NATed and handed to the nic's port, and their bytes (the inner Ethernet frame). */
  deliveredPackets: number;
  deliveredBytes: number;
  /** The nic's replies rewritten to the VIP and sent by DSR, and their bytes (IP packets). */
  dsrPackets: number;
  dsrBytes: number;
}

export class HostTrafficCounters {
  /** By nic index: delivered packets, bytes. */
  delivered: Float64Array<ArrayBuffer>;
  /** By nic index: replies sent by DSR, bytes. */
  dsr: Float64Array<ArrayBuffer>;
  private names: string[];
  /** Nics no longer in the tables: [delivered packets, bytes, dsr packets, bytes] by name. */
  private readonly gone = new Map<string, number[]>();

  constructor(nics: readonly HostNic[]) {
    this.names = nics.map((n) => n.name);
    this.delivered = new Float64Array(nics.length * HOST_TRAFFIC_STRIDE);
    this.dsr = new Float64Array(nics.length * HOST_TRAFFIC_STRIDE);
  }

  /** The tables' nics changed (applyConfig): new arrays indexed by the new nics, counts moved by name. */
  remap(nics: readonly HostNic[]): void {
    const old = new Map<string, number[]>(this.gone);
    this.names.forEach((name, i) => {
      const k = i * HOST_TRAFFIC_STRIDE;
      old.set(name, [this.delivered[k]!, this.delivered[k + 1]!, this.dsr[k]!, this.dsr[k + 1]!]);
    });
    const delivered = new Float64Array(nics.length * HOST_TRAFFIC_STRIDE);
    const dsr = new Float64Array(nics.length * HOST_TRAFFIC_STRIDE);
    for (const n of nics) {
      const v = old.get(n.name);
      if (v === undefined) continue;
      const k = n.index * HOST_TRAFFIC_STRIDE;
      delivered[k] = v[0]!;
      delivered[k + 1] = v[1]!;
      dsr[k] = v[2]!;
      dsr[k + 1] = v[3]!;
      old.delete(n.name);
    }
    this.gone.clear();
    for (const [name, v] of old) this.gone.set(name, v);
    this.names = nics.map((n) => n.name);
    this.delivered = delivered;
    this.dsr = dsr;
  }

  /** Per nic of the tables, then per nic that left them (its last counts). */
  backends(): HostBackendTraffic[] {
    const out = this.names.map((backend, i) => {
      const k = i * HOST_TRAFFIC_STRIDE;
      return {
        backend,
        deliveredPackets: this.delivered[k]!,
        deliveredBytes: this.delivered[k + 1]!,
        dsrPackets: this.dsr[k]!,
        dsrBytes: this.dsr[k + 1]!,
      };
    });
    for (const [backend, v] of this.gone)
      out.push({ backend, deliveredPackets: v[0]!, deliveredBytes: v[1]!, dsrPackets: v[2]!, dsrBytes: v[3]! });
    return out;
  }
}
