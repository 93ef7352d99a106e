// Steering for host agent workers (issue 19): which worker a frame belongs to, so that both directions of
// a flow reach the worker that holds its state. Pure: no sockets, timers or logs.
//
// The host agent's state is per flow and bidirectional (docs/io-paths.md "Host agent workers"): the
// return path records a flow from VXLAN on the fabric interface and finds it again when the backend's
// reply comes in on the VM's port; outbound NAT opens a flow on the VM's port and finds it from the reply
// on the fabric. The kernel's PACKET_FANOUT hash mode hashes the frame as it is, and the two directions
// of such a flow look nothing alike (VXLAN against a bare frame, VIP:port against DIP:port), so the
// worker is picked from the one end of the flow that nothing rewrites: the remote end.
//
//   fabric interface (VXLAN to our PA): the inner SOURCE address and port (a client of a VIP, the server
//                     of an outbound NAT flow), unless that source is an internal VIP: then the inner
//                     DESTINATION (the east-west client on this host, whose reply this is)
//   VM port (a frame from a backend): the DESTINATION address and port (the client it replies to, the
//                     server it connects to), unless that destination is an internal VIP: then the
//                     SOURCE (this VM is the east-west client; the reply comes back to it)
//
// key = fold(mix(address words..., port)) and worker = key % N. The same function is compiled into a
// classic BPF program (buildSteeringProgram) that the kernel runs for every frame of a PACKET_FANOUT
// group in PACKET_FANOUT_CBPF mode: the kernel takes the program's return value modulo the number of
// sockets in the group. A frame the key cannot be read from (not IPv4/IPv6, outer fragment, not VXLAN to
// the VXLAN port, too short, a byte the key needs past the end) has key 0: worker 0.
//
//   ICMP errors (ICMPv4 3, 11, 12; ICMPv6 1-4; not in a fragment) are keyed by the packet they quote, as
//                     the OTHER side keys it: the quoted packet went the other way. A backend's error
//                     about a client's packet (port; quote client:port -> DIP:port) takes the quote's
//                     source, as the fabric took that packet's; a router's error about a DSR reply (fabric,
//                     from a MUX; quote VIP:port -> client:port) the quote's destination, as the port took
//                     the reply's. The internal VIP rule applies to the quote the same way. A quote is not
//                     searched for a quote; a quote without ports (ICMP, a later fragment) takes port 0.
//   IPv6 extension headers: hop-by-hop, routing, destination options, AH and fragment are skipped, up to
//                     STEER_MAX_EXT_HEADERS (8, the data plane's bound), then the ports are read (in the
//                     frame and in a quote); a chain longer than that keys on port 0 (the data plane
//                     drops it).
//   Fragments: a first fragment (offset 0) carries the ports and is keyed by them, as the data plane
//                     records or finds its flow by them; a later fragment has none and keys on (remote
//                     address, 0): the data plane translates it without a flow (the address alone, or by
//                     the stateless rule of its protocol), the same on any worker.
//
// The program reads at offsets from the network header as the receive path hands it to the fanout (the
// kernel removed one VLAN tag into the skb before that, SKF_AD_PROTOCOL is then the inner EtherType), so
// steeringKey() skips one 802.1Q/802.1ad tag the same way.

export const STEER_FABRIC = 0;
export const STEER_PORT = 1;
export type SteerSide = typeof STEER_FABRIC | typeof STEER_PORT;

/** The multiplier of the mix (2^32 / golden ratio, odd). */
export const STEER_MUL = 0x9e3779b1;
/** Most internal VIPs per family a steering program takes (it compares each one: a few instructions each). */
export const STEER_MAX_INTERNAL_VIPS = 64;
/** IPv6 extension headers the key looks past before the ports (the data plane's bound, IPV6_MAX_EXT_HEADERS). */
export const STEER_MAX_EXT_HEADERS = 8;

/** The internal VIPs (east-west, docs/east-west.md) the key looks past: IPv4 as numbers, IPv6 as four words. */
export interface SteeringVips {
  v4: readonly number[];
  v6: readonly (readonly number[])[];
}

