// A classic BPF interpreter (struct sock_filter programs, as the kernel runs them for a PACKET_FANOUT_CBPF
// group): a second implementation to run the host agent's steering programs on any frame and compare
// their full 32-bit value, where the kernel shows only the value modulo the group's size. Written from
// the instruction set (linux/filter.h, Documentation/networking/filter.rst): A, X, M[0..15], loads
// relative to the network header, a load past the packet's end ends the program with 0, the ancillary
// SKF_AD_PROTOCOL load gives the frame's EtherType (after one VLAN tag the kernel took off).
import type { SockFilter } from '../../host-agent/worker-steering.js';

const SKF_AD_OFF = -0x1000;
const SKF_AD_PROTOCOL = 0;

/** Runs `prog` over the frame b (Ethernet onwards): the program's return value. Throws on an instruction it does not know. */
export function runCbpf(prog: readonly SockFilter[], b: Uint8Array): number {
  let type = (b[12]! << 8) | b[13]!;
  let net = 14;
  if (type === 0x8100 || type === 0x88a8) {
    type = (b[16]! << 8) | b[17]!;
    net = 18;
  }
  const len = b.length - net;
  const load = (off: number, size: number): number | null => {
    if (off < 0 || off + size > len) return null;
    let v = 0;
    for (let i = 0; i < size; i++) v = v * 256 + b[net + off + i]!;
    return v >>> 0;
  };
  let A = 0;
  let X = 0;
  const M = new Array<number>(16).fill(0);
  for (let pc = 0; pc < prog.length; pc++) {
    const { code, jt, jf, k } = prog[pc]!;
    const cls = code & 0x07;
    if (cls === 0x00 || cls === 0x01) {
      // LD / LDX
      const mode = code & 0xe0;
      const size = [4, 2, 1][(code & 0x18) >> 3]!;
      let v: number | null;
      if (mode === 0x00) v = k >>> 0;
      else if (mode === 0x60) v = M[k]!;
      else if (mode === 0x20 || mode === 0x40) {
        const off = mode === 0x20 ? k | 0 : ((X + k) >>> 0) | 0;
        if (mode === 0x20 && off === SKF_AD_OFF + SKF_AD_PROTOCOL) v = type;
        else v = load(off >>> 0, size);
      } else throw new Error(`cbpf: load mode ${mode.toString(16)} at ${pc}`);
      if (v === null) return 0;
      if (cls === 0x00) A = v;
      else X = v;
    } else if (cls === 0x02) M[k] = A;
    else if (cls === 0x03) M[k] = X;
    else if (cls === 0x04) {
      const s = code & 0x08 ? X : k >>> 0;
      switch (code & 0xf0) {
        case 0x00:
          A = (A + s) >>> 0;
          break;
        case 0x10:
          A = (A - s) >>> 0;
          break;
        case 0x20:
          A = Math.imul(A, s) >>> 0;
          break;
        case 0x40:
          A = (A | s) >>> 0;
          break;
        case 0x50:
          A = (A & s) >>> 0;
          break;
        case 0x60:
          A = s >= 32 ? 0 : (A << s) >>> 0;
          break;
        case 0x70:
          A = s >= 32 ? 0 : A >>> s;
          break;
        case 0xa0:
          A = (A ^ s) >>> 0;
          break;
        default:
          throw new Error(`cbpf: alu op ${(code & 0xf0).toString(16)} at ${pc}`);
      }
    } else if (cls === 0x05) {
      const op = code & 0xf0;
      if (op === 0x00) {
        pc += k;
        continue;
      }
      const s = code & 0x08 ? X : k >>> 0;
      const t = op === 0x10 ? A === s : op === 0x20 ? A > s : op === 0x30 ? A >= s : op === 0x40 ? (A & s) !== 0 : null;
      if (t === null) throw new Error(`cbpf: jump op ${op.toString(16)} at ${pc}`);
      pc += t ? jt : jf;
    } else if (cls === 0x06) return (code & 0x18) === 0x10 ? A : k >>> 0;
    else if (cls === 0x07) {
      if ((code & 0xf8) === 0x00) X = A;
      else if ((code & 0xf8) === 0x80) A = X;
      else throw new Error(`cbpf: misc ${code.toString(16)} at ${pc}`);
    }
  }
  throw new Error('cbpf: ran past the last instruction');
}
