// The slbx config schema: YAML (or JSON) text -> one validated, normalized, frozen SlbxConfig.
// Pure: no fs, no process, no logging. Every problem is collected (never stop at the first) with the
// field path, the bad value and what is allowed. Reference: docs/config.md.
import { Document, LineCounter, isAlias, isMap, isScalar, isSeq, parseAllDocuments } from 'yaml';
import type { Node as YamlNode } from 'yaml';
import { formatIpv4, formatIpv6, formatMac, parseIpAddr, parseMac, type IpAddr } from './addr.js';
import { DEFAULT_HASH_SEED } from './flow-hash.js';
import { VXLAN_PORT } from './vxlan.js';

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
}

export interface NetworkConfig {
  readonly name: string;
  readonly vni: number;
  readonly gateway: IpAddr | null;
  readonly gateway6: IpAddr | null;
}

export interface MuxConfig {
  readonly name: string;
  /** IPv4 provider address. */
  readonly address: IpAddr;
  readonly address6: IpAddr | null;
}

export interface HostConfig {
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
  readonly backends: readonly BackendConfig[];
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
}

export interface VipConfig {
  readonly address: IpAddr;
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

// ---------------------------------------------------------------------------------------------
// Defaults and limits, in one place

export const CONFIG_DEFAULTS = deepFreeze({
  version: 1 as const,
  hashSeed: DEFAULT_HASH_SEED,
  maglevTableSize: 65537,
  fabric: { mtu: 1500, vxlanPort: VXLAN_PORT, underlay: 'ipv4' as Underlay },
  flowTable: { maxFlows: 1_000_000, tcpIdleTimeoutS: 240, udpIdleTimeoutS: 30, otherIdleTimeoutS: 30, untrustedMaxFlows: 100_000, untrustedTimeoutS: 5 },
  probe: { path: '/', intervalMs: 5000, timeoutMs: 2000, upThreshold: 2, downThreshold: 2 },
  pool: { latencySensitivityMs: 0 },
  backend: { priority: 1, weight: 50, enabled: true, drain: false },
  rule: { distribution: '5-tuple' as const },
  bgp: { holdTimeS: 9, reconnectMinMs: 500, reconnectMaxMs: 8000, shutdownGraceMs: 300, peerPort: 179, bfd: { enabled: false, intervalMs: 100, multiplier: 3 } },
});

/** Inclusive integer ranges. `probe.timeoutMs` is further bounded by the probe's intervalMs. */
export const CONFIG_LIMITS = deepFreeze({
  hashSeed: [0, 0xffffffff],
  maglevTableSize: [7, 16777213],
  mtu: [1280, 9216],
  port: [1, 65535],
  maxFlows: [1, 100_000_000],
  idleTimeoutS: [1, 86400],
  vni: [1, 16777215],
  intervalMs: [100, 3_600_000],
  timeoutMs: [10, 3_600_000],
  threshold: [1, 100],
  latencySensitivityMs: [0, 10000],
  priority: [1, 5],
  weight: [1, 1000],
  probePathLength: [1, 1024],
  asn: [1, 4294967294],
  holdTimeS: [0, 65535],
  keepaliveS: [1, 21845],
  reconnectMs: [100, 600_000],
  shutdownGraceMs: [0, 60_000],
  bfdIntervalMs: [10, 10_000],
  bfdMultiplier: [1, 255],
} as const satisfies Record<string, readonly [number, number]>);

/** Names of networks, muxes, hosts, nics, probes, pools and rules. */
export const CONFIG_NAME_RE = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** Linux IFNAMSIZ - 1: the longest interface name. */
export const IFNAME_MAX_BYTES = 15;

const TOP_KEYS = ['version', 'hashSeed', 'maglevTableSize', 'fabric', 'flowTable', 'networks', 'muxes', 'hosts', 'nics', 'probes', 'pools', 'vipRanges', 'vips', 'bgp'] as const;
const BGP_KEYS = ['asn', 'holdTimeS', 'keepaliveS', 'reconnectMinMs', 'reconnectMaxMs', 'shutdownGraceMs', 'peers', 'bfd'] as const;
const BGP_PEER_KEYS = ['address', 'asn', 'port'] as const;
const BFD_KEYS = ['enabled', 'intervalMs', 'multiplier'] as const;
const FABRIC_KEYS = ['mtu', 'vxlanPort', 'underlay'] as const;
const FLOW_KEYS = ['maxFlows', 'tcpIdleTimeoutS', 'udpIdleTimeoutS', 'otherIdleTimeoutS', 'untrustedMaxFlows', 'untrustedTimeoutS'] as const;
const NETWORK_KEYS = ['name', 'vni', 'gateway', 'gateway6'] as const;
const NODE_KEYS = ['name', 'address', 'address6'] as const;
const NIC_KEYS = ['name', 'host', 'network', 'port', 'mac', 'addresses'] as const;
const PROBE_KEYS = ['name', 'protocol', 'port', 'path', 'intervalMs', 'timeoutMs', 'upThreshold', 'downThreshold'] as const;
const POOL_KEYS = ['name', 'latencySensitivityMs', 'backends'] as const;
const BACKEND_KEYS = ['nic', 'priority', 'weight', 'enabled', 'drain'] as const;
const VIP_KEYS = ['address', 'rules'] as const;
const RULE_KEYS = ['name', 'protocol', 'frontendPort', 'backendPort', 'pool', 'distribution', 'probe'] as const;

const DISTRIBUTIONS: Readonly<Record<string, Distribution>> = { '5-tuple': 5, '3-tuple': 3, '2-tuple': 2 };
const RULE_PROTOCOLS: Readonly<Record<RuleProtocol, readonly IpProtocolNumber[]>> = { tcp: [6], udp: [17], all: [6, 17] };
const PROTO_NAME: Readonly<Record<IpProtocolNumber, string>> = { 6: 'tcp', 17: 'udp' };

// ---------------------------------------------------------------------------------------------
// Public entry points

/** Parses YAML (or JSON) text and validates it. `source` names the text in messages (a file name). */
export function parseConfig(text: string, source = 'config'): ConfigResult {
  if (typeof text !== 'string') {
    return { ok: false, errors: [{ path: '', value: text, message: 'the config text must be a string' }] };
  }
  const lineCounter = new LineCounter();
  let docs: Document.Parsed[];
  try {
    docs = [...parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true, strict: true, logLevel: 'silent' })];
  } catch (e) {
    return { ok: false, errors: [{ path: '', value: undefined, message: `YAML parser failed: ${oneLine(String(e))}` }] };
  }
  if (docs.length === 0) return validateConfig(null, source);
  if (docs.length > 1) {
    const p = lineCounter.linePos(docs[1]!.range[0]);
    const message = `the text holds ${docs.length} YAML documents (the second starts at line ${p.line}); a config is one document: remove the extra '---' separators`;
    return { ok: false, errors: [{ path: '', value: undefined, message, line: p.line, column: p.col }] };
  }
  const doc = docs[0]!;
  const yamlErrors = [...doc.errors, ...doc.warnings];
  if (yamlErrors.length > 0) {
    const errors = yamlErrors.map((e): ConfigError => {
      const p = lineCounter.linePos(e.pos[0]);
      return {
        path: '',
        value: undefined,
        message: `YAML syntax error at line ${p.line}, column ${p.col}: ${oneLine(e.message)}`,
        line: p.line,
        column: p.col,
      };
    });
    return { ok: false, errors };
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 1000 });
  } catch (e) {
    return { ok: false, errors: [{ path: '', value: undefined, message: `YAML could not be read: ${oneLine(String(e))}` }] };
  }
  const c = new Checker();
  const config = runValidation(c, raw);
  if (config !== null && c.issues.length === 0) return { ok: true, config };
  const errors = c.issues.map((i) => {
    const off = locate(doc, i.path, i.onKey);
    const e = toConfigError(i);
    if (off === undefined) return e;
    const p = lineCounter.linePos(off);
    return { ...e, line: p.line, column: p.col };
  });
  // file order; errors without a position (none in practice) first; sort is stable
  errors.sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
  return { ok: false, errors };
}

/** Validates an already parsed object (for example JSON from the controller's API). */
export function validateConfig(raw: unknown, source = 'config'): ConfigResult {
  void source;
  const c = new Checker();
  const config = runValidation(c, raw);
  if (config !== null && c.issues.length === 0) return { ok: true, config };
  return { ok: false, errors: c.issues.map(toConfigError) };
}

/** One line per error: `source[:line:column]: path: message (got VALUE)`. */
export function formatConfigErrors(errors: readonly ConfigError[], source: string): string {
  return errors
    .map((e) => {
      const pos = e.line !== undefined ? `:${e.line}${e.column !== undefined ? `:${e.column}` : ''}` : '';
      const path = e.path === '' ? '' : `${e.path}: `;
      const got = e.value === undefined ? '' : ` (got ${formatValue(e.value)})`;
      return `${source}${pos}: ${path}${oneLine(e.message)}${got}`;
    })
    .join('\n');
}

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
    fabric: { mtu: config.fabric.mtu, vxlanPort: config.fabric.vxlanPort, ...(config.fabric.underlay !== 'ipv4' ? { underlay: config.fabric.underlay } : {}) },
    flowTable: {
      maxFlows: config.flowTable.maxFlows,
      tcpIdleTimeoutS: config.flowTable.tcpIdleTimeoutS,
      udpIdleTimeoutS: config.flowTable.udpIdleTimeoutS,
      otherIdleTimeoutS: config.flowTable.otherIdleTimeoutS,
      untrustedMaxFlows: config.flowTable.untrustedMaxFlows,
      untrustedTimeoutS: config.flowTable.untrustedTimeoutS,
    },
    networks: config.networks.map((n) => ({
      name: n.name,
      vni: n.vni,
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
      backends: p.backends.map((b) => ({ nic: b.nic, priority: b.priority, weight: b.weight, enabled: b.enabled, drain: b.drain })),
    })),
    vipRanges: config.vipRanges.map((r) => r.text),
    vips: config.vips.map((v) => ({
      address: v.address.text,
      rules: v.rules.map((r) => ({
        name: r.name,
        protocol: r.protocol,
        frontendPort: r.frontendPort,
        backendPort: r.backendPort,
        pool: r.pool,
        distribution: `${r.distribution}-tuple`,
        ...(r.probe !== null ? { probe: r.probe } : {}),
      })),
    })),
    ...(config.bgp !== null ? { bgp: serializeBgp(config.bgp) } : {}),
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