export const NO_INTERNAL_VIPS: SteeringVips = { v4: [], v6: [] };

const ETH_LEN = 14;
const VXLAN_INNER_OFF = 8 + 8; // UDP + VXLAN header, then the inner Ethernet header

function mixWord(h: number, w: number): number {
  return Math.imul(h ^ w, STEER_MUL) >>> 0;
}

function fold(h: number): number {
  return (h ^ (h >>> 16)) >>> 0;
}

function isInternal4(vips: SteeringVips, a: number): boolean {
  for (const v of vips.v4) if (v >>> 0 === a) return true;
  return false;
}

function isInternal6(vips: SteeringVips, b: Uint8Array, off: number): boolean {
  for (const v of vips.v6) {
    if (
      v[0]! >>> 0 === readU32(b, off) &&
      v[1]! >>> 0 === readU32(b, off + 4) &&
      v[2]! >>> 0 === readU32(b, off + 8) &&
      v[3]! >>> 0 === readU32(b, off + 12)
    )
      return true;
  }
  return false;
}

function readU32(b: Uint8Array, o: number): number {
  return ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
}

function readU16(b: Uint8Array, o: number): number {
  return (b[o]! << 8) | b[o + 1]!;
}

/** The other side's rule: the one a quoted packet (a packet of the other direction) was keyed by. */
function otherSide(side: SteerSide): SteerSide {
  return side === STEER_FABRIC ? STEER_PORT : STEER_FABRIC;
}

/**
 * The key of the IP packet at `ip` (family by `type`) seen on `side`: that side's end (fabric the source,
 * port the destination), the other end when that one is an internal VIP. An ICMP error (not inside a
 * quote, not a fragment) takes the key of the packet it quotes as the OTHER side would key it: the quoted
 * packet went the other way. 0 when a byte it needs is past `end` (as the program's load would end it).
 */
function keyOfIp(b: Uint8Array, ip: number, end: number, type: number, side: SteerSide, vips: SteeringVips, quote: boolean): number {
  let sport = 0;
  let dport = 0;
  if (type === 0x0800) {
    if (ip + 20 > end) return 0;
    const frag = readU16(b, ip + 6);
    const proto = b[ip + 9]!;
    // a later fragment (offset != 0) has no ports; the first one has them (the data plane reads them)
    if ((frag & 0x1fff) === 0) {
      const l4 = ip + (b[ip]! & 0x0f) * 4;
      if (proto === 6 || proto === 17) {
        if (l4 + 4 > end) return 0;
        sport = readU16(b, l4);
        dport = readU16(b, l4 + 2);
      } else if (proto === 1 && !quote && (frag & 0x2000) === 0) {
        if (l4 + 1 > end) return 0;
        const t = b[l4]!;
        if (t === 3 || t === 11 || t === 12) return keyOfIp(b, l4 + 8, end, 0x0800, otherSide(side), vips, true);
      }
    }
    const src = readU32(b, ip + 12);
    const dst = readU32(b, ip + 16);
    const useSrc = side === STEER_FABRIC ? !isInternal4(vips, src) : isInternal4(vips, dst);
    return fold(mixWord(mixWord(0, useSrc ? src : dst), useSrc ? sport : dport));
  }
  if (type === 0x86dd) {
    if (ip + 40 > end) return 0;
    let nh = b[ip + 6]!;
    let pos = ip + 40;
    let fragment = false;
    let later = false;
    for (let i = 0; i < STEER_MAX_EXT_HEADERS; i++) {
      if (nh === 0 || nh === 43 || nh === 60 || nh === 51) {
        // hop-by-hop, routing, destination options: 8-octet units after the first; AH: 4-octet units + 2
        if (pos + 2 > end) return 0;
        const len = nh === 51 ? (b[pos + 1]! + 2) * 4 : (b[pos + 1]! + 1) * 8;
        nh = b[pos]!;
        pos += len;
      } else if (nh === 44) {
        if (pos + 4 > end) return 0;
        if ((readU16(b, pos + 2) & 0xfff8) !== 0) {
          later = true; // a later fragment: no ports
          break;
        }
        fragment = true;
        nh = b[pos]!;
        pos += 8;
      } else break;
    }
    if (!later) {
      if (nh === 6 || nh === 17) {
        if (pos + 4 > end) return 0;
        sport = readU16(b, pos);
        dport = readU16(b, pos + 2);
      } else if (nh === 58 && !quote && !fragment) {
        if (pos + 1 > end) return 0;
        const t = b[pos]!;
        if (t >= 1 && t <= 4) return keyOfIp(b, pos + 8, end, 0x86dd, otherSide(side), vips, true);
      }
    }
    const useSrc = side === STEER_FABRIC ? !isInternal6(vips, b, ip + 8) : isInternal6(vips, b, ip + 24);
    const a = ip + (useSrc ? 8 : 24);
    let h = 0;
    for (let i = 0; i < 4; i++) h = mixWord(h, readU32(b, a + 4 * i));
    return fold(mixWord(h, useSrc ? sport : dport));
  }
  return 0;
}

