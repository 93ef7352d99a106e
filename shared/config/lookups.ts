// Lookups by name a daemon needs, built once per config object.
import type {
  HostConfig,
  MuxConfig,
  NetworkConfig,
  NicConfig,
  PoolConfig,
  ProbeConfig,
  RuleConfig,
  SlbxConfig,
  VipConfig,
} from './types.js';

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