function serializeBgp(b: BgpConfig): Record<string, unknown> {
  return {
    asn: b.asn, holdTimeS: b.holdTimeS, keepaliveS: b.keepaliveS, reconnectMinMs: b.reconnectMinMs, reconnectMaxMs: b.reconnectMaxMs,
    shutdownGraceMs: b.shutdownGraceMs, peers: b.peers.map((p) => ({ address: p.address.text, asn: p.asn, port: p.port })),
    bfd: { enabled: b.bfd.enabled, intervalMs: b.bfd.intervalMs, multiplier: b.bfd.multiplier },
  };
}

function serializeNode(n: MuxConfig | HostConfig): Record<string, unknown> {
  return { name: n.name, address: n.address.text, ...(n.address6 !== null ? { address6: n.address6.text } : {}) };
}

/** Lookups a daemon needs, built once per config object. */
export interface ConfigIndex {
  readonly networks: ReadonlyMap<string, NetworkConfig>;
  readonly networksByVni: ReadonlyMap<number, NetworkConfig>;
  readonly muxes: ReadonlyMap<string, MuxConfig>;
  readonly hosts: ReadonlyMap<string, HostConfig>;
  readonly nics: ReadonlyMap<string, NicConfig>;
  readonly probes: ReadonlyMap<string, ProbeConfig>;
  readonly pools: ReadonlyMap<string, PoolConfig>;
  /** By the VIP's canonical address text. */
  readonly vips: ReadonlyMap<string, VipConfig>;
  /** Nics by host name, in config order; every host has an entry. */
  readonly nicsByHost: ReadonlyMap<string, readonly NicConfig[]>;
  /** Every (vip, rule), in config order. */
  readonly rules: readonly VipRule[];
  /** (vip, rule) pairs by pool name; every pool has an entry. */
  readonly rulesByPool: ReadonlyMap<string, readonly VipRule[]>;
}

export interface VipRule {
  readonly vip: VipConfig;
  readonly rule: RuleConfig;
}

const INDEX_CACHE = new WeakMap<SlbxConfig, ConfigIndex>();

export function indexConfig(config: SlbxConfig): ConfigIndex {
  const cached = INDEX_CACHE.get(config);
  if (cached !== undefined) return cached;
  const byName = <T extends { readonly name: string }>(xs: readonly T[]): Map<string, T> => new Map(xs.map((x) => [x.name, x]));
  const nicsByHost = new Map<string, NicConfig[]>(config.hosts.map((h) => [h.name, []]));
  for (const n of config.nics) nicsByHost.get(n.host)?.push(n);
  const rules: VipRule[] = [];
  const rulesByPool = new Map<string, VipRule[]>(config.pools.map((p) => [p.name, []]));
  for (const vip of config.vips) {
    for (const rule of vip.rules) {
      const vr = { vip, rule };
      rules.push(vr);
      rulesByPool.get(rule.pool)?.push(vr);
    }
  }
  const index: ConfigIndex = {
    networks: byName(config.networks),
    networksByVni: new Map(config.networks.map((n) => [n.vni, n])),
    muxes: byName(config.muxes),
    hosts: byName(config.hosts),
    nics: byName(config.nics),
    probes: byName(config.probes),
    pools: byName(config.pools),
    vips: new Map(config.vips.map((v) => [v.address.text, v])),
    nicsByHost,
    rules,
    rulesByPool,
  };
  INDEX_CACHE.set(config, index);
  return index;
}

// ---------------------------------------------------------------------------------------------
// Validation machinery

type Seg = string | number;
type Path = readonly Seg[];
type Obj = Record<string, unknown>;

interface Issue {
  readonly path: Path;
  readonly value: unknown;
  readonly message: string;
  /** The error is about the key itself (unknown field): point at the key, not its value. */
  readonly onKey: boolean;
}

class Checker {
  readonly issues: Issue[] = [];
  add(path: Path, value: unknown, message: string, onKey = false): void {
    this.issues.push({ path: [...path], value, message, onKey });
  }
}

function toConfigError(i: Issue): ConfigError {
  return { path: formatPath(i.path), value: i.value, message: i.message };
}

/** `pools[0].backends[2].weight`; keys that are not identifiers are quoted: `fabric["a b"]`. */
export function formatPath(path: Path): string {
  let s = '';
  for (const seg of path) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(seg)) s += s === '' ? seg : `.${seg}`;
    else s += `[${JSON.stringify(seg)}]`;
  }
  return s;
}

function isObj(v: unknown): v is Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** A real array (Array.isArray alone also accepts an array whose prototype was replaced). */
function isList(v: unknown): v is unknown[] {
  return Array.isArray(v) && Object.getPrototypeOf(v) === Array.prototype;
}

/** A plain copy of a list's items: hostile arrays (own `constructor`, odd prototypes) stay outside. */
function listItems(v: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < v.length; i++) out.push(v[i]);
  return out;
}

function has(o: Obj, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/** Short, one-line rendering of any value for messages. */
export function formatValue(v: unknown): string {
  const max = 80;
  let s: string;
  try {
    if (typeof v === 'string') s = JSON.stringify(v);
    else if (typeof v === 'number' || typeof v === 'boolean' || v === null) s = String(v);
    else if (typeof v === 'bigint') s = `${v}n`;
    else if (v === undefined) s = 'nothing';
    else if (typeof v === 'function') s = 'a function';
    else if (typeof v === 'symbol') s = v.toString();
    else if (ArrayBuffer.isView(v)) s = `binary data (${v.byteLength} bytes)`;
    else s = JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(v);
  } catch {
    s = Array.isArray(v) ? `a list of ${v.length}` : 'an object';
  }
  return s.length > max ? `${s.slice(0, max - 3)}...` : s;
}

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
function editDistance(a: string, b: string): number {
  const d: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    d.push([i]);
    for (let j = 1; j <= b.length; j++) d[i]!.push(i === 0 ? j : 0);
  }
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest candidate, when it is close enough to be a likely typo. */
export function didYouMean(word: string, candidates: readonly string[]): string | null {
  if (word.length > 64) return null;
  const norm = (s: string) => s.toLowerCase().replace(/[-_ ]/g, '');
  let best: string | null = null;
  let bestD = Infinity;
  for (const c of candidates) {
    if (c === word) continue;
    const d = norm(c) === norm(word) ? 0 : editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  const limit = Math.max(1, Math.floor(word.length / 3));
  return best !== null && bestD <= limit ? best : null;
}

function listNames(names: readonly string[], max = 10): string {
  if (names.length <= max) return names.join(', ');
  return `${names.slice(0, max).join(', ')} and ${names.length - max} more`;
}

function checkKeys(c: Checker, o: Obj, path: Path, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    const dym = didYouMean(k, allowed);
    const hint = dym !== null ? ` (did you mean '${dym}'?)` : '';
    c.add([...path, k], o[k], `unknown field '${k}'${hint}; allowed: ${allowed.join(', ')}`, true);
  }
}

function quoteHint(v: unknown): string {
  if (v === null) return '; YAML read an empty value or null';
  if (typeof v === 'number' || typeof v === 'boolean') return '; YAML read this as a number or boolean: put it in quotes';
  return '';
}

function intField(
  c: Checker,
  o: Obj,
  path: Path,
  key: string,
  range: readonly [number, number],
  def: number | undefined,
  hint = '',
): number | undefined {
  const at = [...path, key];
  const [min, max] = range;
  if (!has(o, key)) {
    if (def !== undefined) return def;
    c.add(at, undefined, `required: an integer ${min}..${max}${hint}`);
    return undefined;
  }
  const v = o[key];
  if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
  let extra = hint;
  if (typeof v === 'string' && /^\s*(0x[0-9a-f]+|[-+]?\d+)\s*$/i.test(v)) extra += '; this is a string: write the number without quotes';
  c.add(at, v, `must be an integer ${min}..${max}${extra}`);
  return undefined;
}

function boolField(c: Checker, o: Obj, path: Path, key: string, def: boolean): boolean | undefined {
  if (!has(o, key)) return def;
  const v = o[key];
  if (typeof v === 'boolean') return v;
  const hint = typeof v === 'string' && /^(yes|no|on|off|y|n|true|false)$/i.test(v) ? ' (YAML 1.2 reads yes/no/on/off as strings; write true or false without quotes)' : '';
  c.add([...path, key], v, `must be true or false${hint}`);
  return undefined;
}

function enumField<T extends string>(c: Checker, o: Obj, path: Path, key: string, allowed: readonly T[], def: T | undefined): T | undefined {
  const at = [...path, key];
  if (!has(o, key)) {
    if (def !== undefined) return def;
    c.add(at, undefined, `required: one of ${allowed.join(', ')}`);
    return undefined;
  }
  const v = o[key];
  if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
  const dym = typeof v === 'string' ? didYouMean(v, allowed) : null;
  c.add(at, v, `must be one of ${allowed.join(', ')}${dym !== null ? ` (did you mean '${dym}'?)` : ''}`);
  return undefined;
}

/** Validates a name; returns it when valid. Absent names are reported as required. */
function nameField(c: Checker, o: Obj, path: Path, key = 'name'): string | undefined {
  const at = [...path, key];
  if (!has(o, key)) {
    c.add(at, undefined, 'required: a name, 1..32 characters of a-z, 0-9 and -, starting with a letter or digit');
    return undefined;
  }
  const v = o[key];
  if (typeof v === 'string' && CONFIG_NAME_RE.test(v)) return v;
  const why = typeof v !== 'string' ? `must be a string${quoteHint(v)}; a name is` : 'must be a name:';
  c.add(at, v, `${why} 1..32 characters of a-z, 0-9 and -, starting with a letter or digit`);
  return undefined;
}

type FamilyWanted = 4 | 6 | 'any';

function familyText(f: FamilyWanted): string {
  return f === 4 ? 'an IPv4 address' : f === 6 ? 'an IPv6 address' : 'an IPv4 or IPv6 address';
}

/** Why an address cannot be used as a config address (not a usable unicast address), or null. */
function addressProblem(a: IpAddr): string | null {
  const w = a.words;
  if (a.family === 4) {
    const first = w[0]! >>> 24;
    if (first === 0) return 'is in 0.0.0.0/8 ("this network"), not a usable unicast address';
    if (first === 127) return 'is a loopback address';
    if (first >= 224 && first <= 239) return 'is a multicast address';
    if (first >= 240) return 'is in 240.0.0.0/4 (reserved, or broadcast), not a usable unicast address';
    return null;
  }
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0) return 'is the unspecified address';
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 1) return 'is the loopback address';
  if (w[0]! >>> 24 === 0xff) return 'is a multicast address';
  if (w[0] === 0 && w[1] === 0 && w[2] === 0xffff) return 'is an IPv4-mapped IPv6 address; write the IPv4 address itself';
  return null;
}

