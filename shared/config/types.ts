// The normalized, validated config: what every daemon reads (docs/config.md).
import type { IpAddr } from '../addr.js';
import type { OutboundRuleConfig } from './outbound.js';

// ---------------------------------------------------------------------------------------------
// Normalized types

export type RuleProtocol = 'tcp' | 'udp' | 'all';
/** IP protocol numbers: 6 = TCP, 17 = UDP. */
export type IpProtocolNumber = 6 | 17;
/** Hashed fields of a new flow: 5-tuple, 3-tuple (src, dst, protocol) or 2-tuple (src, dst). */
export type Distribution = 5 | 3 | 2;
export type ProbeProtocol = 'http' | 'tcp';

export type Underlay = 'ipv4' | 'ipv6';

export interface FabricConfig {
  readonly mtu: number;
  readonly vxlanPort: number;
  /** The family of the provider addresses VXLAN travels between (the outer header). */
  readonly underlay: Underlay;
}

export interface FlowTableConfig {
  readonly maxFlows: number;
  readonly tcpIdleTimeoutS: number;
  readonly udpIdleTimeoutS: number;
  readonly otherIdleTimeoutS: number;
  /** Flows seen once (a SYN, one datagram) wait in a separate, smaller table until their second packet. */
  readonly untrustedMaxFlows: number;
  readonly untrustedTimeoutS: number;
  /** East-west's quota in each host agent's flow table (flows sent to a MUX, Fastpath entries; docs/east-west.md). */
  readonly maxFastpathFlows: number;
  /** A UDP east-west flow is redirected to the Fastpath from this datagram on (2: the one that makes it trusted). */
  readonly fastpathUdpDatagrams: number;
  /** Entries of each host agent's one flow table, every feature (east-west, return path, outbound NAT). */
  readonly hostMaxFlows: number;
  /** Outbound NAT flows a host agent keeps at most (two entries each); the return path gets what the quotas leave. */
  readonly snatMaxFlows: number;
}

/** vxlan: the VMs' frames are plain Ethernet on their port; vlan: the port is an 802.1Q trunk carrying `vlan` (docs/config.md). */
export type NetworkType = 'vxlan' | 'vlan';

export interface NetworkConfig {
  readonly name: string;
  readonly type: NetworkType;
  /** The VNI of the VXLAN between MUXes and hosts (for a vlan network too: the VM never sees it). */
  readonly vni: number;
  /** The 802.1Q VLAN id (1-4094) of a vlan network's frames on its nics' ports; null for vxlan. */
  readonly vlan: number | null;
  readonly gateway: IpAddr | null;
  readonly gateway6: IpAddr | null;
}

export interface MuxConfig extends NodeUnderlayRoute {
  readonly name: string;
  /** IPv4 provider address. */
  readonly address: IpAddr;
  readonly address6: IpAddr | null;
}

/**
 * A node's underlay subnet (shared/config/underlay-routes.ts): absent or null, every provider address
 * of that family is on-link; else those outside address/prefixLength go through the gateway.
 */
export interface NodeUnderlayRoute {
  readonly prefixLength?: number | null;
  readonly gateway?: IpAddr | null;
  readonly prefixLength6?: number | null;
  readonly gateway6?: IpAddr | null;
}

export interface HostConfig extends NodeUnderlayRoute {
  readonly name: string;
  /** IPv4 provider address (PA): the outer destination of VXLAN to this host. */
  readonly address: IpAddr;
  readonly address6: IpAddr | null;
}

export interface NicConfig {
  readonly name: string;
  readonly host: string;
  readonly network: string;
  /** Interface name of the port on the host. */
  readonly port: string;
  /** 6 bytes. */
  readonly mac: Uint8Array;
  /** 1 or 2 addresses, IPv4 first. */
  readonly addresses: readonly IpAddr[];
  readonly address4: IpAddr | null;
  readonly address6: IpAddr | null;
}

export interface ProbeConfig {
  readonly name: string;
  readonly protocol: ProbeProtocol;
  readonly port: number;
  /** The HTTP path; null for tcp probes. */
  readonly path: string | null;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly upThreshold: number;
  readonly downThreshold: number;
}

export interface BackendConfig {
  readonly nic: string;
  readonly priority: number;
  readonly weight: number;
  readonly enabled: boolean;
  readonly drain: boolean;
}

