// 802.1Q on the port of a vlan network's nic (docs/config.md, 'networks'): the port is a trunk to the
// VM, so every frame the host agent puts on it carries the network's tag, and every frame the VM sends
// must carry it. Pure functions over a frame in a buffer; no allocation.
import { writeU16 } from '../shared/bytes.js';
import { ETH_VLAN_TAG_LEN, ETHERTYPE_VLAN, VLAN_NONE } from '../shared/ethernet.js';

/** The MAC addresses before the tag: destination and source. */
const ETH_MACS_LEN = 12;

/**
 * Inserts an 802.1Q tag (TPID 0x8100, PCP 0, DEI 0, `vid`) after the MACs of the untagged frame
 * buf[off .. off + len). With 4 bytes of headroom (off >= 4) the MACs move 4 bytes back and the frame
 * starts at off - 4 (the inbound path: the room is the VXLAN header the frame came in); otherwise the
 * payload moves 4 bytes forward when the buffer has room after it. Returns the tagged frame's offset
 * (its length is len + 4), or -1 when there is no room either way (nothing is changed).
 */
export function pushVlanTag(buf: Uint8Array, off: number, len: number, vid: number): number {
  if (len < ETH_MACS_LEN + 2 || off < 0 || off + len > buf.length) return -1;
  let start: number;
  if (off >= ETH_VLAN_TAG_LEN) {
    start = off - ETH_VLAN_TAG_LEN;
    buf.copyWithin(start, off, off + ETH_MACS_LEN);
  } else if (off + len + ETH_VLAN_TAG_LEN <= buf.length) {
    start = off;
    buf.copyWithin(off + ETH_MACS_LEN + ETH_VLAN_TAG_LEN, off + ETH_MACS_LEN, off + len);
  } else {
    return -1;
  }
  // IEEE 802.1Q 9.6: TCI = PCP (3 bits) | DEI (1) | VID (12)
  writeU16(buf, start + ETH_MACS_LEN, ETHERTYPE_VLAN);
  writeU16(buf, start + ETH_MACS_LEN + 2, vid & 0x0fff);
  return start;
}

/** Why a frame's tag does not match its port (see vlanMismatchReason). */
export const VLAN_TAGGED_ON_UNTAGGED_PORT = 0;
export const VLAN_TAG_MISSING = 1;
export const VLAN_TAG_WRONG = 2;

/**
 * For a frame whose VLAN id `got` (VLAN_NONE: untagged) is not the port's `want` (VLAN_NONE: a vxlan
 * network's untagged port): a tag on an untagged port, no tag on a trunk, or another VLAN's tag.
 */
export function vlanMismatchReason(want: number, got: number): number {
  if (want === VLAN_NONE) return VLAN_TAGGED_ON_UNTAGGED_PORT;
  return got === VLAN_NONE ? VLAN_TAG_MISSING : VLAN_TAG_WRONG;
}