function parseAddress(c: Checker, at: Path, v: unknown, family: FamilyWanted, otherField?: string): IpAddr | undefined {
  const want = familyText(family);
  if (typeof v !== 'string') {
    c.add(at, v, `must be ${want} written as a string${quoteHint(v)}`);
    return undefined;
  }
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(v) && /(^|\.)0\d/.test(v)) {
    c.add(at, v, `must be ${want}; leading zeros in an IPv4 address are ambiguous (octal in some tools): remove them`);
    return undefined;
  }
  const a = parseIpAddr(v);
  if (a === null) {
    const hint = v.includes('/') ? ' without a prefix length' : v.includes('%') ? ' without a zone index' : '';
    c.add(at, v, `must be ${want}${hint}`);
    return undefined;
  }
  if (family !== 'any' && a.family !== family) {
    const move = otherField !== undefined ? `; put it in '${otherField}'` : '';
    c.add(at, v, `must be ${want}, not IPv${a.family}${move}`);
    return undefined;
  }
  const problem = addressProblem(a);
  if (problem !== null) {
    c.add(at, v, `${a.text} ${problem}; use a unicast address`);
    return undefined;
  }
  return a;
}

/** An optional address field: absent or null -> null. */
function optAddressField(c: Checker, o: Obj, path: Path, key: string, family: 4 | 6, otherField: string): IpAddr | null | undefined {
  if (!has(o, key) || o[key] === null) return null;
  return parseAddress(c, [...path, key], o[key], family, otherField);
}

function reqAddressField(c: Checker, o: Obj, path: Path, key: string, family: FamilyWanted, otherField?: string): IpAddr | undefined {
  if (!has(o, key)) {
    c.add([...path, key], undefined, `required: ${familyText(family)}`);
    return undefined;
  }
  return parseAddress(c, [...path, key], o[key], family, otherField);
}

/** An optional mapping section; null means absent. */
function sectionObj(c: Checker, root: Obj, key: string, allowed: readonly string[]): Obj {
  if (!has(root, key) || root[key] === null) return {};
  const v = root[key];
  if (isObj(v)) {
    checkKeys(c, v, [key], allowed);
    return v;
  }
  c.add([key], v, `must be a mapping with the fields ${allowed.join(', ')}`);
  return {};
}

/** A list section; `broken` when it is missing, empty or not a list (references into it are then not reported). */
function sectionList(c: Checker, root: Obj, key: string, what: string, one: string, required: boolean): Section {
  if (!has(root, key) || (!required && root[key] === null)) {
    if (required) c.add([key], undefined, `required: a list of ${what}, at least one`);
    return { items: [], broken: required };
  }
  const v = root[key];
  if (!isList(v)) {
    c.add([key], v, `must be a list of ${what}${required ? ', at least one' : ''}`);
    return { items: [], broken: true };
  }
  if (required && v.length === 0) c.add([key], v, `must list at least one ${one}`);
  return { items: listItems(v), broken: v.length === 0 && required };
}

interface Section {
  readonly items: readonly unknown[];
  readonly broken: boolean;
}

/** The names declared in a section: first declaration index of each. */
interface NameTable {
  readonly names: Map<string, number>;
  readonly broken: boolean;
}

function itemObj(c: Checker, v: unknown, path: Path, allowed: readonly string[]): Obj | undefined {
  if (isObj(v)) {
    checkKeys(c, v, path, allowed);
    return v;
  }
  c.add(path, v, `must be a mapping with the fields ${allowed.join(', ')}`);
  return undefined;
}

/** First declaration index of each name (valid or not: an invalid name is reported once, where it is declared). */
function declareNames(c: Checker, section: string, kind: string, sec: Section): NameTable {
  const first = new Map<string, number>();
  sec.items.forEach((it, i) => {
    if (!isObj(it) || !has(it, 'name') || typeof it['name'] !== 'string') return;
    const name = it['name'];
    const prev = first.get(name);
    if (prev !== undefined) {
      c.add([section, i, 'name'], name, `duplicate ${kind} name '${name}', also ${section}[${prev}]; every ${kind} needs its own name`);
    } else {
      first.set(name, i);
    }
  });
  return { names: first, broken: sec.broken };
}

/** Resolves a reference to a declared name; returns the declaration index. */
function refField(c: Checker, o: Obj, path: Path, key: string, kind: string, plural: string, table: NameTable): number | undefined {
  const at = [...path, key];
  const names = table.names;
  if (!has(o, key)) {
    c.add(at, undefined, `required: the name of a ${kind}${names.size > 0 ? ` (defined ${plural}: ${listNames([...names.keys()])})` : ''}`);
    return undefined;
  }
  const v = o[key];
  if (typeof v !== 'string') {
    c.add(at, v, `must be the name of a ${kind}, as a string${quoteHint(v)}`);
    return undefined;
  }
  const i = names.get(v);
  if (i !== undefined) return i;
  if (table.broken) return undefined; // the section itself is reported
  if (names.size === 0) {
    c.add(at, v, `unknown ${kind} '${v}': no ${plural} are defined`);
    return undefined;
  }
  const dym = didYouMean(v, [...names.keys()]);
  c.add(at, v, `unknown ${kind} '${v}'${dym !== null ? ` (did you mean '${dym}'?)` : ''}; defined ${plural}: ${listNames([...names.keys()])}`);
  return undefined;
}

function isPrime(n: number): boolean {
  if (n < 2) return false;
  if (n % 2 === 0) return n === 2;
  for (let d = 3; d * d <= n; d += 2) if (n % d === 0) return false;
  return true;
}

function primeNear(n: number, step: 1 | -1, min: number, max: number): number | null {
  for (let p = n + step; p >= min && p <= max; p += step) if (isPrime(p)) return p;
  return null;
}

function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

/** Why `name` cannot be a Linux interface name (the kernel's dev_valid_name), or null. */
function ifnameProblem(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (utf8Length(name) > IFNAME_MAX_BYTES) return `is ${utf8Length(name)} bytes long; Linux interface names have at most ${IFNAME_MAX_BYTES}`;
  if (name === '.' || name === '..') return `cannot be '.' or '..'`;
  if (/[/:\s\0]/.test(name)) return `contains '/', ':', whitespace or NUL, which Linux refuses in interface names`;
  if (name.includes('%')) return `contains '%', which Linux expands as a name template; it can never be the name of an existing interface`;
  return null;
}

function ipKey(a: IpAddr): string {
  return a.text;
}

// ---------------------------------------------------------------------------------------------
// Partial records: each field is undefined when it was invalid (already reported)

interface NetP { name?: string; vni?: number; gateway?: IpAddr | null; gateway6?: IpAddr | null }
interface NodeP { name?: string; address?: IpAddr; address6?: IpAddr | null }
interface NicAddr { addr: IpAddr; index: number }
interface NicP {
  name?: string;
  host?: string;
  network?: string;
  port?: string;
  mac?: Uint8Array;
  /** Set only when the whole list is valid. */
  addrs?: NicAddr[];
}
interface ProbeP {
  name?: string;
  protocol?: ProbeProtocol;
  port?: number;
  path?: string | null;
  intervalMs?: number;
  timeoutMs?: number;
  upThreshold?: number;
  downThreshold?: number;
}
interface BackendP { nic?: string; nicIndex?: number; priority?: number; weight?: number; enabled?: boolean; drain?: boolean }
interface PoolP { name?: string; network?: string; latencySensitivityMs?: number; backends?: (BackendP | undefined)[]; backendCount: number }
interface RuleP {
  name?: string;
  nameDefaulted: boolean;
  protocol?: RuleProtocol;
  frontendPort?: number;
  backendPort?: number;
  pool?: string;
  poolIndex?: number;
  distribution?: Distribution;
  probe?: string | null;
}
interface VipP { address?: IpAddr; rules?: (RuleP | undefined)[] }