/**
 * The steering key of the frame b[off .. off + len) (Ethernet onwards) seen on `side`; worker = key % N
 * (steerWorker). Never throws: a frame it cannot read has key 0.
 */
export function steeringKey(b: Uint8Array, off: number, len: number, side: SteerSide, vxlanPort: number, vips: SteeringVips): number {
  const end = Math.min(b.length, off + len);
  if (off + ETH_LEN > end) return 0;
  let type = readU16(b, off + 12);
  let net = off + ETH_LEN;
  if (type === 0x8100 || type === 0x88a8) {
    // the kernel moved this tag into the skb before the fanout ran (one tag; a second one stays)
    if (net + 4 > end) return 0;
    type = readU16(b, net + 2);
    net += 4;
  }
  if (side === STEER_PORT) return keyOfIp(b, net, end, type, side, vips, false);
  // fabric: VXLAN to the VXLAN port, outer IPv4 (not a fragment) or IPv6 (UDP right after the header)
  let udp: number;
  if (type === 0x0800) {
    if (net + 20 > end) return 0;
    if ((readU16(b, net + 6) & 0x3fff) !== 0 || b[net + 9] !== 17) return 0;
    udp = net + (b[net]! & 0x0f) * 4;
  } else if (type === 0x86dd) {
    if (net + 40 > end) return 0;
    if (b[net + 6] !== 17) return 0;
    udp = net + 40;
  } else return 0;
  if (udp + 4 > end || readU16(b, udp + 2) !== vxlanPort) return 0;
  const inner = udp + VXLAN_INNER_OFF;
  if (inner + ETH_LEN > end) return 0;
  return keyOfIp(b, inner + ETH_LEN, end, readU16(b, inner + 12), side, vips, false);
}

/**
 * The steering key of a flow's remote end given as words (the flow table's and the SNAT records' form:
 * an IPv4 address as one word, IPv6 as four, each as read big-endian from the packet) and its port: what
 * steeringKey computes from a frame of that flow, on either side. The flow snapshot's and journal's
 * records are split between workers by it (host-agent/flow-state-sets.ts).
 */
export function steeringKeyOfEnd(family: 4 | 6, words: ArrayLike<number>, port: number): number {
  let h = 0;
  if (family === 4) h = mixWord(0, words[0]! >>> 0);
  else for (let i = 0; i < 4; i++) h = mixWord(h, words[i]! >>> 0);
  return fold(mixWord(h, port & 0xffff));
}

/** The worker of a key among n (the kernel's fanout: the program's value modulo the group's size). */
export function steerWorker(key: number, n: number): number {
  return n <= 1 ? 0 : (key >>> 0) % n;
}

// ---- the same key as a classic BPF program (PACKET_FANOUT_CBPF) ----------------------------------