export interface PoolConfig {
  readonly name: string;
  /** Derived: the network of every backend's nic. */
  readonly network: string;
  readonly latencySensitivityMs: number;
  /** Latency routing (docs/latency.md): every MUX measures the backends; null = no measurement, no band. */
  readonly latency: PoolLatencyConfig | null;
  readonly backends: readonly BackendConfig[];
}

export interface PoolLatencyConfig {
  /** Time between two measurements of a backend's host by a MUX. */
  readonly intervalMs: number;
  /** The median of the last this many samples is the backend's latency. */
  readonly samples: number;
  /** A backend inside the band stays in until it is this much beyond its edge (the flap guard). */
  readonly hysteresisMs: number;
}

export interface RuleConfig {
  readonly name: string;
  /** IP protocol numbers; 'all' -> [6, 17]. */
  readonly protocols: readonly IpProtocolNumber[];
  readonly protocol: RuleProtocol;
  readonly frontendPort: number;
  readonly backendPort: number;
  readonly pool: string;
  readonly distribution: Distribution;
  readonly probe: string | null;
  /**
   * New flows when every backend of the rule looks down (none enabled, healthy and not drained at any
   * priority): drop (the default; the VIP is withdrawn when no rule of it has a backend) or spread
   * (fail-open: over every enabled, undrained backend of the pool, the VIP stays announced). docs/config.md.
   */
  readonly allDown: AllDown;
}

/** A rule's choice when every backend looks down. */
export type AllDown = 'drop' | 'spread';

export interface VipConfig {
  readonly address: IpAddr;
  /** public: announced by BGP, reached through the router; internal: reached only from `network`'s VMs (docs/east-west.md). */
  readonly scope: 'public' | 'internal';
  /** The tenant network of an internal VIP; null for a public one. */
  readonly network: string | null;
  readonly rules: readonly RuleConfig[];
}

export interface SlbxConfig {
  readonly version: 1;
  readonly hashSeed: number;
  readonly maglevTableSize: number;
  readonly fabric: FabricConfig;
  readonly flowTable: FlowTableConfig;
  readonly networks: readonly NetworkConfig[];
  readonly muxes: readonly MuxConfig[];
  readonly hosts: readonly HostConfig[];
  readonly nics: readonly NicConfig[];
  readonly probes: readonly ProbeConfig[];
  readonly pools: readonly PoolConfig[];
  readonly vips: readonly VipConfig[];
  /** The prefixes delegated to the load balancer: every VIP lies inside one; the router accepts host routes inside them. */
  readonly vipRanges: readonly VipRange[];
  /** The MUXes' BGP speaker (docs/bgp.md); null: no BGP (the router needs static routes). */
  readonly bgp: BgpConfig | null;
  /** Outbound NAT rules (docs/outbound.md); [] when none. */
  readonly outbound: readonly OutboundRuleConfig[];
}

export interface BgpPeerConfig {
  /** The router's address the MUX connects to (IPv4, or IPv6 when every mux has address6). */
  readonly address: IpAddr;
  readonly asn: number;
  readonly port: number;
}

export interface BgpBfdConfig {
  readonly enabled: boolean;
  /** Desired transmit and required receive interval (RFC 5880 6.8.1). */
  readonly intervalMs: number;
  /** Detect multiplier: missed packets before the session is down. */
  readonly multiplier: number;
}

export interface BgpConfig {
  /** The AS of every MUX (they announce the same VIPs with the same AS path length, so the router merges them). */
  readonly asn: number;
  readonly holdTimeS: number;
  readonly keepaliveS: number;
  /** Reconnect back-off, doubling from min to max. */
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  /** On SIGTERM: withdraw, then keep forwarding this long before the capture closes. */
  readonly shutdownGraceMs: number;
  readonly peers: readonly BgpPeerConfig[];
  readonly bfd: BgpBfdConfig;
}

export interface ConfigError {
  /** Field path, e.g. "pools[0].backends[2].weight"; "" for the whole document. */
  readonly path: string;
  /** The offending value (undefined when the field is missing). */
  readonly value: unknown;
  /** What is wrong, what is allowed, how to fix it. One line. */
  readonly message: string;
  /** 1-based position in the source text, when the config came from parseConfig. */
  readonly line?: number;
  readonly column?: number;
}

export type ConfigResult = { readonly ok: true; readonly config: SlbxConfig } | { readonly ok: false; readonly errors: ConfigError[] };

export interface VipRange {
  /** The prefix's first address (host bits zero). */
  readonly network: IpAddr;
  readonly prefixLen: number;
  /** Canonical text: `203.0.113.0/24`, `2001:db8:ff::/48`. */
  readonly text: string;
}