interface Claim { readonly what: string; readonly path: string }

// ---------------------------------------------------------------------------------------------
// The validation itself

function runValidation(c: Checker, raw: unknown): SlbxConfig | null {
  try {
    return validateRoot(c, raw);
  } catch (e) {
    // a bug here must not take a daemon down: report it as an error
    c.add([], undefined, `internal error in config validation: ${oneLine(String(e))}`);
    return null;
  }
}

function validateRoot(c: Checker, raw: unknown): SlbxConfig | null {
  if (raw === undefined || raw === null) {
    c.add([], undefined, `the config is empty; it must be a mapping with at least networks, muxes, hosts, nics, pools and vips`);
    return null;
  }
  if (!isObj(raw)) {
    c.add([], raw, `the config must be a mapping with the fields ${TOP_KEYS.join(', ')}`);
    return null;
  }
  checkKeys(c, raw, [], TOP_KEYS);
  const D = CONFIG_DEFAULTS;
  const L = CONFIG_LIMITS;

  if (has(raw, 'version') && raw['version'] !== 1) c.add(['version'], raw['version'], 'only version 1 exists: write 1 or leave it out');
  const hashSeed = intField(c, raw, [], 'hashSeed', L.hashSeed, D.hashSeed, ' (uint32; a YAML hex literal like 0x736c6278 works)');
  const maglevTableSize = intField(c, raw, [], 'maglevTableSize', L.maglevTableSize, D.maglevTableSize, ', a prime');
  let tableSize = maglevTableSize;
  if (maglevTableSize !== undefined && !isPrime(maglevTableSize)) {
    const lo = primeNear(maglevTableSize, -1, L.maglevTableSize[0], L.maglevTableSize[1]);
    const hi = primeNear(maglevTableSize, 1, L.maglevTableSize[0], L.maglevTableSize[1]);
    const near = [lo, hi].filter((p) => p !== null).join(' or ');
    c.add(['maglevTableSize'], maglevTableSize, `must be a prime (Maglev needs a prime table size); the nearest primes are ${near}`);
    tableSize = undefined;
  }

  const fabricRaw = sectionObj(c, raw, 'fabric', FABRIC_KEYS);
  const mtu = intField(c, fabricRaw, ['fabric'], 'mtu', L.mtu, D.fabric.mtu);
  const vxlanPort = intField(c, fabricRaw, ['fabric'], 'vxlanPort', L.port, D.fabric.vxlanPort);
  const underlay = enumField(c, fabricRaw, ['fabric'], 'underlay', ['ipv4', 'ipv6'] as const, D.fabric.underlay);

  const flowRaw = sectionObj(c, raw, 'flowTable', FLOW_KEYS);
  const maxFlows = intField(c, flowRaw, ['flowTable'], 'maxFlows', L.maxFlows, D.flowTable.maxFlows);
  const tcpIdle = intField(c, flowRaw, ['flowTable'], 'tcpIdleTimeoutS', L.idleTimeoutS, D.flowTable.tcpIdleTimeoutS);
  const udpIdle = intField(c, flowRaw, ['flowTable'], 'udpIdleTimeoutS', L.idleTimeoutS, D.flowTable.udpIdleTimeoutS);
  const otherIdle = intField(c, flowRaw, ['flowTable'], 'otherIdleTimeoutS', L.idleTimeoutS, D.flowTable.otherIdleTimeoutS);
  const untrustedMax = intField(c, flowRaw, ['flowTable'], 'untrustedMaxFlows', L.maxFlows, D.flowTable.untrustedMaxFlows);
  const untrustedTimeout = intField(c, flowRaw, ['flowTable'], 'untrustedTimeoutS', L.idleTimeoutS, D.flowTable.untrustedTimeoutS);

  // Lists, read in dependency order; names are declared first so references resolve.
  const netSec = sectionList(c, raw, 'networks', 'networks', 'network', true);
  const muxSec = sectionList(c, raw, 'muxes', 'muxes', 'mux', true);
  const hostSec = sectionList(c, raw, 'hosts', 'hosts', 'host', true);
  const nicSec = sectionList(c, raw, 'nics', 'nics', 'nic', true);
  const probeSec = sectionList(c, raw, 'probes', 'probes', 'probe', false);
  const poolSec = sectionList(c, raw, 'pools', 'pools', 'pool', true);
  const vipSec = sectionList(c, raw, 'vips', 'vips', 'vip', true);

  const netNames = declareNames(c, 'networks', 'network', netSec);
  declareNames(c, 'muxes', 'mux', muxSec);
  const hostNames = declareNames(c, 'hosts', 'host', hostSec);
  const nicNames = declareNames(c, 'nics', 'nic', nicSec);
  const probeNames = declareNames(c, 'probes', 'probe', probeSec);
  const poolNames = declareNames(c, 'pools', 'pool', poolSec);
  const netItems = netSec.items;
  const muxItems = muxSec.items;
  const hostItems = hostSec.items;
  const nicItems = nicSec.items;
  const probeItems = probeSec.items;
  const poolItems = poolSec.items;
  const vipItems = vipSec.items;

  // networks
  const nets: (NetP | undefined)[] = [];
  const vnis = new Map<number, number>();
  netItems.forEach((it, i) => {
    const at: Path = ['networks', i];
    const o = itemObj(c, it, at, NETWORK_KEYS);
    if (o === undefined) return nets.push(undefined);
    const n: NetP = {
      name: nameField(c, o, at),
      vni: intField(c, o, at, 'vni', L.vni, undefined, ' (the 24-bit VXLAN network identifier)'),
      gateway: optAddressField(c, o, at, 'gateway', 4, 'gateway6'),
      gateway6: optAddressField(c, o, at, 'gateway6', 6, 'gateway'),
    };
    if (n.vni !== undefined) {
      const prev = vnis.get(n.vni);
      if (prev !== undefined) c.add([...at, 'vni'], n.vni, `VNI ${n.vni} is already used by networks[${prev}]; every network needs its own VNI`);
      else vnis.set(n.vni, i);
    }
    nets.push(n);
  });

  // muxes and hosts; provider addresses unique across both
  const providers = new Map<string, Claim>();
  const claimProvider = (a: IpAddr | null | undefined, at: Path, what: string): void => {
    if (a === null || a === undefined) return;
    const prev = providers.get(ipKey(a));
    if (prev !== undefined) {
      c.add(at, a.text, `provider address ${a.text} is already used by ${prev.what} (${prev.path}); every mux and host needs its own provider address`);
    } else {
      providers.set(ipKey(a), { what, path: formatPath(at) });
    }
  };
  const readNodes = (items: readonly unknown[], section: 'muxes' | 'hosts', kind: string): (NodeP | undefined)[] =>
    items.map((it, i) => {
      const at: Path = [section, i];
      const o = itemObj(c, it, at, NODE_KEYS);
      if (o === undefined) return undefined;
      const n: NodeP = {
        name: nameField(c, o, at),
        address: reqAddressField(c, o, at, 'address', 4, 'address6'),
        address6: optAddressField(c, o, at, 'address6', 6, 'address'),
      };
      const label = `${kind} ${n.name ?? `${section}[${i}]`}`;
      claimProvider(n.address, [...at, 'address'], label);
      claimProvider(n.address6, [...at, 'address6'], label);
      return n;
    });
  const muxes = readNodes(muxItems, 'muxes', 'mux');
  const hosts = readNodes(hostItems, 'hosts', 'host');
  if (underlay === 'ipv6') {
    // the outer header is IPv6 from the MUX's address6 to the host's address6
    for (const [section, list] of [['muxes', muxes], ['hosts', hosts]] as const) {
      list.forEach((n, i) => {
        if (n !== undefined && n.address6 === null) {
          c.add([section, i, 'address6'], undefined, `fabric.underlay is ipv6, so ${section === 'muxes' ? 'mux' : 'host'} ${n.name ?? i} needs an IPv6 provider address (address6), or set fabric.underlay: ipv4`);
        }
      });
    }
  }

  // nics
  const nics: (NicP | undefined)[] = [];
  const nicAddrClaims = new Map<string, Claim>(); // network|address
  const nicMacClaims = new Map<string, Claim>(); // network|mac
  const portClaims = new Map<string, Claim>(); // host|port
  nicItems.forEach((it, i) => {
    const at: Path = ['nics', i];
    const o = itemObj(c, it, at, NIC_KEYS);
    if (o === undefined) return nics.push(undefined);
    const n: NicP = { name: nameField(c, o, at) };
    const hostIdx = refField(c, o, at, 'host', 'host', 'hosts', hostNames);
    if (hostIdx !== undefined) n.host = o['host'] as string;
    const netIdx = refField(c, o, at, 'network', 'network', 'networks', netNames);
    if (netIdx !== undefined) n.network = o['network'] as string;

    // port: default = name
    if (has(o, 'port')) {
      const p = o['port'];
      if (typeof p !== 'string') c.add([...at, 'port'], p, `must be a Linux interface name as a string${quoteHint(p)}`);
      else {
        const problem = ifnameProblem(p);
        if (problem !== null) c.add([...at, 'port'], p, `the interface name ${problem}`);
        else n.port = p;
      }
    } else if (n.name !== undefined) {
      const problem = ifnameProblem(n.name);
      if (problem !== null) c.add([...at, 'port'], undefined, `the port defaults to the nic's name '${n.name}', which ${problem}: set 'port' to the interface name`);
      else n.port = n.name;
    }

    // mac
    if (!has(o, 'mac')) c.add([...at, 'mac'], undefined, 'required: the backend\'s MAC address, like 02:00:c0:00:02:0a');
    else {
      const m = o['mac'];
      const mac = typeof m === 'string' ? parseMac(m) : null;
      if (mac === null) c.add([...at, 'mac'], m, `must be a MAC address written as a string like 02:00:c0:00:02:0a${quoteHint(m)}`);
      else if ((mac[0]! & 1) === 1) c.add([...at, 'mac'], m, 'must be a unicast MAC: the lowest bit of the first byte (I/G) is set, which makes it multicast or broadcast');
      else if (mac.every((b) => b === 0)) c.add([...at, 'mac'], m, 'must not be all zero');
      else n.mac = mac;
    }

    // addresses: 1..2, at most one per family
    const addrsAt: Path = [...at, 'addresses'];
    if (!has(o, 'addresses')) c.add(addrsAt, undefined, 'required: a list of 1 or 2 addresses, at most one IPv4 and one IPv6');
    else if (!isList(o['addresses'])) c.add(addrsAt, o['addresses'], 'must be a list of 1 or 2 addresses, at most one IPv4 and one IPv6, like [192.0.2.10, 2001:db8:d::10]');
    else {
      const list = listItems(o['addresses'] as unknown[]);
      let ok = true;
      if (list.length < 1 || list.length > 2) {
        c.add(addrsAt, list, `must list 1 or 2 addresses (at most one IPv4 and one IPv6), not ${list.length}`);
        ok = false;
      }
      const addrs: NicAddr[] = [];
      const seen: Partial<Record<4 | 6, number>> = {};
      list.forEach((v, j) => {
        const a = parseAddress(c, [...addrsAt, j], v, 'any');
        if (a === undefined) {
          ok = false;
          return;
        }
        const prev = seen[a.family];
        if (prev !== undefined && list.length <= 2) {
          c.add([...addrsAt, j], v, `a nic has at most one IPv${a.family} address; addresses[${prev}] is IPv${a.family} too`);
          ok = false;
          return;
        }
        seen[a.family] = j;
        addrs.push({ addr: a, index: j });
      });
      if (ok) n.addrs = addrs.sort((x, y) => x.addr.family - y.addr.family);
    }

    // uniqueness across nics
    const label = `nic ${n.name ?? `nics[${i}]`}`;
    if (n.network !== undefined && n.addrs !== undefined) {
      for (const { addr, index } of n.addrs) {
        const key = `${n.network}|${ipKey(addr)}`;
        const prev = nicAddrClaims.get(key);
        if (prev !== undefined) {
          c.add([...addrsAt, index], addr.text, `address ${addr.text} in network ${n.network} already belongs to ${prev.what} (${prev.path}); an address belongs to one nic per network`);
        } else {
          nicAddrClaims.set(key, { what: label, path: formatPath([...addrsAt, index]) });
        }
      }
    }
    if (n.network !== undefined && n.mac !== undefined) {
      const text = formatMac(n.mac);
      const key = `${n.network}|${text}`;
      const prev = nicMacClaims.get(key);
      if (prev !== undefined) {
        c.add([...at, 'mac'], o['mac'], `MAC ${text} in network ${n.network} already belongs to ${prev.what} (${prev.path}); host agents switch on (VNI, MAC), so it must be unique per network`);
      } else {
        nicMacClaims.set(key, { what: label, path: formatPath([...at, 'mac']) });
      }
    }
    if (n.host !== undefined && n.port !== undefined) {
      const key = `${n.host}|${n.port}`;
      const prev = portClaims.get(key);
      const portAt: Path = has(o, 'port') ? [...at, 'port'] : [...at, 'name'];
      if (prev !== undefined) {
        c.add(portAt, n.port, `port ${n.port} on host ${n.host} is already the port of ${prev.what} (${prev.path}); every nic on a host needs its own interface`);
      } else {
        portClaims.set(key, { what: label, path: formatPath(portAt) });
      }
    }
    nics.push(n);
  });

  // a gateway is answered by the host agents, so no nic in its network may hold that address
  nets.forEach((net, i) => {
    if (net === undefined || net.name === undefined || netNames.names.get(net.name) !== i) return;
    for (const [key, gw] of [['gateway', net.gateway], ['gateway6', net.gateway6]] as const) {
      if (gw === null || gw === undefined) continue;
      const prev = nicAddrClaims.get(`${net.name}|${ipKey(gw)}`);
      if (prev !== undefined) {
        c.add(['networks', i, key], gw.text, `the gateway ${gw.text} is also the address of ${prev.what} (${prev.path}); host agents answer ARP/ND for the gateway, so no nic of the network may use it`);
      }
    }
  });

  // probes
  const probes: (ProbeP | undefined)[] = probeItems.map((it, i) => {
    const at: Path = ['probes', i];
    const o = itemObj(c, it, at, PROBE_KEYS);
    if (o === undefined) return undefined;
    const p: ProbeP = {
      name: nameField(c, o, at),
      protocol: enumField(c, o, at, 'protocol', ['http', 'tcp'] as const, undefined),
      port: intField(c, o, at, 'port', L.port, undefined),
      intervalMs: intField(c, o, at, 'intervalMs', L.intervalMs, D.probe.intervalMs),
      upThreshold: intField(c, o, at, 'upThreshold', L.threshold, D.probe.upThreshold),
      downThreshold: intField(c, o, at, 'downThreshold', L.threshold, D.probe.downThreshold),
    };
    // path: http only
    const pathGiven = has(o, 'path') && o['path'] !== null;
    if (p.protocol === 'tcp') {
      if (pathGiven) c.add([...at, 'path'], o['path'], `only http probes have a path: remove it, or set protocol: http`);
      else p.path = null;
    } else if (!pathGiven) {
      p.path = D.probe.path;
    } else {
      const v = o['path'];
      const [minLen, maxLen] = L.probePathLength;
      if (typeof v !== 'string') c.add([...at, 'path'], v, `must be a string starting with '/'${quoteHint(v)}`);
      else if (!v.startsWith('/')) c.add([...at, 'path'], v, `must start with '/', like /health`);
      else if (v.length < minLen || v.length > maxLen || !/^[\x21-\x7e]+$/.test(v)) {
        c.add([...at, 'path'], v, `must be ${minLen}..${maxLen} visible ASCII characters (no spaces or control characters; percent-encode others)`);
      } else p.path = v;
    }
    // timeoutMs: 10..intervalMs, default min(2000, intervalMs)
    if (has(o, 'timeoutMs')) {
      const t = intField(c, o, at, 'timeoutMs', L.timeoutMs, undefined);
      if (t !== undefined && p.intervalMs !== undefined && t > p.intervalMs) {
        c.add([...at, 'timeoutMs'], t, `must be at most intervalMs (${p.intervalMs}): a probe must time out before the next one starts`);
      } else p.timeoutMs = t;
    } else if (p.intervalMs !== undefined) {
      p.timeoutMs = Math.min(D.probe.timeoutMs, p.intervalMs);
    }
    return p;
  });

  // pools
  const pools: (PoolP | undefined)[] = poolItems.map((it, i) => {
    const at: Path = ['pools', i];
    const o = itemObj(c, it, at, POOL_KEYS);
    if (o === undefined) return undefined;
    const pool: PoolP = {
      name: nameField(c, o, at),
      latencySensitivityMs: intField(c, o, at, 'latencySensitivityMs', L.latencySensitivityMs, D.pool.latencySensitivityMs),
      backendCount: 0,
    };
    const bAt: Path = [...at, 'backends'];
    if (!has(o, 'backends')) {
      c.add(bAt, undefined, 'required: a list of backends, at least one');
      return pool;
    }
    if (!isList(o['backends'])) {
      c.add(bAt, o['backends'], 'must be a list of backends, at least one');
      return pool;
    }
    const list = listItems(o['backends'] as unknown[]);
    pool.backendCount = list.length;
    if (list.length === 0) c.add(bAt, list, 'must list at least one backend');
    const seenNics = new Map<string, number>();
    let firstNet: { network: string; j: number } | undefined;
    pool.backends = list.map((bv, j) => {
      const at2: Path = [...bAt, j];
      const b = itemObj(c, bv, at2, BACKEND_KEYS);
      if (b === undefined) return undefined;
      const be: BackendP = {
        priority: intField(c, b, at2, 'priority', L.priority, D.backend.priority, ' (1 is the highest)'),
        weight: intField(c, b, at2, 'weight', L.weight, D.backend.weight, b['weight'] === 0 ? '; 0 is refused: use drain: true to stop new flows' : ''),
        enabled: boolField(c, b, at2, 'enabled', D.backend.enabled),
        drain: boolField(c, b, at2, 'drain', D.backend.drain),
      };
      const ni = refField(c, b, at2, 'nic', 'nic', 'nics', nicNames);
      if (ni !== undefined) {
        const name = b['nic'] as string;
        be.nic = name;
        be.nicIndex = ni;
        const prev = seenNics.get(name);
        if (prev !== undefined) {
          c.add([...at2, 'nic'], name, `nic ${name} is already backends[${prev}] of this pool; a nic appears at most once per pool`);
        } else seenNics.set(name, j);
        const net = nics[ni]?.network;
        if (net !== undefined) {
          if (firstNet === undefined) firstNet = { network: net, j };
          else if (net !== firstNet.network) {
            c.add(
              [...at2, 'nic'],
              name,
              `nic ${name} is in network ${net}, but backends[${firstNet.j}] is in network ${firstNet.network}; every backend of a pool must be in the same network (the VXLAN VNI of the pool)`,
            );
          }
        }
      }
      return be;
    });
    if (firstNet !== undefined) pool.network = firstNet.network;
    if (tableSize !== undefined && list.length > tableSize) {
      c.add(bAt, list.length, `the pool has ${list.length} backends but maglevTableSize is ${tableSize}; raise maglevTableSize to a prime >= ${list.length}`);
    }
    return pool;
  });

  // addresses a VIP must not take
  const taken = new Map<string, Claim>();
  for (const [section, list] of [['muxes', muxes], ['hosts', hosts]] as const) {
    list.forEach((n, i) => {
      if (n === undefined) return;
      const label = `the provider address of ${section === 'muxes' ? 'mux' : 'host'} ${n.name ?? `${section}[${i}]`}`;
      if (n.address !== undefined && !taken.has(ipKey(n.address))) taken.set(ipKey(n.address), { what: label, path: formatPath([section, i, 'address']) });
      if (n.address6 != null && !taken.has(ipKey(n.address6))) taken.set(ipKey(n.address6), { what: label, path: formatPath([section, i, 'address6']) });
    });
  }
  nics.forEach((n, i) => {
    if (n?.addrs === undefined) return;
    for (const { addr, index } of n.addrs) {
      if (!taken.has(ipKey(addr))) {
        taken.set(ipKey(addr), { what: `the address of nic ${n.name ?? `nics[${i}]`}${n.network !== undefined ? ` in network ${n.network}` : ''}`, path: formatPath(['nics', i, 'addresses', index]) });
      }
    }
  });
  nets.forEach((n, i) => {
    if (n === undefined) return;
    for (const [key, gw] of [['gateway', n.gateway], ['gateway6', n.gateway6]] as const) {
      if (gw != null && !taken.has(ipKey(gw))) taken.set(ipKey(gw), { what: `the gateway of network ${n.name ?? `networks[${i}]`}`, path: formatPath(['networks', i, key]) });
    }
  });

  const vipRangesGiven = validateVipRanges(c, raw, [['muxes', muxes], ['hosts', hosts]]);

  // vips and rules
  const vipSeen = new Map<string, number>();
  // stateless DSR: (nic, family, protocol, backendPort) -> the one (vip, frontendPort)
  const dsrClaims = new Map<string, { vi: number; ri: number; frontend: string }>();
  const mixedReported = new Set<string>(); // vip|pool|nic: one report per VIP and pool
  const dsrConflicts = new Map<string, { vi: number; ri: number; ovi: number; ori: number; protos: Set<string>; nics: Set<string>; backendPort: number }>();
  const vips: (VipP | undefined)[] = vipItems.map((it, vi) => {
    const at: Path = ['vips', vi];
    const o = itemObj(c, it, at, VIP_KEYS);
    if (o === undefined) return undefined;
    const vip: VipP = { address: reqAddressField(c, o, at, 'address', 'any') };
    const addr = vip.address;
    if (addr !== undefined) {
      const prev = vipSeen.get(ipKey(addr));
      if (prev !== undefined) c.add([...at, 'address'], o['address'], `VIP ${addr.text} is already vips[${prev}]; list each VIP once with all its rules`);
      else vipSeen.set(ipKey(addr), vi);
      const t = taken.get(ipKey(addr));
      if (t !== undefined) c.add([...at, 'address'], o['address'], `VIP ${addr.text} is ${t.what} (${t.path}); a VIP must be an address of its own`);
    }
    const rAt: Path = [...at, 'rules'];
    if (!has(o, 'rules')) {
      c.add(rAt, undefined, 'required: a list of rules, at least one');
      return vip;
    }
    if (!isList(o['rules'])) {
      c.add(rAt, o['rules'], 'must be a list of rules, at least one');
      return vip;
    }
    const list = listItems(o['rules'] as unknown[]);
    if (list.length === 0) c.add(rAt, list, 'must list at least one rule');
    const ruleNames = new Map<string, { ri: number; defaulted: boolean }>();
    const frontends = new Map<string, number>(); // proto|port -> rule index
    vip.rules = list.map((rv, ri) => {
      const at2: Path = [...rAt, ri];
      const r = itemObj(c, rv, at2, RULE_KEYS);
      if (r === undefined) return undefined;
      const rule: RuleP = {
        nameDefaulted: !has(r, 'name'),
        protocol: enumField(c, r, at2, 'protocol', ['tcp', 'udp', 'all'] as const, undefined),
        frontendPort: intField(c, r, at2, 'frontendPort', L.port, undefined),
      };
      rule.backendPort = has(r, 'backendPort') ? intField(c, r, at2, 'backendPort', L.port, undefined) : rule.frontendPort;
      if (!has(r, 'distribution')) rule.distribution = DISTRIBUTIONS[D.rule.distribution];
      else {
        const dv = r['distribution'];
        if (typeof dv === 'string' && has(DISTRIBUTIONS, dv)) rule.distribution = DISTRIBUTIONS[dv];
        else {
          const hint = typeof dv === 'number' && [2, 3, 5].includes(dv) ? ` (write '${dv}-tuple')` : '';
          c.add([...at2, 'distribution'], dv, `must be one of 5-tuple, 3-tuple, 2-tuple${hint}`);
        }
      }
      if (rule.nameDefaulted) {
        if (rule.protocol !== undefined && rule.frontendPort !== undefined) rule.name = `${rule.protocol}-${rule.frontendPort}`;
      } else rule.name = nameField(c, r, at2);
      if (rule.name !== undefined) {
        const prev = ruleNames.get(rule.name);
        if (prev === undefined) ruleNames.set(rule.name, { ri, defaulted: rule.nameDefaulted });
        else if (!(prev.defaulted && rule.nameDefaulted)) {
          // two defaulted names collide only when (protocol, frontendPort) does, which is reported below
          c.add([...at2, 'name'], rule.name, `rule name '${rule.name}' is already rules[${prev.ri}] of this VIP${rule.nameDefaulted ? ' (this name is the default protocol-frontendPort)' : ''}; give each rule of a VIP its own name`);
        }
      }
      const pi = refField(c, r, at2, 'pool', 'pool', 'pools', poolNames);
      if (pi !== undefined) {
        rule.pool = r['pool'] as string;
        rule.poolIndex = pi;
      }
      if (!has(r, 'probe') || r['probe'] === null) rule.probe = null;
      else {
        const qi = refField(c, r, at2, 'probe', 'probe', 'probes', probeNames);
        if (qi !== undefined) rule.probe = r['probe'] as string;
      }

      // (protocol, frontendPort) unique per VIP, after expanding 'all'
      if (rule.protocol !== undefined && rule.frontendPort !== undefined) {
        for (const proto of RULE_PROTOCOLS[rule.protocol]) {
          const key = `${proto}|${rule.frontendPort}`;
          const prev = frontends.get(key);
          if (prev !== undefined) {
            c.add(
              [...at2, 'frontendPort'],
              rule.frontendPort,
              `${PROTO_NAME[proto]} port ${rule.frontendPort} of this VIP is already taken by rules[${prev}]${rule.protocol === 'all' ? " ('all' is both tcp and udp)" : ''}; one rule per (protocol, frontendPort) on a VIP`,
            );
            break;
          }
          frontends.set(key, ri);
        }
      }

      // every backend nic needs an address of the VIP's family; stateless DSR claims
      const pool = pi !== undefined ? pools[pi] : undefined;
      if (addr !== undefined && pool?.backends !== undefined) {
        const fam = addr.family;
        const frontend = `${ipKey(addr)}|${rule.frontendPort}`;
        for (const be of pool.backends) {
          if (be?.nicIndex === undefined) continue;
          const nic = nics[be.nicIndex];
          if (nic?.addrs === undefined) continue;
          const nicName = nic.name ?? `nics[${be.nicIndex}]`;
          const a = nic.addrs.find((x) => x.addr.family === fam);
          if (a === undefined) {
            const once = `${vi}|${pi}|${be.nicIndex}`;
            if (!mixedReported.has(once)) {
              mixedReported.add(once);
              c.add(
                [...at2, 'pool'],
                r['pool'],
                `mixed families: IPv${fam} VIP ${addr.text} over nic ${nicName} that has no IPv${fam} address; slbx does not translate between IPv4 and IPv6 (add an IPv${fam} address to the nic or use an IPv${fam === 4 ? 6 : 4} VIP)`,
              );
            }
            continue;
          }
          // a probe is sent from the network's gateway address of the VIP's family (host agents play the
          // gateway): without one the backend could never be probed, and would stay "unknown" (healthy) forever
          if (typeof rule.probe === 'string' && nic.network !== undefined) {
            const net = nets[netNames.names.get(nic.network) ?? -1];
            const once = `probe|${vi}|${ri}|${nic.network}`;
            if (net !== undefined && (fam === 4 ? net.gateway : net.gateway6) === null && !mixedReported.has(once)) {
              mixedReported.add(once);
              c.add(
                [...at2, 'probe'],
                r['probe'],
                `probe ${rule.probe} of an IPv${fam} VIP cannot reach nic ${nicName}: network ${nic.network} has no ${fam === 4 ? 'gateway' : 'gateway6'}, the address probes are sent from (add ${fam === 4 ? 'gateway' : 'gateway6'} to network ${nic.network}, or drop the rule's probe)`,
              );
            }
          }
          if (rule.protocol === undefined || rule.backendPort === undefined || rule.frontendPort === undefined) continue;
          for (const proto of RULE_PROTOCOLS[rule.protocol]) {
            const key = `${be.nicIndex}|${fam}|${proto}|${rule.backendPort}`;
            const prev = dsrClaims.get(key);
            if (prev === undefined) {
              dsrClaims.set(key, { vi, ri, frontend });
              continue;
            }
            // the same (VIP, frontendPort): the nic twice in a pool, or a duplicate frontend, both reported elsewhere
            if (prev.frontend === frontend) continue;
            const ck = `${prev.vi}|${prev.ri}|${vi}|${ri}`;
            let conflict = dsrConflicts.get(ck);
            if (conflict === undefined) {
              conflict = { vi, ri, ovi: prev.vi, ori: prev.ri, protos: new Set(), nics: new Set(), backendPort: rule.backendPort };
              dsrConflicts.set(ck, conflict);
            }
            conflict.protos.add(PROTO_NAME[proto]);
            conflict.nics.add(`${nicName} ${a.addr.text}`);
          }
        }
      }
      return rule;
    });
    return vip;
  });

  for (const k of dsrConflicts.values()) {
    const other = vips[k.ovi];
    const otherRule = other?.rules?.[k.ori];
    const me = vips[k.vi];
    const myRule = me?.rules?.[k.ri];
    const fmtVip = (v: VipP | undefined, r: RuleP | undefined): string => {
      const a = v?.address;
      const text = a === undefined ? '?' : a.family === 6 ? `[${a.text}]` : a.text;
      return `${text}:${r?.frontendPort ?? '?'}`;
    };
    c.add(
      ['vips', k.vi, 'rules', k.ri, 'backendPort'],
      k.backendPort,
      `direct server return is stateless: ${[...k.protos].join('/')} port ${k.backendPort} on ${listNames([...k.nics], 4)} already serves ${fmtVip(other, otherRule)} (vips[${k.ovi}].rules[${k.ori}]), and the host agent could not tell whether a reply from that port belongs to ${fmtVip(other, otherRule)} or ${fmtVip(me, myRule)}; each (nic address, protocol, backendPort) may serve one (VIP, frontendPort), as in Azure without floating IP: use another backendPort`,
    );
  }

  const bgp = validateBgp(c, raw, muxes, taken, vipSeen);
  const vipRanges = checkVipsInRanges(c, vipRangesGiven, vips, taken, bgp);

  if (c.issues.length > 0) return null;

  // ------------------------------------------------------------------------------------------
  // Assembly: every field below was validated, so none is undefined.
  const net = nets.map((n): NetworkConfig => ({ name: n!.name!, vni: n!.vni!, gateway: n!.gateway!, gateway6: n!.gateway6! }));
  const node = (n: NodeP | undefined): MuxConfig => ({ name: n!.name!, address: n!.address!, address6: n!.address6! });
  const config: SlbxConfig = {
    version: 1,
    hashSeed: hashSeed!,
    maglevTableSize: maglevTableSize!,
    fabric: { mtu: mtu!, vxlanPort: vxlanPort!, underlay: underlay! },
    flowTable: {
      maxFlows: maxFlows!, tcpIdleTimeoutS: tcpIdle!, udpIdleTimeoutS: udpIdle!, otherIdleTimeoutS: otherIdle!,
      untrustedMaxFlows: untrustedMax!, untrustedTimeoutS: untrustedTimeout!,
    },
    networks: net,
    muxes: muxes.map(node),
    hosts: hosts.map(node),
    nics: nics.map((n): NicConfig => {
      const addresses = n!.addrs!.map((x) => x.addr);
      return {
        name: n!.name!,
        host: n!.host!,
        network: n!.network!,
        port: n!.port!,
        mac: n!.mac!,
        addresses,
        address4: addresses.find((a) => a.family === 4) ?? null,
        address6: addresses.find((a) => a.family === 6) ?? null,
      };
    }),
    probes: probes.map((p): ProbeConfig => ({
      name: p!.name!,
      protocol: p!.protocol!,
      port: p!.port!,
      path: p!.path!,
      intervalMs: p!.intervalMs!,
      timeoutMs: p!.timeoutMs!,
      upThreshold: p!.upThreshold!,
      downThreshold: p!.downThreshold!,
    })),
    pools: pools.map((p): PoolConfig => ({
      name: p!.name!,
      network: p!.network!,
      latencySensitivityMs: p!.latencySensitivityMs!,
      backends: p!.backends!.map((b): BackendConfig => ({ nic: b!.nic!, priority: b!.priority!, weight: b!.weight!, enabled: b!.enabled!, drain: b!.drain! })),
    })),
    vips: vips.map((v): VipConfig => ({
      address: v!.address!,
      rules: v!.rules!.map((r): RuleConfig => ({
        name: r!.name!,
        protocols: RULE_PROTOCOLS[r!.protocol!],
        protocol: r!.protocol!,
        frontendPort: r!.frontendPort!,
        backendPort: r!.backendPort!,
        pool: r!.pool!,
        distribution: r!.distribution!,
        probe: r!.probe!,
      })),
    })),
    vipRanges: vipRanges!,
    bgp: bgp!,
  };
  return deepFreeze(config);
}

