// ARP for IPv4 over Ethernet (RFC 826).
import { readU16, readU32, writeU16, writeU32, copyBytes } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_ARP } from './codec-error.js';

export const ARP_LEN = 28;
export const ARP_OP_REQUEST = 1;
export const ARP_OP_REPLY = 2;
const HTYPE_ETHERNET = 1;
const PTYPE_IPV4 = 0x0800;

export interface ArpPacket {
  op: number;
  readonly senderMac: Uint8Array; // 6 bytes
  senderIp: number; // uint32
  readonly targetMac: Uint8Array;
  targetIp: number;
}

export function newArpPacket(): ArpPacket {
  return { op: 0, senderMac: new Uint8Array(6), senderIp: 0, targetMac: new Uint8Array(6), targetIp: 0 };
}

export function parseArp(buf: Uint8Array, off: number, out: ArpPacket, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < ARP_LEN) return ERR_TRUNCATED;
  // RFC 826: hardware type 1 (Ethernet), protocol type 0x0800, lengths 6 and 4
  if (readU16(buf, off) !== HTYPE_ETHERNET || readU16(buf, off + 2) !== PTYPE_IPV4) return ERR_BAD_ARP;
  if (buf[off + 4] !== 6 || buf[off + 5] !== 4) return ERR_BAD_ARP;
  out.op = readU16(buf, off + 6);
  copyBytes(buf, off + 8, out.senderMac, 0, 6);
  out.senderIp = readU32(buf, off + 14);
  copyBytes(buf, off + 18, out.targetMac, 0, 6);
  out.targetIp = readU32(buf, off + 24);
  return ARP_LEN;
}

export function writeArp(p: ArpPacket, buf: Uint8Array, off: number): number {
  writeU16(buf, off, HTYPE_ETHERNET);
  writeU16(buf, off + 2, PTYPE_IPV4);
  buf[off + 4] = 6;
  buf[off + 5] = 4;
  writeU16(buf, off + 6, p.op);
  copyBytes(p.senderMac, 0, buf, off + 8, 6);
  writeU32(buf, off + 14, p.senderIp);
  copyBytes(p.targetMac, 0, buf, off + 18, 6);
  writeU32(buf, off + 24, p.targetIp);
  return ARP_LEN;
}
