// GET /metrics of the host agent (docs/metrics.md): the data plane's counters, per backend the frames
// delivered and the replies sent by DSR, the backends' ports and their health probes, all read at scrape
// time. Nothing here runs per packet.
import { PromWriter, writeCounterFamilies } from '../shared/prom-text.js';
import type { HostDaemon } from './daemon.js';
import { FLOW_KIND_NAMES } from './flow-table.js';

const DIRECTIONS = {
  in_packets: {
    metric: 'slbx_host_packets_total',
    help: 'Packets judged: VXLAN in from the fabric (in), frames from the backends (out).',
    labels: { direction: 'in' },
  },
  out_packets: {
    metric: 'slbx_host_packets_total',
    help: 'Packets judged: VXLAN in from the fabric (in), frames from the backends (out).',
    labels: { direction: 'out' },
  },
  in_bytes: { metric: 'slbx_host_bytes_total', help: 'Bytes of the packets judged, in and out.', labels: { direction: 'in' } },
  out_bytes: { metric: 'slbx_host_bytes_total', help: 'Bytes of the packets judged, in and out.', labels: { direction: 'out' } },
} as const;

const PROBE_STATES = ['unknown', 'up', 'down'] as const;

export function writeHostMetrics(d: HostDaemon): PromWriter {
  const w = new PromWriter();
  const st = d.status();
  w.add('slbx_host_ready', 'gauge', 'The daemon serves traffic (GET /status ready).', {}, st.ready === true ? 1 : 0);
  w.add('slbx_host_tables_generation', 'gauge', "The host agent's own table generation.", {}, Number(st.generation));
  writeCounterFamilies(w, 'slbx_host', d.counters(), DIRECTIONS);
  writeHostFlows(w, st.eastWest as EastWestStatus);

  w.family(
    'slbx_host_backend_delivered_packets_total',
    'counter',
    "Frames the host agent NATed and handed to a backend's port, by backend (nic).",
  );
  w.family('slbx_host_backend_delivered_bytes_total', 'counter', 'Bytes of those frames (the inner Ethernet frames).');
  w.family(
    'slbx_host_backend_dsr_packets_total',
    'counter',
    "A backend's replies rewritten to the VIP and sent to the router (direct server return).",
  );
  w.family('slbx_host_backend_dsr_bytes_total', 'counter', 'Bytes of those replies (IP packets).');
  for (const b of d.traffic.backends()) {
    const l = { backend: b.backend };
    w.sample('slbx_host_backend_delivered_packets_total', l, b.deliveredPackets);
    w.sample('slbx_host_backend_delivered_bytes_total', l, b.deliveredBytes);
    w.sample('slbx_host_backend_dsr_packets_total', l, b.dsrPackets);
    w.sample('slbx_host_backend_dsr_bytes_total', l, b.dsrBytes);
  }

  w.family('slbx_host_port_open', 'gauge', "1 when the backend's port (its veth) is open for delivery.");
  for (const p of (st.ports ?? []) as { nic: string; open: boolean }[]) w.sample('slbx_host_port_open', { backend: p.nic }, p.open ? 1 : 0);

  w.family('slbx_host_probe_up', 'gauge', 'Health of a backend by probe and address family: 1 up, 0 down or not known yet.');
  w.family('slbx_host_probe_state', 'gauge', "The probe dampener's state (unknown, up, down): 1 for the current one.");
  w.family('slbx_host_probe_rtt_seconds', 'gauge', 'Round trip of the last successful probe, seconds (NaN: none yet).');
  w.family('slbx_host_probe_state_seconds', 'gauge', 'Seconds since the probe state last changed.');
  const now = Date.now();
  for (const p of d.prober.status()) {
    const l = { backend: p.nic, probe: p.probe, family: `ipv${p.family}` };
    w.sample('slbx_host_probe_up', l, p.state === 'up' ? 1 : 0);
    for (const s of PROBE_STATES) w.sample('slbx_host_probe_state', { ...l, state: s }, p.state === s ? 1 : 0);
    w.sample('slbx_host_probe_rtt_seconds', l, p.rttMs === null ? NaN : p.rttMs / 1000);
    w.sample('slbx_host_probe_state_seconds', l, Math.max(0, (now - Date.parse(p.since)) / 1000));
  }
  return w;
}

/** The east-west part of the host agent's /status (host-agent/east-west-io.ts, ewStatus). */
interface EastWestStatus {
  flows: Record<string, number>;
  maxFastpathFlows: number;
  /** The whole table's bound (flowTable.hostMaxFlows); absent in an older status: maxFastpathFlows was the bound. */
  maxFlows?: number;
  quotas?: Record<string, { max: number; used: number }>;
}

/** Its one flow table's entries by kind (every kind, zeros included), its bound, and each feature's quota and use. */
export function writeHostFlows(w: PromWriter, ew: EastWestStatus): void {
  w.family(
    'slbx_host_flows',
    'gauge',
    "Entries of the host agent's one flow table by kind (--workers N: summed over the workers' tables): to_mux (sent to a MUX, not redirected yet), fastpath, fastpath_closing (after a FIN or RST) (east-west, docs/east-west.md); dsr and dsr_closing: load-balanced flows delivered here, whose replies may leave from the VIP (docs/design.md, 'Return path'); snat_out and snat_in: the two entries of each outbound NAT flow (docs/outbound.md).",
  );
  for (const kind of Object.values(FLOW_KIND_NAMES)) w.sample('slbx_host_flows', { kind }, ew.flows[kind] ?? 0);
  w.family(
    'slbx_host_flows_max',
    'gauge',
    "The flow table's bound, every feature together (flowTable.hostMaxFlows; --workers N: N times it, one table each).",
  );
  w.sample('slbx_host_flows_max', {}, ew.maxFlows ?? ew.maxFastpathFlows);
  w.family(
    'slbx_host_flows_quota',
    'gauge',
    'Entries each feature may hold (eastWest: flowTable.maxFastpathFlows; snat: 2 x snatMaxFlows; dsr: the rest of hostMaxFlows); beyond it its own full counter counts (ew_flow_table_full, dsr_flows_full, drop_out_snat_table_full).',
  );
  w.family('slbx_host_flows_quota_used', 'gauge', 'Entries each feature holds (live, and expired ones not swept yet), against its quota.');
  for (const [feature, q] of Object.entries(ew.quotas ?? {})) {
    w.sample('slbx_host_flows_quota', { feature }, q.max);
    w.sample('slbx_host_flows_quota_used', { feature }, q.used);
  }
}
