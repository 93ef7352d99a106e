// The one place that turns a config into the MUX data plane's context: the daemon (mux/daemon.ts) and
// slbx-replay (cli/replay.ts) both build it here, so the replay writes what the daemon sends: the same
// provider addresses, underlay (IPv4, or IPv6 with its computed UDP checksum), MTU, VXLAN port, hash
// seed and flow-table limits.
import type { SlbxConfig } from '../shared/config.js';
import { newMuxContext, type MuxContext } from './data-plane.js';
import type { MuxTables } from './tables.js';

/** The config's entry for MUX `name`, or an error naming the MUXes there are. */
export function muxOf(config: SlbxConfig, name: string): SlbxConfig['muxes'][number] {
  const me = config.muxes.find((m) => m.name === name);
  if (me === undefined)
    throw new Error(`mux ${JSON.stringify(name)} is not in the config (muxes: ${config.muxes.map((m) => m.name).join(', ')})`);
  return me;
}

/** The data plane's context of MUX `name` under `config`, with `tables` and the fabric interface's MAC. */
export function buildMuxContext(config: SlbxConfig, name: string, tables: MuxTables, localMac: Uint8Array): MuxContext {
  const me = muxOf(config, name);
  return newMuxContext({
    tables,
    localMac,
    localPa4: me.address.words[0]!,
    localPa6: me.address6?.words ?? null,
    underlay6: config.fabric.underlay === 'ipv6',
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: config.flowTable,
  });
}

/**
 * Everything of `config` that buildMuxContext puts into the context itself (not into the tables): two
 * configs with the same key can share one context (and its flow table); a different key needs a new one.
 */
export function muxContextKey(config: SlbxConfig, name: string): string {
  const me = muxOf(config, name);
  return JSON.stringify([
    me.address.text,
    me.address6?.text ?? null,
    config.fabric.underlay,
    config.hashSeed,
    config.fabric.mtu,
    config.fabric.vxlanPort,
    // the host agents' table and its quotas, not the MUX's; the UDP redirect threshold lives in the tables (every policy)
    { ...config.flowTable, maxFastpathFlows: null, fastpathUdpDatagrams: null, hostMaxFlows: null, snatMaxFlows: null },
  ]);
}
