// The whole document: top-level fields, then each section in dependency order (names declared first
// so that references resolve), then the cross-section checks; every problem is collected.
import { checkKeys, declareNames, has, intField, isObj, sectionList, type Checker } from './check.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS, deepFreeze } from './defaults.js';
import { validateBgp } from './bgp.js';
import { validateFabric } from './fabric.js';
import { validateFlowTable } from './flow-table.js';
import { checkGateways, validateNetworks } from './networks.js';
import { validateNics } from './nics.js';
import { validateNodes, type NodeP } from './nodes.js';
import { validatePools } from './pools.js';
import { validateProbes } from './probes.js';
import type {
  BackendConfig,
  MuxConfig,
  NetworkConfig,
  NicConfig,
  PoolConfig,
  ProbeConfig,
  RuleConfig,
  SlbxConfig,
  VipConfig,
} from './types.js';
import { checkVipsInRanges, validateVipRanges } from './vip-ranges.js';
import { RULE_PROTOCOLS, takenAddresses, validateVips } from './vips.js';
import { checkInternalOutsideRanges } from './internal-vips.js';
import { validateOutbound } from './outbound.js';

const TOP_KEYS = [
  'version',
  'hashSeed',
  'maglevTableSize',
  'fabric',
  'flowTable',
  'networks',
  'muxes',
  'hosts',
  'nics',
  'probes',
  'pools',
  'vipRanges',
  'vips',
  'bgp',
  'outbound',
] as const;

export function validateRoot(c: Checker, raw: unknown): SlbxConfig | null {
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

  const fabric = validateFabric(c, raw);
  const flow = validateFlowTable(c, raw);

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

  const nets = validateNetworks(c, netItems);
  const { muxes, hosts } = validateNodes(c, muxItems, hostItems, fabric.underlay);
  const { nics, nicAddrClaims } = validateNics(c, nicItems, hostNames, netNames);
  checkGateways(c, nets, netNames, nicAddrClaims);
  const probes = validateProbes(c, probeItems);
  const pools = validatePools(c, poolItems, nicNames, nics, tableSize);
  const taken = takenAddresses(muxes, hosts, nics, nets);

  const vipRangesGiven = validateVipRanges(c, raw, [
    ['muxes', muxes],
    ['hosts', hosts],
  ]);
  const { vips, vipSeen } = validateVips(
    c,
    vipItems,
    taken,
    { pools: poolNames, probes: probeNames, networks: netNames },
    pools,
    nics,
    nets,
  );

  const bgp = validateBgp(c, raw, muxes, taken, vipSeen);
  const vipRanges = checkVipsInRanges(c, vipRangesGiven, vips, taken, bgp);
  checkInternalOutsideRanges(c, vips, vipRangesGiven);

  if (c.issues.length > 0) return null;

  // ------------------------------------------------------------------------------------------
  // Assembly: every field below was validated, so none is undefined.
  const net = nets.map((n): NetworkConfig => ({
    name: n!.name!,
    type: n!.type!,
    vni: n!.vni!,
    vlan: n!.vlan!,
    gateway: n!.gateway!,
    gateway6: n!.gateway6!,
  }));
  const node = (n: NodeP | undefined): MuxConfig => ({
    name: n!.name!,
    address: n!.address!,
    address6: n!.address6!,
    prefixLength: n!.prefixLength ?? null,
    gateway: n!.gateway ?? null,
    prefixLength6: n!.prefixLength6 ?? null,
    gateway6: n!.gateway6 ?? null,
  });
  const config: SlbxConfig = {
    version: 1,
    hashSeed: hashSeed!,
    maglevTableSize: maglevTableSize!,
    fabric: { mtu: fabric.mtu!, vxlanPort: fabric.vxlanPort!, underlay: fabric.underlay! },
    flowTable: {
      maxFlows: flow.maxFlows!,
      tcpIdleTimeoutS: flow.tcpIdleTimeoutS!,
      udpIdleTimeoutS: flow.udpIdleTimeoutS!,
      otherIdleTimeoutS: flow.otherIdleTimeoutS!,
      untrustedMaxFlows: flow.untrustedMaxFlows!,
      untrustedTimeoutS: flow.untrustedTimeoutS!,
      maxFastpathFlows: flow.maxFastpathFlows!,
      fastpathUdpDatagrams: flow.fastpathUdpDatagrams!,
      hostMaxFlows: flow.hostMaxFlows!,
      snatMaxFlows: flow.snatMaxFlows!,
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
      latency: p!.latency ?? null,
      backends: p!.backends!.map((b): BackendConfig => ({
        nic: b!.nic!,
        priority: b!.priority!,
        weight: b!.weight!,
        enabled: b!.enabled!,
        drain: b!.drain!,
      })),
    })),
    vips: vips.map((v): VipConfig => ({
      address: v!.address!,
      scope: v!.scope!,
      network: v!.network!,
      rules: v!.rules!.map((r): RuleConfig => ({
        name: r!.name!,
        protocols: RULE_PROTOCOLS[r!.protocol!],
        protocol: r!.protocol!,
        frontendPort: r!.frontendPort!,
        backendPort: r!.backendPort!,
        pool: r!.pool!,
        distribution: r!.distribution!,
        probe: r!.probe!,
        allDown: r!.allDown!,
      })),
    })),
    vipRanges: vipRanges!,
    bgp: bgp!,
    outbound: [],
  };
  const outbound = validateOutbound(c, raw, config);
  if (c.issues.length > 0) return null;
  return deepFreeze({ ...config, outbound });
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
