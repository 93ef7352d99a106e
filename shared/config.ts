// The slbx config schema: YAML (or JSON) text -> one validated, normalized, frozen SlbxConfig.
// Pure: no fs, no process, no logging. Every problem is collected (never stop at the first) with the
// field path, the bad value and what is allowed. Reference: docs/config.md.
// This file is the public API; the schema lives in shared/config/, one file per part: types.ts,
// defaults.ts (defaults and limits), check.ts (the checker and field readers), addresses.ts,
// did-you-mean.ts, position.ts (line and column), parse.ts (entry points), validate.ts (the document,
// in dependency order), one validator per section (fabric, flow-table, networks, nodes, nics, probes,
// pools, vips, vip-ranges, bgp), serialize.ts and lookups.ts (indexConfig).
export type {
  AllDown,
  BackendConfig,
  BgpBfdConfig,
  BgpConfig,
  BgpPeerConfig,
  ConfigError,
  ConfigResult,
  Distribution,
  FabricConfig,
  FlowTableConfig,
  HostConfig,
  IpProtocolNumber,
  MuxConfig,
  NetworkConfig,
  NetworkType,
  NicConfig,
  PoolConfig,
  PoolLatencyConfig,
  ProbeConfig,
  ProbeProtocol,
  RuleConfig,
  RuleProtocol,
  SlbxConfig,
  Underlay,
  VipConfig,
  VipRange,
} from './config/types.js';
export { CONFIG_DEFAULTS, CONFIG_LIMITS, CONFIG_NAME_RE, IFNAME_MAX_BYTES, MAX_MUXES_PER_CONTROLLER } from './config/defaults.js';
export { formatConfigErrors, parseConfig, validateConfig } from './config/parse.js';
export { configSummary, plainConfig, serializeConfig } from './config/serialize.js';
export { indexConfig, type ConfigIndex, type VipRule } from './config/lookups.js';
export { formatPath, formatValue } from './config/check.js';
export { didYouMean } from './config/did-you-mean.js';
export { hostVipRange, inVipRange, parseVipRange } from './config/vip-ranges.js';
export { hostDsrQuota } from './config/flow-table.js';
