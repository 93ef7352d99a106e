// The one place that turns a config into a host agent data plane's context: the daemon
// (host-agent/daemon.ts) and slbx-replay (cli/replay.ts) both build it here, so the replay does what the
// daemon does: the config's VXLAN port, and the MTU of the DSR return (the fabric interface's: a backend's
// reply larger than that is answered with ICMP too big, not sent).
import type { SlbxConfig } from '../shared/config.js';
import { newHostContext, type HostContext } from './data-plane.js';
import type { HostTables } from './tables.js';

/** An MTU for the DSR return that no reply reaches: nothing is too big (the daemon's value when it cannot read its interface). */
export const DSR_MTU_UNKNOWN = 65535;

/**
 * The data plane's context of a host agent: `tables` (compileHostTables for this host), the MAC of each
 * port's host-side interface by nic index, and `dsrMtu`, the MTU of the interface toward the router
 * (the daemon reads it from its fabric interface; the lab gives every fabric interface fabric.mtu).
 */
export function buildHostContext(config: SlbxConfig, tables: HostTables, portMacs: Uint8Array[], dsrMtu: number): HostContext {
  const ctx = newHostContext(tables, config.fabric.vxlanPort, portMacs);
  ctx.dsrMtu = dsrMtu;
  return ctx;
}
