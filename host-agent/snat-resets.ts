// tcpResetOnIdle's RSTs (docs/outbound.md): sent by the thread that holds the engine whose sweep ended the
// flows (the daemon's, or with --workers the worker's), through that thread's sockets.
import type { HostContext } from './data-plane.js';
import { snatResetToDip, snatResetToRemote, type SnatEngine } from './snat.js';

/** A socket a reset leaves by (a raw IP sender, a VM port's frame socket). */
export interface SnatResetSender {
  send(buf: Buffer, off: number, len: number): boolean;
}

/**
 * For each ESTABLISHED TCP flow the idle timeout ended (the sweep, or a packet that found it expired), one
 * RST toward the remote from frontend:port (like a DSR reply, by `raw4`/`raw6`) and one toward the DIP from
 * remote:port (on the nic's port, `portOf`, like an inbound SNAT reply). Counted in ctx's counters.
 */
export function sendSnatIdleResets(
  e: SnatEngine,
  ctx: HostContext,
  raw4: SnatResetSender | null,
  raw6: SnatResetSender | null,
  portOf: (nic: number) => SnatResetSender | null,
): void {
  const cv = ctx.counters.values;
  const C = ctx.counters.index;
  if (e.resetsLost > 0) {
    cv[C.snat_idle_resets_lost]! += e.resetsLost;
    e.resetsLost = 0;
  }
  for (const r of e.takeIdleResets()) {
    cv[C.snat_idle_resets]!++;
    const toRemote = Buffer.from(snatResetToRemote(r).buffer);
    const raw = r.family === 6 ? raw6 : raw4;
    if (raw === null || !raw.send(toRemote, 0, toRemote.length)) cv[C.send_error_snat_reset]!++;
    const nic = ctx.tables.nics[r.nic];
    const port = portOf(r.nic);
    const portMac = ctx.portMacs[r.nic];
    if (nic === undefined || port === null || portMac === undefined) {
      cv[C.send_error_snat_reset]!++;
      continue;
    }
    const toDip = Buffer.from(snatResetToDip(r, nic.mac, portMac, nic.vlanId).buffer);
    if (!port.send(toDip, 0, toDip.length)) cv[C.send_error_snat_reset]!++;
  }
}