/** One classic BPF instruction (struct sock_filter). */
export interface SockFilter {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

// opcodes (linux/filter.h, linux/bpf_common.h)
const LD = 0x00,
  LDX = 0x01,
  ST = 0x02,
  ALU = 0x04,
  JMP = 0x05,
  RET = 0x06,
  MISC = 0x07;
const W = 0x00,
  H = 0x08,
  B = 0x10;
const IMM = 0x00,
  ABS = 0x20,
  IND = 0x40,
  MEM = 0x60;
const ADD = 0x00,
  MUL = 0x20,
  AND = 0x50,
  LSH = 0x60,
  RSH = 0x70,
  XOR = 0xa0;
const K = 0x00,
  X = 0x08;
const JA = 0x00,
  JEQ = 0x10,
  JGT = 0x20,
  JGE = 0x30,
  JSET = 0x40;
const RET_A = 0x10;
const TAX = 0x00,
  TXA = 0x80;
/** SKF_AD_OFF + SKF_AD_PROTOCOL: skb->protocol (after the kernel removed a VLAN tag), host order. */
const AD_PROTOCOL = (-0x1000 + 0) >>> 0;
/** Classic BPF's limit on conditional jumps (8 bits) and on program length (BPF_MAXINSNS). */
const MAX_JUMP = 255;
export const BPF_MAXINSNS = 4096;

// scratch memory: (0 the inner EtherType on the fabric) M_DPORT, M_SPORT, M_NH (an IPv6 next header while
// X moves), the source's and the destination's address words, M_FRAG (1: the frame's IPv6 header chain
// holds a fragment header)
const M_DPORT = 1,
  M_SPORT = 2,
  M_NH = 3,
  M_SRC = 4,
  M_DST = 8,
  M_FRAG = 12;

type Insn = { code: number; k: number; jt?: string | number; jf?: string | number; ja?: string } | { label: string };

/** A small assembler: labels, conditional jumps by label (near), `ja` by label (any distance). */
class Asm {
  readonly insns: Insn[] = [];
  op(code: number, k = 0): this {
    this.insns.push({ code, k: k >>> 0 });
    return this;
  }
  jmp(code: number, k: number, jt: string | number, jf: string | number): this {
    this.insns.push({ code: JMP | code | K, k: k >>> 0, jt, jf });
    return this;
  }
  ja(label: string): this {
    this.insns.push({ code: JMP | JA, k: 0, ja: label });
    return this;
  }
  label(name: string): this {
    this.insns.push({ label: name });
    return this;
  }
  assemble(): SockFilter[] {
    const at = new Map<string, number>();
    let pc = 0;
    for (const i of this.insns) {
      if ('label' in i) {
        if (at.has(i.label)) throw new Error(`steering program: label ${i.label} twice`);
        at.set(i.label, pc);
      } else pc++;
    }
    const out: SockFilter[] = [];
    const rel = (t: string | number | undefined, from: number, near: boolean): number => {
      if (t === undefined) return 0;
      if (typeof t === 'number') return t;
      const to = at.get(t);
      if (to === undefined) throw new Error(`steering program: no label ${t}`);
      const d = to - from - 1;
      if (d < 0 || (near && d > MAX_JUMP)) throw new Error(`steering program: jump to ${t} out of range (${d})`);
      return d;
    };
    for (const i of this.insns) {
      if ('label' in i) continue;
      const pcNow = out.length;
      if (i.ja !== undefined) out.push({ code: i.code, jt: 0, jf: 0, k: rel(i.ja, pcNow, false) });
      else out.push({ code: i.code, jt: rel(i.jt, pcNow, true), jf: rel(i.jf, pcNow, true), k: i.k });
    }
    if (out.length > BPF_MAXINSNS) throw new Error(`steering program: ${out.length} instructions (at most ${BPF_MAXINSNS})`);
    return out;
  }
}

/**
 * The IP part of the program (labels prefixed by `p`: '' the frame's own IP header, 'q' an ICMP error's
 * quoted one), X at the IP header on entry: addresses and ports into scratch memory, then the end `rule`
 * names (fabric: the source, port: the destination; the other end when that one is an internal VIP), on to
 * the mix of that end (labels src4/dst4/src6/dst6). The frame's own header (p = '') goes on to the quote of
 * an ICMP error (labels qip4/qip6, X moved to the quoted header); a quote has no quote. Classic BPF jumps
 * only forward: the IPv6 extension headers are walked by STEER_MAX_EXT_HEADERS copies of one step.
 */
function parseIp(a: Asm, p: string, rule: SteerSide, vips: SteeringVips): void {
  const own = p === '';
  // ---- IPv4 at [x + 0] ----------------------------------------------------------------------------
  a.label(`${p}ip4`);
  a.op(LD | W | IND, 12).op(ST, M_SRC);
  a.op(LD | W | IND, 16).op(ST, M_DST);
  a.op(LD | IMM, 0)
    .op(ST, M_SPORT)
    .op(ST, M_DPORT);
  // a later fragment (offset != 0): no ports; the first fragment has them
  a.op(LD | H | IND, 6).jmp(JSET, 0x1fff, `${p}pick4`, 0);
  a.op(LD | B | IND, 9)
    .jmp(JEQ, 6, `${p}l4v4`, 0)
    .jmp(JEQ, 17, `${p}l4v4`, own ? 0 : `${p}pick4`);
  if (own) a.jmp(JEQ, 1, `${p}icmp4`, `${p}pick4`);
  const toL4 = (): void => {
    a.op(LD | B | IND, 0)
      .op(ALU | AND | K, 0x0f)
      .op(ALU | LSH | K, 2)
      .op(ALU | ADD | X, 0)
      .op(MISC | TAX);
  };
  a.label(`${p}l4v4`);
  toL4();
  a.op(LD | H | IND, 0).op(ST, M_SPORT);
  a.op(LD | H | IND, 2).op(ST, M_DPORT);
  if (own) {
    a.ja(`${p}pick4`);
    // ICMP, not a fragment at all (MF clear too): an error (3, 11, 12) takes its quote's key
    a.label(`${p}icmp4`);
    a.op(LD | H | IND, 6).jmp(JSET, 0x2000, `${p}pick4`, 0);
    toL4();
    a.op(LD | B | IND, 0)
      .jmp(JEQ, 3, `${p}quote4`, 0)
      .jmp(JEQ, 11, `${p}quote4`, 0)
      .jmp(JEQ, 12, `${p}quote4`, `${p}pick4`);
    a.label(`${p}quote4`);
    a.op(MISC | TXA)
      .op(ALU | ADD | K, 8)
      .op(MISC | TAX);
    a.ja('qip4');
  }
  a.label(`${p}pick4`);
  a.op(LD | MEM, rule === STEER_FABRIC ? M_SRC : M_DST);
  const [this4, other4] = rule === STEER_FABRIC ? ['src4', 'dst4'] : ['dst4', 'src4'];
  for (const v of vips.v4) a.jmp(JEQ, v, 0, 1).ja(other4);
  a.ja(this4);
  // ---- IPv6 at [x + 0]: extension headers walked, X at the upper-layer header ---------------------
  a.label(`${p}ip6`);
  for (let i = 0; i < 4; i++) a.op(LD | W | IND, 8 + 4 * i).op(ST, M_SRC + i);
  for (let i = 0; i < 4; i++) a.op(LD | W | IND, 24 + 4 * i).op(ST, M_DST + i);
  a.op(LD | IMM, 0)
    .op(ST, M_SPORT)
    .op(ST, M_DPORT);
  if (own) a.op(ST, M_FRAG);
  a.op(LD | B | IND, 6).op(ST, M_NH);
  a.op(MISC | TXA)
    .op(ALU | ADD | K, 40)
    .op(MISC | TAX);
  a.op(LD | MEM, M_NH);
  // one step per extension header, A = its type, X = its offset: skipped (X past it, A = the next type),
  // or out to the upper layer (A = its protocol) or, for a later fragment, to the pick without ports
  for (let i = 0; i < STEER_MAX_EXT_HEADERS; i++) {
    const s = `${p}x${i}`;
    const next = i + 1 < STEER_MAX_EXT_HEADERS ? `${p}x${i + 1}` : `${p}upper6`;
    a.label(s);
    a.jmp(JEQ, 0, `${s}opt`, 0)
      .jmp(JEQ, 43, `${s}opt`, 0)
      .jmp(JEQ, 60, `${s}opt`, 0)
      .jmp(JEQ, 51, `${s}ah`, 0)
      .jmp(JEQ, 44, `${s}frag`, `${s}out`);
    a.label(`${s}out`);
    a.ja(`${p}upper6`);
    // hop-by-hop, routing, destination options: (length + 1) * 8 octets; AH: (length + 2) * 4
    for (const [l, add, shift] of [
      ['opt', 1, 3],
      ['ah', 2, 2],
    ] as const) {
      a.label(`${s}${l}`);
      a.op(LD | B | IND, 0).op(ST, M_NH);
      a.op(LD | B | IND, 1)
        .op(ALU | ADD | K, add)
        .op(ALU | LSH | K, shift)
        .op(ALU | ADD | X, 0)
        .op(MISC | TAX);
      a.op(LD | MEM, M_NH);
      a.ja(next);
    }
    // fragment: 8 octets; a later one (offset != 0) has no ports
    a.label(`${s}frag`);
    a.op(LD | H | IND, 2).jmp(JSET, 0xfff8, `${s}later`, 0);
    if (own) a.op(LD | IMM, 1).op(ST, M_FRAG);
    a.op(LD | B | IND, 0).op(ST, M_NH);
    a.op(MISC | TXA)
      .op(ALU | ADD | K, 8)
      .op(MISC | TAX);
    a.op(LD | MEM, M_NH);
    a.ja(next);
    a.label(`${s}later`);
    a.ja(`${p}pick6`);
  }
  a.label(`${p}upper6`);
  a.jmp(JEQ, 6, `${p}l4v6`, 0).jmp(JEQ, 17, `${p}l4v6`, own ? 0 : `${p}pick6`);
  if (own) a.jmp(JEQ, 58, `${p}icmp6`, `${p}pick6`);
  a.label(`${p}l4v6`);
  a.op(LD | H | IND, 0).op(ST, M_SPORT);
  a.op(LD | H | IND, 2).op(ST, M_DPORT);
  if (own) {
    a.ja(`${p}pick6`);
    // ICMPv6 without a fragment header: an error (types 1-4) takes its quote's key
    a.label(`${p}icmp6`);
    a.op(LD | MEM, M_FRAG).jmp(JEQ, 0, 0, `${p}pick6`);
    a.op(LD | B | IND, 0)
      .jmp(JGE, 1, 0, `${p}pick6`)
      .jmp(JGT, 4, `${p}pick6`, 0);
    a.op(MISC | TXA)
      .op(ALU | ADD | K, 8)
      .op(MISC | TAX);
    a.ja('qip6');
  }
  a.label(`${p}pick6`);
  const first6 = rule === STEER_FABRIC ? M_SRC : M_DST;
  const [this6, other6] = rule === STEER_FABRIC ? ['src6', 'dst6'] : ['dst6', 'src6'];
  for (const v of vips.v6) {
    // 4 x (load, compare): 8 instructions; a mismatch skips to the next VIP
    for (let i = 0; i < 4; i++) {
      const left = 3 - i; // comparisons after this one
      a.op(LD | MEM, first6 + i).jmp(JEQ, v[i]! >>> 0, 0, left * 2 + 1);
    }
    a.ja(other6);
  }
  a.ja(this6);
}

/**
 * The steering program for `side` (a PACKET_FANOUT_CBPF group on the fabric interface or on a VM's port):
 * returns steeringKey() of the frame. `vxlanPort`: the fabric's (config fabric.vxlanPort); `vips`: the
 * config's internal VIPs (at most STEER_MAX_INTERNAL_VIPS per family).
 */
export function buildSteeringProgram(side: SteerSide, vxlanPort: number, vips: SteeringVips): SockFilter[] {
  if (vips.v4.length > STEER_MAX_INTERNAL_VIPS || vips.v6.length > STEER_MAX_INTERNAL_VIPS)
    throw new Error(`steering program: at most ${STEER_MAX_INTERNAL_VIPS} internal VIPs per family`);
  const a = new Asm();
  // Loads are relative to the network header (the outer one on the fabric). Fabric: X = offset of the
  // inner IP header; port: X = 0. Every load of the IP part is `[x + off]`.
  a.op(LD | W | ABS, AD_PROTOCOL);
  if (side === STEER_PORT) {
    a.op(LDX | W | IMM, 0);
    a.jmp(JEQ, 0x0800, 'ip4', 0).jmp(JEQ, 0x86dd, 'ip6', 'zero');
  } else {
    a.jmp(JEQ, 0x0800, 'o4', 0).jmp(JEQ, 0x86dd, 'o6', 'zero');
    // outer IPv4: not a fragment, UDP; X = its header length
    a.label('o4');
    a.op(LD | H | ABS, 6).jmp(JSET, 0x3fff, 'zero', 0);
    a.op(LD | B | ABS, 9).jmp(JEQ, 17, 0, 'zero');
    a.op(LD | B | ABS, 0)
      .op(ALU | AND | K, 0x0f)
      .op(ALU | LSH | K, 2)
      .op(MISC | TAX);
    a.ja('udp');
    // outer IPv6: UDP right after the fixed header
    a.label('o6');
    a.op(LD | B | ABS, 6).jmp(JEQ, 17, 0, 'zero');
    a.op(LDX | W | IMM, 40);
    a.label('udp');
    a.op(LD | H | IND, 2).jmp(JEQ, vxlanPort, 0, 'zero');
    // the inner Ethernet header at X + 16: its EtherType at X + 28, the inner IP header at X + 30
    a.op(LD | H | IND, VXLAN_INNER_OFF + 12);
    a.op(ST, 0); // keep the EtherType while X moves to the inner IP header
    a.op(MISC | TXA); // A = X
    a.op(ALU | ADD | K, VXLAN_INNER_OFF + ETH_LEN).op(MISC | TAX);
    a.op(LD | MEM, 0);
    a.jmp(JEQ, 0x0800, 'ip4', 0).jmp(JEQ, 0x86dd, 'ip6', 'zero');
  }
  // no key: worker 0 (here, within a conditional jump's reach of every test above)
  a.label('zero');
  a.op(RET | K, 0);
  parseIp(a, '', side, vips);
  // the quoted packet of an ICMP error, keyed as the other side keys it (X at the quoted IP header)
  parseIp(a, 'q', side === STEER_FABRIC ? STEER_PORT : STEER_FABRIC, vips);
  // ---- the mix: h = (h ^ w) * MUL per word, then h ^ (h >> 16) -------------------------------------
  const mix = (label: string, slot: number, words: number, port: number): void => {
    a.label(label);
    a.op(LD | MEM, slot)
      .op(ALU | MUL | K, STEER_MUL)
      .op(MISC | TAX);
    for (let i = 1; i < words; i++)
      a.op(LD | MEM, slot + i)
        .op(ALU | XOR | X, 0)
        .op(ALU | MUL | K, STEER_MUL)
        .op(MISC | TAX);
    a.op(LD | MEM, port)
      .op(ALU | XOR | X, 0)
      .op(ALU | MUL | K, STEER_MUL)
      .op(MISC | TAX);
    a.op(ALU | RSH | K, 16)
      .op(ALU | XOR | X, 0)
      .op(RET | RET_A);
  };
  // IPv6 first: the kernel's check of scratch memory (every M[] read stored before on all paths) does not
  // end a path at a return, so the block after a `ret` inherits the one before's stores; the IPv6 paths
  // store every slot the IPv4 blocks read, not the other way round
  mix('src6', M_SRC, 4, M_SPORT);
  mix('dst6', M_DST, 4, M_DPORT);
  mix('src4', M_SRC, 1, M_SPORT);
  mix('dst4', M_DST, 1, M_DPORT);
  return a.assemble();
}

/** The program as the kernel takes it (struct sock_filter[], 8 bytes each, host byte order: little-endian). */
export function encodeSockFilters(prog: readonly SockFilter[]): Buffer {
  const b = Buffer.alloc(prog.length * 8);
  prog.forEach((i, n) => {
    b.writeUInt16LE(i.code, n * 8);
    b.writeUInt8(i.jt, n * 8 + 2);
    b.writeUInt8(i.jf, n * 8 + 3);
    b.writeUInt32LE(i.k >>> 0, n * 8 + 4);
  });
  return b;
}
