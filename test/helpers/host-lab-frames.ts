// Frames and options the host agent's worker tests share: the lab's mux1 -> host1 VXLAN (examples/lab.yaml,
// 198.18.0.11 -> 198.18.0.21), a client's segment to VIP 203.0.113.10:80 as mux1 hands it to h1vm1, and the
// options of a HostWorkers pool on `lo` for host1, and a host1 worker's start input.
import { pkt } from '../../shared/packet-builder.js';
import type { SlbxConfig } from '../../shared/config.js';
import type { HostWorkersOptions } from '../../host-agent/workers.js';
import { MessageChannel } from 'node:worker_threads';
import { newHostContext } from '../../host-agent/data-plane.js';
import { compileHostTables } from '../../host-agent/tables.js';
import { STATUS_WORDS, type HostWorkerInput } from '../../host-agent/worker-protocol.js';

/** mux1's VXLAN frame to host1 (VNI `vni`) carrying the inner Ethernet frame `inner`. */
export function fromMux1(inner: Uint8Array, vni: number): Buffer {
  return pkt()
    .eth({ src: '02:00:00:00:00:11', dst: '02:00:00:00:00:21' })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 50000, dport: 4789 })
    .vxlan({ vni })
    .payload(inner)
    .build();
}

/** Client `src`:`sport`'s TCP segment (`flags`) to VIP 203.0.113.10:80, addressed to h1vm1's MAC, through mux1. */
export function clientSegmentFromMux1(src: string, sport: number, flags: number, vni: number): Buffer {
  const inner = pkt()
    .eth({ src: '02:00:00:00:00:11', dst: '02:00:c0:00:02:0a' })
    .ipv4({ src, dst: '203.0.113.10' })
    .tcp({ sport, dport: 80, flags })
    .build();
  return fromMux1(inner, vni);
}

/** A HostWorkers pool of `count` threads for host1 on `lo` (VXLAN to 198.18.0.21), `config` at generation 1 unless `more` says otherwise. */
export function host1PoolOptions(
  count: number,
  config: SlbxConfig,
  counterNames: number,
  more: Partial<HostWorkersOptions> = {},
): HostWorkersOptions {
  return {
    count,
    name: 'host1',
    iface: 'lo',
    fabricMac: new Uint8Array(6),
    dsrVia4: null,
    dsrVia6: null,
    policyKey: null,
    captureBufferBytes: 1 << 20,
    fabricFilter: 'udp dst port 4789 and dst host 198.18.0.21',
    sourceMacCheck: false,
    counterNames,
    current: () => ({ config, generation: 1, peerMacs: new Float64Array(0), holdUnresolved: false }),
    onEcho: () => {},
    onLocal: () => {},
    onExpedite: () => {},
    onRedirectLost: () => {},
    snat: () => ({ ranges: [], withdrawn: [] }),
    ...more,
  };
}

/** What a host1 worker thread starts with (HostWorkerCore's input): worker `index` of `count`, `config` at `generation`; `more` overrides. */
export function host1WorkerInput(config: SlbxConfig, more: Partial<HostWorkerInput> = {}): HostWorkerInput {
  const names = newHostContext(compileHostTables(config, 'host1', 1), 4789, []).counters.names.length;
  const ch = new MessageChannel();
  ch.port1.unref();
  return {
    slbxHostWorker: true,
    index: 0,
    count: 1,
    name: 'host1',
    iface: 'lo',
    fabricMac: new Uint8Array([2, 0, 0, 0, 0, 0x21]),
    config,
    generation: 1,
    dsrVia4: null,
    dsrVia6: null,
    policyKey: null,
    captureBufferBytes: 1 << 20,
    fabricFilter: 'udp',
    peerMacs: new Float64Array(0),
    holdUnresolved: false,
    sourceMacCheck: false,
    snatRanges: [],
    snatWithdrawn: [],
    counters: new SharedArrayBuffer(names * 8),
    published: new SharedArrayBuffer(names * 8),
    status: new SharedArrayBuffer(STATUS_WORDS * 4),
    flowsPort: ch.port2,
    flowState: null,
    ...more,
  };
}
