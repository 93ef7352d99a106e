#!/usr/bin/env node
// slbx-host-agent: the host agent daemon. See --help.
import { isIP } from 'node:net';
import type { SlbxConfig } from '../shared/config.js';
import { one } from '../shared/args.js';
import { isMain } from '../runtime/command.js';
import { parseControllerUrls } from '../runtime/http-json.js';
import { readPolicyKey } from '../runtime/redirect-mac.js';
import { exitWith, runDaemon, type DaemonProgram } from '../runtime/daemon-main.js';
import { defaultGateway4, defaultGateway6 } from '../runtime/netif.js';
import { checkPacketDaemonArgs, packetDaemonOptions, resolvePacketDaemonArgs } from '../runtime/packet-options.js';
import { DEFAULT_RECEIVE_PATH, HostDaemon, isReceivePath, RECEIVE_PATHS, type ReceivePath } from './daemon.js';
import { writeHostMetrics } from './metrics.js';
import { hostWorkersRefusal, MAX_HOST_WORKERS } from './workers.js';
import { DEFAULT_FLOW_SNAPSHOT_MS } from './flow-snapshot.js';

const PACKET = packetDaemonOptions('host');

export const HOST_AGENT_PROGRAM: DaemonProgram = {
  program: 'slbx-host-agent',
  usage: 'slbx-host-agent --config FILE --name NAME [options]',
  about:
    'The slbx host agent. Reads VXLAN sent to its provider address (a capture; an nftables rule keeps the\n' +
    'kernel from answering it), checks it against policy, NATs VIP:port to DIP:port and delivers the frame\n' +
    "to the backend's port; captures what the backends send, answers ARP/ND for their gateway, and sends\n" +
    'replies of load-balanced flows from VIP:port straight to the router with a raw socket (direct server\n' +
    "return). A backend's own connections leave from its outbound rule's frontend IP:port (outbound NAT:\n" +
    'the ports come from the controller on demand, replies come back through a MUX; docs/outbound.md).\n' +
    'Logs are JSON lines on stdout, state changes only.\n\n' +
    'Receive paths (--receive-path; measurements and the choice: docs/io-paths.md):\n' +
    '  capture  libpcap on the fabric interface, plus an nftables rule that drops VXLAN in the kernel\n' +
    '  udp      a UDP socket on PA and the VXLAN port (no nftables rule); allocates per datagram',
  options: [
    PACKET.interface,
    { name: 'dsr-via', value: 'ADDR', help: "IPv4 next hop for direct server return; default: the namespace's default gateway" },
    { name: 'dsr-via6', value: 'ADDR', help: 'IPv6 next hop for direct server return; default: the IPv6 default gateway' },
    { name: 'no-nftables', help: 'do not install the nftables rule that drops captured VXLAN in the kernel' },
    PACKET.captureBufferMb,
    { name: 'receive-path', value: 'PATH', help: 'how VXLAN comes in: capture or udp (see above)', default: DEFAULT_RECEIVE_PATH },
    PACKET.io,
    {
      name: 'workers',
      value: 'N',
      default: '1',
      help:
        `data-plane threads, 1..${MAX_HOST_WORKERS}: N >= 2 needs --io ring (the kernel steers both directions of a flow to one ` +
        "worker's sockets by PACKET_FANOUT_CBPF); with --state-dir each worker keeps its own flow snapshot and journal " +
        '(DIR/host-agent-NAME.wI.flows, .journal) and a restarted worker reads them before its first packet; ' +
        'outbound NAT runs in every worker over the same port chunks (docs/outbound.md, "Workers"); docs/io-paths.md',
    },
    {
      name: 'state-dir',
      value: 'DIR',
      help:
        "where the per-flow state is kept across a restart, SIGKILL included (DIR/host-agent-NAME.flows, the snapshot of the return path's " +
        "and outbound NAT's flows, and DIR/host-agent-NAME.journal, each change since, written at the end of the event-loop turn that made it; " +
        'both read at the start; with --workers N one set per worker, NAME.wI: each worker reads every set present, ' +
        'keeps the flows steering gives it, and the sets no worker owns any more are removed); ' +
        "default: $STATE_DIRECTORY (systemd's StateDirectory=), else none (a restarted agent re-learns flows from their clients only)",
    },
    {
      name: 'flow-snapshot-ms',
      value: 'MS',
      help: 'how often the flow snapshot is written when the flows changed (also on SIGTERM); 0: never',
      default: String(DEFAULT_FLOW_SNAPSHOT_MS),
    },
  ],
  defaultStatus: '127.0.0.1:9181',
  extraHelp:
    'status: curl -s http://127.0.0.1:9181/status     ready, ports, DSR, counters\n' +
    '        curl -s http://127.0.0.1:9181/counters   every counter; drops are drop_in_<reason>, drop_out_<reason>\n' +
    '        curl -s http://127.0.0.1:9181/metrics    the Prometheus text format (docs/metrics.md)\n' +
    "        curl -s 'http://127.0.0.1:9181/flows?limit=20'  east-west entries: to_mux, fastpath (docs/east-west.md)",
  checkArgs(args) {
    const rp = one(args, 'receive-path')!;
    const ioError = checkPacketDaemonArgs(args);
    if (ioError !== null) return ioError;
    const snapMs = one(args, 'flow-snapshot-ms')!;
    if (!/^\d+$/.test(snapMs) || Number(snapMs) > 3_600_000)
      return `--flow-snapshot-ms must be a whole number of ms from 0 (never) to 3600000, e.g. ${DEFAULT_FLOW_SNAPSHOT_MS} (got ${JSON.stringify(snapMs)})`;
    const workers = Number(one(args, 'workers'));
    if (!Number.isInteger(workers) || workers < 1 || workers > MAX_HOST_WORKERS)
      return `--workers must be an integer 1..${MAX_HOST_WORKERS} (got ${JSON.stringify(one(args, 'workers'))})`;
    if (isReceivePath(rp)) {
      const refusal = hostWorkersRefusal(workers, one(args, 'io')!, rp, null);
      if (refusal !== null) return refusal;
    }
    const dir = one(args, 'state-dir');
    if (dir !== undefined && dir === '') return '--state-dir must name a directory (leave it out for none)';
    return isReceivePath(rp) ? null : `--receive-path must be one of ${RECEIVE_PATHS.join(', ')} (got ${JSON.stringify(rp)})`;
  },
  create(args, config, name, cfgPath) {
    const receivePath = one(args, 'receive-path') as ReceivePath; // checked by checkArgs
    const me = config.hosts.find((h) => h.name === name);
    if (me === undefined)
      return `no host named ${JSON.stringify(name)} in ${cfgPath} (hosts: ${config.hosts.map((h) => h.name).join(', ')})`;
    const packet = resolvePacketDaemonArgs(args, me.address.text, name, cfgPath);
    if (typeof packet === 'string') return packet;
    // Fastpath redirects are signed with the policy key (docs/east-west.md)
    const policyKey = readPolicyKey(one(args, 'controller-token-file'));
    if (policyKey !== null && typeof policyKey === 'object') return policyKey.error;
    // outbound NAT's demands and releases go to the controller (docs/outbound.md)
    const controllerText = one(args, 'controller');
    const urls = controllerText === undefined ? [] : parseControllerUrls(controllerText);
    if (typeof urls === 'string') return `--controller: ${urls}`;
    const via4 = one(args, 'dsr-via') ?? defaultGateway4();
    const via6 = one(args, 'dsr-via6') ?? defaultGateway6();
    if (via4 !== null && isIP(via4) !== 4) return `--dsr-via must be an IPv4 address, got ${via4}`;
    if (via6 !== null && isIP(via6) !== 6) return `--dsr-via6 must be an IPv6 address, got ${via6}`;
    if (via4 === null) return 'no IPv4 default gateway in this namespace for the DSR return; add one or give --dsr-via';
    const workers = Number(one(args, 'workers'));
    const refusal = hostWorkersRefusal(workers, packet.io, receivePath, config);
    if (refusal !== null) return `${cfgPath}: ${refusal}`;
    return new HostDaemon({
      config,
      name,
      policyKey,
      controller: urls.length === 0 ? null : { urls, token: typeof policyKey === 'string' ? policyKey : null },
      iface: packet.iface,
      dsrVia4: via4,
      dsrVia6: via6,
      nftables: !args.flags.has('no-nftables'),
      captureBufferBytes: packet.captureBufferBytes,
      receivePath,
      mac: packet.mac,
      io: packet.io,
      stateDir: one(args, 'state-dir') ?? ((process.env['STATE_DIRECTORY'] ?? '').split(':')[0] || null),
      flowSnapshotMs: Number(one(args, 'flow-snapshot-ms')),
      workers,
    });
  },
  routes(daemon) {
    const d = daemon as HostDaemon;
    return (path, q) => {
      if (path === '/status') return d.status();
      if (path === '/counters') return d.counters();
      if (path === '/metrics') return writeHostMetrics(d);
      if (path === '/flows') return d.flows(Math.min(10000, Number(q.get('limit') ?? 100) || 100));
      return undefined;
    };
  },
  // --controller: a policy whose config differs only in what the MUXes alone use (a drain, a weight,
  // a priority, enabled, distribution, the hash and table settings) leaves the host agent as it is
  applyPolicy(daemon, policy) {
    const d = daemon as HostDaemon;
    const snat = policy.snatChanged ? policy.snat : undefined; // outbound NAT's ranges (a demand or release changes them alone)
    if (policy.configChanged && hostPolicyKey(policy.config) !== hostPolicyKey(d.config)) d.applyConfig(policy.config, snat);
    else if (snat !== undefined) d.applySnatRanges(snat);
  },
};

/**
 * What of a config a host agent uses (host-agent/tables.ts, host-agent/prober.ts): everything but the
 * MUX-only settings (with an internal VIP the hash seed and the flow table's timeouts are the host agent's
 * too: docs/east-west.md). Two configs with the same key give the host agent the same tables and probes.
 */
export function hostPolicyKey(config: SlbxConfig): string {
  const ew = config.vips.some((v) => v.scope === 'internal');
  return JSON.stringify({
    ...config,
    hashSeed: ew ? config.hashSeed : null,
    maglevTableSize: null,
    flowTable: ew ? config.flowTable : null,
    bgp: null,
    pools: config.pools.map((p) => ({ name: p.name, network: p.network, nics: p.backends.map((b) => b.nic) })),
    vips: config.vips.map((v) => ({
      address: v.address.text,
      scope: v.scope,
      network: v.network,
      rules: v.rules.map((r) => ({ ...r, distribution: null })),
    })),
  });
}

if (isMain(import.meta.url)) exitWith(runDaemon(HOST_AGENT_PROGRAM, process.argv.slice(2)));