/**
 * The optional `bgp` section (docs/bgp.md). Absent or null: no BGP. Returns undefined when invalid
 * (reported), null when absent.
 */
function validateBgp(c: Checker, raw: Obj, muxes: readonly (NodeP | undefined)[], taken: ReadonlyMap<string, Claim>, vipSeen: ReadonlyMap<string, number>): BgpConfig | null | undefined {
  if (!has(raw, 'bgp') || raw['bgp'] === null) return null;
  const v = raw['bgp'];
  if (!isObj(v)) {
    c.add(['bgp'], v, `must be a mapping with the fields ${BGP_KEYS.join(', ')}`);
    return undefined;
  }
  checkKeys(c, v, ['bgp'], BGP_KEYS);
  const D = CONFIG_DEFAULTS.bgp;
  const L = CONFIG_LIMITS;
  const at: Path = ['bgp'];
  const asnHint = ' (private ASNs: 64512..65534 or 4200000000..4294967294)';
  const asnCheck = (path: Path, asn: number | undefined): number | undefined => {
    // RFC 6793 9: AS_TRANS only stands in for 4-octet ASNs; RFC 7300: 65535 is reserved
    if (asn === 23456 || asn === 65535) {
      c.add(path, asn, `AS ${asn} is reserved (${asn === 23456 ? 'AS_TRANS, RFC 6793' : 'RFC 7300'}); use another AS${asnHint}`);
      return undefined;
    }
    return asn;
  };
  const asn = asnCheck([...at, 'asn'], intField(c, v, at, 'asn', L.asn, undefined, asnHint));
  let holdTimeS = intField(c, v, at, 'holdTimeS', L.holdTimeS, D.holdTimeS, ' (0: no hold timer and no keepalives; else at least 3)');
  if (holdTimeS === 1 || holdTimeS === 2) {
    c.add([...at, 'holdTimeS'], holdTimeS, 'must be 0 or at least 3 seconds (RFC 4271 4.2)');
    holdTimeS = undefined;
  }
  let keepaliveS: number | undefined;
  if (!has(v, 'keepaliveS')) keepaliveS = holdTimeS === undefined ? undefined : Math.max(1, Math.floor(holdTimeS / 3));
  else {
    keepaliveS = intField(c, v, at, 'keepaliveS', L.keepaliveS, undefined);
    if (keepaliveS !== undefined && holdTimeS !== undefined && holdTimeS > 0 && keepaliveS * 3 > holdTimeS) {
      c.add([...at, 'keepaliveS'], keepaliveS, `must be at most a third of holdTimeS (${holdTimeS} s, RFC 4271 10), so that a lost keepalive does not end the session: at most ${Math.max(1, Math.floor(holdTimeS / 3))}`);
      keepaliveS = undefined;
    }
  }
  const reconnectMinMs = intField(c, v, at, 'reconnectMinMs', L.reconnectMs, D.reconnectMinMs);
  let reconnectMaxMs = intField(c, v, at, 'reconnectMaxMs', L.reconnectMs, D.reconnectMaxMs);
  if (reconnectMinMs !== undefined && reconnectMaxMs !== undefined && reconnectMaxMs < reconnectMinMs) {
    c.add([...at, 'reconnectMaxMs'], reconnectMaxMs, `must be at least reconnectMinMs (${reconnectMinMs})`);
    reconnectMaxMs = undefined;
  }
  const shutdownGraceMs = intField(c, v, at, 'shutdownGraceMs', L.shutdownGraceMs, D.shutdownGraceMs);

  // peers
  const pAt: Path = [...at, 'peers'];
  let peers: BgpPeerConfig[] | undefined = [];
  if (!has(v, 'peers')) {
    c.add(pAt, undefined, 'required: a list of peers (the router: address and asn), at least one');
    peers = undefined;
  } else if (!isList(v['peers']) || (v['peers'] as unknown[]).length === 0) {
    c.add(pAt, v['peers'], 'must be a list of peers (the router: address and asn), at least one');
    peers = undefined;
  } else {
    const seen = new Map<string, number>();
    listItems(v['peers'] as unknown[]).forEach((it, i) => {
      const pat: Path = [...pAt, i];
      const o = itemObj(c, it, pat, BGP_PEER_KEYS);
      if (o === undefined) { peers = undefined; return; }
      const address = reqAddressField(c, o, pat, 'address', 'any');
      const pasn = asnCheck([...pat, 'asn'], intField(c, o, pat, 'asn', L.asn, undefined, asnHint));
      const port = intField(c, o, pat, 'port', L.port, D.peerPort);
      if (address !== undefined) {
        const prev = seen.get(ipKey(address));
        if (prev !== undefined) c.add([...pat, 'address'], o['address'], `peer ${address.text} is already bgp.peers[${prev}]`);
        else seen.set(ipKey(address), i);
        const t = taken.get(ipKey(address));
        if (t !== undefined) c.add([...pat, 'address'], o['address'], `${address.text} is ${t.what} (${t.path}); a peer is the router, an address of its own`);
        if (vipSeen.has(ipKey(address))) c.add([...pat, 'address'], o['address'], `${address.text} is a VIP; a peer is the router, an address of its own`);
        if (address.family === 6) {
          muxes.forEach((m, mi) => {
            if (m !== undefined && m.address6 === null) {
              c.add([...pat, 'address'], o['address'], `an IPv6 peer needs every mux to have an IPv6 provider address, and mux ${m.name ?? mi} (muxes[${mi}]) has no address6`);
            }
          });
        }
      }
      if (address === undefined || pasn === undefined || port === undefined) { peers = undefined; return; }
      peers?.push({ address, asn: pasn, port });
    });
  }

  // bfd
  let bfd: BgpBfdConfig | undefined;
  const bAt: Path = [...at, 'bfd'];
  if (!has(v, 'bfd') || v['bfd'] === null) bfd = { ...D.bfd };
  else if (!isObj(v['bfd'])) c.add(bAt, v['bfd'], `must be a mapping with the fields ${BFD_KEYS.join(', ')}`);
  else {
    const b = v['bfd'];
    checkKeys(c, b, bAt, BFD_KEYS);
    const enabled = boolField(c, b, bAt, 'enabled', D.bfd.enabled);
    const intervalMs = intField(c, b, bAt, 'intervalMs', L.bfdIntervalMs, D.bfd.intervalMs);
    const multiplier = intField(c, b, bAt, 'multiplier', L.bfdMultiplier, D.bfd.multiplier);
    if (enabled !== undefined && intervalMs !== undefined && multiplier !== undefined) bfd = { enabled, intervalMs, multiplier };
  }

  if (asn === undefined || holdTimeS === undefined || keepaliveS === undefined || reconnectMinMs === undefined || reconnectMaxMs === undefined
    || shutdownGraceMs === undefined || peers === undefined || bfd === undefined) return undefined;
  return { asn, holdTimeS, keepaliveS, reconnectMinMs, reconnectMaxMs, shutdownGraceMs, peers, bfd };
}

