// The normalized config written out: a start-log summary, a plain object (the controller's document)
// and YAML that parseConfig reads back equal.
import { Document, isMap, isScalar, isSeq } from 'yaml';
import { formatMac } from '../addr.js';
import type { OutboundRuleConfig } from './outbound.js';
import type { BgpConfig, HostConfig, MuxConfig, SlbxConfig } from './types.js';

/** A few lines for a daemon's start log. */
export function configSummary(config: SlbxConfig): string {
  const v4 = config.vips.filter((v) => v.address.family === 4).length;
  const rules = config.vips.reduce((n, v) => n + v.rules.length, 0);
  const backends = config.pools.reduce((n, p) => n + p.backends.length, 0);
  return [
    `vips: ${config.vips.length} (${v4} IPv4, ${config.vips.length - v4} IPv6), rules: ${rules}, pools: ${config.pools.length}, backends: ${backends}, probes: ${config.probes.length}`,
    `muxes: ${config.muxes.length}, hosts: ${config.hosts.length}, nics: ${config.nics.length}, networks: ${config.networks.length}`,
    `hashSeed: 0x${config.hashSeed.toString(16).padStart(8, '0')}, maglevTableSize: ${config.maglevTableSize}, fabric mtu: ${config.fabric.mtu}, vxlanPort: ${config.fabric.vxlanPort}, maxFlows: ${config.flowTable.maxFlows}`,
  ].join('\n');
}

/**
 * The normalized config as a plain object (every default written out, addresses canonical, MACs
 * lower-case): what serializeConfig writes as YAML, and valid input for validateConfig (the
 * controller's document).
 */
export function plainConfig(config: SlbxConfig): Record<string, unknown> {
  return {
    version: config.version,
    hashSeed: config.hashSeed,
    maglevTableSize: config.maglevTableSize,
    fabric: {
      mtu: config.fabric.mtu,
      vxlanPort: config.fabric.vxlanPort,
      ...(config.fabric.underlay !== 'ipv4' ? { underlay: config.fabric.underlay } : {}),
    },
    flowTable: {
      maxFlows: config.flowTable.maxFlows,
      tcpIdleTimeoutS: config.flowTable.tcpIdleTimeoutS,
      udpIdleTimeoutS: config.flowTable.udpIdleTimeoutS,
      otherIdleTimeoutS: config.flowTable.otherIdleTimeoutS,
      untrustedMaxFlows: config.flowTable.untrustedMaxFlows,
      untrustedTimeoutS: config.flowTable.untrustedTimeoutS,
      maxFastpathFlows: config.flowTable.maxFastpathFlows,
      fastpathUdpDatagrams: config.flowTable.fastpathUdpDatagrams,
      hostMaxFlows: config.flowTable.hostMaxFlows,
      snatMaxFlows: config.flowTable.snatMaxFlows,
    },
    networks: config.networks.map((n) => ({
      name: n.name,
      ...(n.type !== 'vxlan' ? { type: n.type } : {}),
      vni: n.vni,
      ...(n.vlan !== null ? { vlan: n.vlan } : {}),
      ...(n.gateway !== null ? { gateway: n.gateway.text } : {}),
      ...(n.gateway6 !== null ? { gateway6: n.gateway6.text } : {}),
    })),
    muxes: config.muxes.map(serializeNode),
    hosts: config.hosts.map(serializeNode),
    nics: config.nics.map((n) => ({
      name: n.name,
      host: n.host,
      network: n.network,
      port: n.port,
      mac: formatMac(n.mac),
      addresses: n.addresses.map((a) => a.text),
    })),
    probes: config.probes.map((p) => ({
      name: p.name,
      protocol: p.protocol,
      port: p.port,
      ...(p.path !== null ? { path: p.path } : {}),
      intervalMs: p.intervalMs,
      timeoutMs: p.timeoutMs,
      upThreshold: p.upThreshold,
      downThreshold: p.downThreshold,
    })),
    pools: config.pools.map((p) => ({
      name: p.name,
      latencySensitivityMs: p.latencySensitivityMs,
      ...(p.latency !== null ? { latency: { ...p.latency } } : {}),
      backends: p.backends.map((b) => ({ nic: b.nic, priority: b.priority, weight: b.weight, enabled: b.enabled, drain: b.drain })),
    })),
    vipRanges: config.vipRanges.map((r) => r.text),
    vips: config.vips.map((v) => ({
      address: v.address.text,
      ...(v.scope === 'internal' ? { scope: v.scope, network: v.network } : {}),
      rules: v.rules.map((r) => ({
        name: r.name,
        protocol: r.protocol,
        frontendPort: r.frontendPort,
        backendPort: r.backendPort,
        pool: r.pool,
        distribution: `${r.distribution}-tuple`,
        ...(r.probe !== null ? { probe: r.probe } : {}),
        allDown: r.allDown,
      })),
    })),
    ...(config.bgp !== null ? { bgp: serializeBgp(config.bgp) } : {}),
    ...(config.outbound.length > 0 ? { outbound: config.outbound.map(plainOutbound) } : {}),
  };
}

/** Writes the normalized config as YAML, every default spelled out; parseConfig reads it back equal. */
export function serializeConfig(config: SlbxConfig): string {
  const plain = plainConfig(config);
  const doc = new Document(plain);
  const seed = doc.get('hashSeed', true);
  if (isScalar(seed)) seed.format = 'HEX';
  for (let i = 0; i < config.nics.length; i++) {
    const seq = doc.getIn(['nics', i, 'addresses'], true);
    if (isSeq(seq)) seq.flow = true;
  }
  config.pools.forEach((p, i) => {
    p.backends.forEach((_b, j) => {
      const m = doc.getIn(['pools', i, 'backends', j], true);
      if (isMap(m)) m.flow = true;
    });
  });
  doc.commentBefore = ' slbx config, normalized: every default written out (see docs/config.md)';
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

function plainOutbound(r: OutboundRuleConfig): Record<string, unknown> {
  return {
    name: r.name,
    frontendIps: r.frontendIps.map((a) => a.text),
    ...(r.pool !== null ? { pool: r.pool } : { nics: [...r.nics] }),
    protocol: r.protocol,
    portsPerNic: r.portsAuto ? 'auto' : r.portsPerNic,
    preallocatedPorts: r.preallocatedPorts,
    idleTimeoutMin: r.idleTimeoutMin,
    tcpResetOnIdle: r.tcpResetOnIdle,
  };
}

function serializeBgp(b: BgpConfig): Record<string, unknown> {
  return {
    asn: b.asn,
    holdTimeS: b.holdTimeS,
    keepaliveS: b.keepaliveS,
    reconnectMinMs: b.reconnectMinMs,
    reconnectMaxMs: b.reconnectMaxMs,
    shutdownGraceMs: b.shutdownGraceMs,
    peers: b.peers.map((p) => ({ address: p.address.text, asn: p.asn, port: p.port })),
    bfd: { enabled: b.bfd.enabled, intervalMs: b.bfd.intervalMs, multiplier: b.bfd.multiplier },
  };
}

function serializeNode(n: MuxConfig | HostConfig): Record<string, unknown> {
  return {
    name: n.name,
    address: n.address.text,
    ...(n.address6 !== null ? { address6: n.address6.text } : {}),
    ...(n.gateway != null ? { prefixLength: n.prefixLength, gateway: n.gateway.text } : {}),
    ...(n.gateway6 != null ? { prefixLength6: n.prefixLength6, gateway6: n.gateway6.text } : {}),
  };
}
