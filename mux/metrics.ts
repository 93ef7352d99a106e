// GET /metrics of the MUX (docs/metrics.md): the data plane's counters, the per-backend and per-rule counts,
// the flow tables' sizes, BGP and BFD, all read at scrape time. Nothing here runs per packet.
import { BGP_STATES } from '../shared/bgp-fsm.js';
import { BFD_STATE_NAMES } from '../shared/bgp-bfd.js';
import { PromWriter, writeCounterFamilies } from '../shared/prom-text.js';
import type { MuxDaemon } from './daemon.js';

const DIRECTIONS = {
  rx_packets: {
    metric: 'slbx_mux_packets_total',
    help: 'Frames captured (rx) and sent (tx) on the fabric interface.',
    labels: { direction: 'rx' },
  },
  tx_packets: {
    metric: 'slbx_mux_packets_total',
    help: 'Frames captured (rx) and sent (tx) on the fabric interface.',
    labels: { direction: 'tx' },
  },
  rx_bytes: {
    metric: 'slbx_mux_bytes_total',
    help: 'Bytes captured (rx) and sent (tx) on the fabric interface.',
    labels: { direction: 'rx' },
  },
  tx_bytes: {
    metric: 'slbx_mux_bytes_total',
    help: 'Bytes captured (rx) and sent (tx) on the fabric interface.',
    labels: { direction: 'tx' },
  },
} as const;

interface PeerStatus {
  peer: string;
  state: string;
  sinceS: number;
}

interface BfdStatus {
  peer: string;
  state: string;
  sinceS: number;
}

export function writeMuxMetrics(d: MuxDaemon): PromWriter {
  const w = new PromWriter();
  const st = d.status();
  w.add('slbx_mux_ready', 'gauge', 'The daemon serves traffic (GET /status ready).', {}, st.ready === true ? 1 : 0);
  w.add('slbx_mux_tables_generation', 'gauge', "The MUX's own table generation (one more at each install).", {}, Number(st.generation));
  writeCounterFamilies(w, 'slbx_mux', d.counters(), DIRECTIONS);

  w.family('slbx_mux_backend_packets_total', 'counter', 'Frames the MUX forwarded (VXLAN) to a backend, by backend (nic) and VNI.');
  w.family('slbx_mux_backend_bytes_total', 'counter', 'Bytes of the VXLAN frames the MUX forwarded to a backend.');
  w.family('slbx_mux_backend_new_flows_total', 'counter', 'New flows the MUX placed on a backend (counted in flow_new) and forwarded.');
  for (const b of d.backendCounts()) {
    const labels = { backend: b.backend, vni: b.vni === null ? '' : String(b.vni) };
    w.sample('slbx_mux_backend_packets_total', labels, b.packets);
    w.sample('slbx_mux_backend_bytes_total', labels, b.bytes);
    w.sample('slbx_mux_backend_new_flows_total', labels, b.newFlows);
  }
  w.family('slbx_mux_vip_packets_total', 'counter', "Frames to a VIP the MUX forwarded, by VIP and rule (the rule's name).");
  w.family('slbx_mux_vip_bytes_total', 'counter', 'Bytes of those frames as captured (the Ethernet frames the router sent the MUX).');
  w.family(
    'slbx_mux_vip_new_flows_total',
    'counter',
    'New flows to a VIP the MUX placed (counted in flow_new) and forwarded, by VIP and rule.',
  );
  for (const r of d.traffic.rules(d.ctx.tables)) {
    const labels = { vip: r.vip, rule: r.rule };
    w.sample('slbx_mux_vip_packets_total', labels, r.packets);
    w.sample('slbx_mux_vip_bytes_total', labels, r.bytes);
    w.sample('slbx_mux_vip_new_flows_total', labels, r.newFlows);
  }

  // flows: kind trusted (seen twice: the main table) and untrusted (seen once); other kinds join here
  // (with --workers: the sum of every worker's tables, from their last reports, every 250 ms)
  const f = d.flowSizes();
  w.family('slbx_mux_flows', 'gauge', 'Flows in the flow tables, by kind and address family.');
  w.sample('slbx_mux_flows', { kind: 'trusted', family: 'ipv4' }, f.trusted4);
  w.sample('slbx_mux_flows', { kind: 'trusted', family: 'ipv6' }, f.trusted6);
  w.sample('slbx_mux_flows', { kind: 'untrusted', family: 'ipv4' }, f.untrusted4);
  w.sample('slbx_mux_flows', { kind: 'untrusted', family: 'ipv6' }, f.untrusted6);
  w.family('slbx_mux_flows_max', 'gauge', 'The flow tables limit, by kind.');
  w.sample('slbx_mux_flows_max', { kind: 'trusted' }, f.trustedMax);
  w.sample('slbx_mux_flows_max', { kind: 'untrusted' }, f.untrustedMax);

  const bgp = d.bgpStatus();
  w.family('slbx_mux_bgp_session_up', 'gauge', '1 while the BGP session to the peer is Established.');
  w.family('slbx_mux_bgp_session_state', 'gauge', 'The BGP FSM state of the session (RFC 4271 8): 1 for the current state.');
  w.family('slbx_mux_bgp_session_state_seconds', 'gauge', 'Seconds in the current BGP state (the established time while Established).');
  w.family('slbx_mux_bgp_session_established_seconds', 'gauge', 'Seconds since the BGP session was established (0 while it is not).');
  w.family('slbx_mux_bfd_session_up', 'gauge', '1 while the BFD session to the peer is Up.');
  w.family('slbx_mux_bfd_session_state', 'gauge', 'The BFD state of the session (RFC 5880 4.1): 1 for the current state.');
  w.family('slbx_mux_vip_announced', 'gauge', '1 when the MUX announces the VIP by BGP, 0 when it holds it back.');
  if (bgp !== null) {
    for (const p of (bgp.peers ?? []) as PeerStatus[]) {
      w.sample('slbx_mux_bgp_session_up', { peer: p.peer }, p.state === 'Established' ? 1 : 0);
      for (const s of BGP_STATES) w.sample('slbx_mux_bgp_session_state', { peer: p.peer, state: s }, p.state === s ? 1 : 0);
      w.sample('slbx_mux_bgp_session_state_seconds', { peer: p.peer }, p.sinceS);
      w.sample('slbx_mux_bgp_session_established_seconds', { peer: p.peer }, p.state === 'Established' ? p.sinceS : 0);
    }
    for (const b of (bgp.bfd ?? []) as BfdStatus[]) {
      w.sample('slbx_mux_bfd_session_up', { peer: b.peer }, b.state === 'Up' ? 1 : 0);
      for (const s of BFD_STATE_NAMES) w.sample('slbx_mux_bfd_session_state', { peer: b.peer, state: s }, b.state === s ? 1 : 0);
    }
    for (const v of (bgp.vips ?? []) as { vip: string; announced: boolean }[]) {
      w.sample('slbx_mux_vip_announced', { vip: v.vip }, v.announced ? 1 : 0);
    }
  }
  return w;
}