// ---------------------------------------------------------------------------------------------
// vipRanges: the prefixes the operator delegates to the load balancer (docs/config.md). The router
// accepts a MUX's host route only inside them, so a VIP outside one could never be reached: refused.

export interface VipRange {
  /** The prefix's first address (host bits zero). */
  readonly network: IpAddr;
  readonly prefixLen: number;
  /** Canonical text: `203.0.113.0/24`, `2001:db8:ff::/48`. */
  readonly text: string;
}

/** True when `a` lies inside `r` (same family, the first prefixLen bits equal). */
export function inVipRange(a: IpAddr, r: VipRange): boolean {
  if (a.family !== r.network.family) return false;
  for (let i = 0, left = r.prefixLen; left > 0; i++, left -= 32) {
    const mask = left >= 32 ? 0xffffffff : ~(0xffffffff >>> left);
    if (((a.words[i]! ^ r.network.words[i]!) & mask) !== 0) return false;
  }
  return true;
}

/** The host route of one address: `/32` or `/128`. */
export function hostVipRange(a: IpAddr): VipRange {
  const len = a.family === 4 ? 32 : 128;
  return { network: a, prefixLen: len, text: `${a.text}/${len}` };
}

/** Reads `ADDR/LEN`; a string that says what is wrong otherwise. */
export function parseVipRange(text: string): VipRange | string {
  const m = /^([^/\s]+)\/(\d{1,3})$/.exec(text);
  if (m === null) return 'must be a prefix ADDRESS/LENGTH, like 203.0.113.0/24 or 2001:db8:ff::/48';
  const a = parseIpAddr(m[1]!);
  if (a === null) return `${m[1]} is not an IPv4 or IPv6 address (leading zeros are refused); write a prefix like 203.0.113.0/24`;
  const max = a.family === 4 ? 32 : 128;
  const len = Number(m[2]);
  if (len < 1 || len > max) return `the length must be 1..${max} for IPv${a.family} (/0 would delegate every address)`;
  const words = Uint32Array.from(a.words, (w, i) => {
    const left = len - 32 * i;
    return left >= 32 ? w : left <= 0 ? 0 : (w & ~(0xffffffff >>> left)) >>> 0;
  });
  const net = parseIpAddr(a.family === 4 ? formatIpv4(words[0]!) : formatIpv6(words))!;
  if (net.text !== a.text) return `${text} has host bits set: write ${net.text}/${len}`;
  const problem = addressProblem(net);
  if (problem !== null && !(a.family === 6 && problem.includes('unspecified'))) return `${net.text} ${problem}; delegate a unicast prefix`;
  return { network: net, prefixLen: len, text: `${net.text}/${len}` };
}

/** The `vipRanges` list: null when absent (derived from the VIPs), undefined when invalid (reported). */
function validateVipRanges(c: Checker, raw: Obj, nodes: readonly (readonly [string, readonly (NodeP | undefined)[]])[]): VipRange[] | null | undefined {
  if (!has(raw, 'vipRanges') || raw['vipRanges'] === null) return null;
  const v = raw['vipRanges'];
  const hint = 'prefixes like 203.0.113.0/24 and 2001:db8:ff::/48';
  if (!isList(v) || v.length === 0) {
    c.add(['vipRanges'], v, `must be a list of ${hint}, at least one (or leave it out: the VIPs' own /32 and /128)`);
    return undefined;
  }
  const out: VipRange[] = [];
  let ok = true;
  const seen = new Map<string, number>();
  listItems(v).forEach((it, i) => {
    const at: Path = ['vipRanges', i];
    const r = typeof it === 'string' ? parseVipRange(it) : `must be a prefix written as a string${quoteHint(it)}, like 203.0.113.0/24`;
    if (typeof r === 'string') { c.add(at, it, r); ok = false; return; }
    const prev = seen.get(r.text);
    if (prev !== undefined) { c.add(at, it, `${r.text} is already vipRanges[${prev}]; list each prefix once`); ok = false; return; }
    seen.set(r.text, i);
    const held: string[] = [];
    for (const [section, list] of nodes) {
      list.forEach((n, ni) => {
        for (const a of [n?.address, n?.address6]) if (a != null && inVipRange(a, r)) held.push(`${a.text} (${n?.name ?? `${section}[${ni}]`})`);
      });
    }
    if (held.length > 0) {
      c.add(at, it, `${r.text} holds the provider address${held.length > 1 ? 'es' : ''} ${listNames(held, 4)}; the router would accept routes into its own fabric from a MUX: delegate a prefix of VIPs only`);
      ok = false;
    }
    out.push(r);
  });
  return ok ? out : undefined;
}

/** Every VIP inside a range, no BGP peer inside one; the ranges in force (derived when absent). */
function checkVipsInRanges(c: Checker, given: VipRange[] | null | undefined, vips: readonly (VipP | undefined)[], taken: ReadonlyMap<string, Claim>, bgp: BgpConfig | null | undefined): VipRange[] | undefined {
  if (given === undefined) return undefined;
  if (given === null) {
    // absent: the VIPs' own host routes. They are written out in the normalized config (plainConfig),
    // so a controller seeded from this config keeps them: a VIP added later needs a declared range.
    const derived: VipRange[] = [];
    for (const v of vips) if (v?.address !== undefined && !derived.some((r) => r.network.text === v.address!.text)) derived.push(hostVipRange(v.address));
    return derived;
  }
  const list = given.map((r) => r.text).join(', ');
  vips.forEach((v, vi) => {
    const a = v?.address;
    if (a === undefined || taken.has(ipKey(a)) || given.some((r) => inVipRange(a, r))) return; // a taken address is refused already
    c.add(['vips', vi, 'address'], a.text,
      `VIP ${a.text} is outside vipRanges (${list}), the prefixes the router accepts from the MUXes, so no client could reach it: take an address inside one, or add a prefix that holds it to vipRanges (and to the router's import policy, docs/bgp.md)`);
  });
  bgp?.peers.forEach((p, pi) => {
    const r = given.find((x) => inVipRange(p.address, x));
    if (r !== undefined) c.add(['bgp', 'peers', pi, 'address'], p.address.text, `${p.address.text} is inside vipRanges (${r.text}); the router's address must not be a prefix it accepts from the MUXes`);
  });
  return given;
}

// ---------------------------------------------------------------------------------------------
// Source positions: map an error path to the YAML node it came from

function locate(doc: Document.Parsed, path: Path, onKey: boolean): number | undefined {
  let node: unknown = doc.contents;
  let offset = rangeStart(node);
  for (let i = 0; i < path.length; i++) {
    const seg = path[i]!;
    for (let guard = 0; isAlias(node) && guard < 100; guard++) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value ?? '') : String(p.key)) === String(seg));
      if (pair === undefined) return offset;
      const last = i === path.length - 1;
      if (last && onKey) return rangeStart(pair.key) ?? offset;
      const next = pair.value ?? pair.key;
      offset = rangeStart(next) ?? rangeStart(pair.key) ?? offset;
      node = next;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg];
      if (item === undefined) return offset;
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      return offset;
    }
  }
  return offset;
}

function rangeStart(n: unknown): number | undefined {
  const r = (n as YamlNode | null | undefined)?.range;
  return Array.isArray(r) ? r[0] : undefined;
}

// ---------------------------------------------------------------------------------------------

function deepFreeze<T>(v: T): T {
  if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v) || Object.isFrozen(v)) return v;
  for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  return Object.freeze(v);
}
