// BFD (RFC 5880) control packets and the session state machine, for the MUX's BGP sessions: asynchronous
// mode, single hop (RFC 5881: UDP destination port 3784, source port 49152-65535, TTL 255), no
// authentication, no echo, no demand mode. The codec follows the codec pattern (parse returns bytes or a
// negative error); the session is a pure function of (session, event) like the BGP FSM. The runtime
// (sockets, timers) is mux/bgp/bfd.ts.
import { readU32, writeU32 } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';

export const BFD_PORT = 3784;
/** RFC 5883 5: multihop control packets go to UDP port 4784 (so single-hop rules, TTL 255, do not apply). */
export const BFD_MULTIHOP_PORT = 4784;
export const BFD_SOURCE_PORT_MIN = 49152;
export const BFD_SOURCE_PORT_MAX = 65535;
export const BFD_VERSION = 1;
export const BFD_CONTROL_LEN = 24;
/** RFC 5881 5: single-hop packets are sent with TTL (hop limit) 255. */
export const BFD_TTL = 255;
/** RFC 5880 6.8.3: while not Up, transmit no faster than once a second. */
export const BFD_SLOW_TX_US = 1_000_000;

export const BFD_STATE_ADMIN_DOWN = 0;
export const BFD_STATE_DOWN = 1;
export const BFD_STATE_INIT = 2;
export const BFD_STATE_UP = 3;
export const BFD_STATE_NAMES = ['AdminDown', 'Down', 'Init', 'Up'] as const;

// RFC 5880 4.1: diagnostic codes (the ones slbx sets or reports)
export const BFD_DIAG_NONE = 0;
export const BFD_DIAG_DETECTION_EXPIRED = 1;
export const BFD_DIAG_NEIGHBOR_DOWN = 3;
export const BFD_DIAG_ADMIN_DOWN = 7;

export const BFD_FLAG_POLL = 0x20;
export const BFD_FLAG_FINAL = 0x10;
export const BFD_FLAG_CPI = 0x08;
export const BFD_FLAG_AUTH = 0x04;
export const BFD_FLAG_DEMAND = 0x02;
export const BFD_FLAG_MULTIPOINT = 0x01;

// Errors (RFC 5880 6.8.6: such packets are discarded); beyond the codec-error range
export const BFD_ERR_VERSION = -301;
export const BFD_ERR_LENGTH = -302;
export const BFD_ERR_DETECT_MULT = -303;
export const BFD_ERR_MULTIPOINT = -304;
export const BFD_ERR_MY_DISCRIMINATOR = -305;
export const BFD_ERR_AUTH = -306;

const NAMES: Record<number, string> = {
  [ERR_TRUNCATED]: 'truncated',
  [BFD_ERR_VERSION]: 'bad_version',
  [BFD_ERR_LENGTH]: 'bad_length',
  [BFD_ERR_DETECT_MULT]: 'zero_detect_mult',
  [BFD_ERR_MULTIPOINT]: 'multipoint',
  [BFD_ERR_MY_DISCRIMINATOR]: 'zero_my_discriminator',
  [BFD_ERR_AUTH]: 'authentication_not_configured',
};

export function bfdErrorName(e: number): string {
  return NAMES[e] ?? `bfd_error_${-e}`;
}

export interface BfdControl {
  version: number;
  diag: number;
  state: number;
  /** The P, F, C, A, D, M bits (BFD_FLAG_*). */
  flags: number;
  detectMult: number;
  myDiscriminator: number;
  yourDiscriminator: number;
  desiredMinTxUs: number;
  requiredMinRxUs: number;
  requiredMinEchoRxUs: number;
}

export function newBfdControl(): BfdControl {
  return {
    version: BFD_VERSION,
    diag: 0,
    state: BFD_STATE_DOWN,
    flags: 0,
    detectMult: 3,
    myDiscriminator: 0,
    yourDiscriminator: 0,
    desiredMinTxUs: 0,
    requiredMinRxUs: 0,
    requiredMinEchoRxUs: 0,
  };
}

/** Parses a control packet (RFC 5880 4.1) with the reception checks of 6.8.6 that need no session. */
export function parseBfdControl(buf: Uint8Array, off: number, out: BfdControl, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < BFD_CONTROL_LEN) return ERR_TRUNCATED;
  const version = buf[off]! >>> 5;
  if (version !== BFD_VERSION) return BFD_ERR_VERSION;
  const flags = buf[off + 1]! & 0x3f;
  const len = buf[off + 3]!;
  const minLen = (flags & BFD_FLAG_AUTH) !== 0 ? 26 : BFD_CONTROL_LEN;
  if (len < minLen || len > end - off) return BFD_ERR_LENGTH;
  if (buf[off + 2] === 0) return BFD_ERR_DETECT_MULT;
  if ((flags & BFD_FLAG_MULTIPOINT) !== 0) return BFD_ERR_MULTIPOINT;
  const my = readU32(buf, off + 4);
  if (my === 0) return BFD_ERR_MY_DISCRIMINATOR;
  if ((flags & BFD_FLAG_AUTH) !== 0) return BFD_ERR_AUTH; // no authentication is configured
  out.version = version;
  out.diag = buf[off]! & 0x1f;
  out.state = buf[off + 1]! >>> 6;
  out.flags = flags;
  out.detectMult = buf[off + 2]!;
  out.myDiscriminator = my;
  out.yourDiscriminator = readU32(buf, off + 8);
  out.desiredMinTxUs = readU32(buf, off + 12);
  out.requiredMinRxUs = readU32(buf, off + 16);
  out.requiredMinEchoRxUs = readU32(buf, off + 20);
  return len;
}

export function writeBfdControl(c: BfdControl, buf: Uint8Array, off: number): number {
  buf[off] = ((c.version & 7) << 5) | (c.diag & 0x1f);
  buf[off + 1] = ((c.state & 3) << 6) | (c.flags & 0x3f);
  buf[off + 2] = c.detectMult & 0xff;
  buf[off + 3] = BFD_CONTROL_LEN;
  writeU32(buf, off + 4, c.myDiscriminator >>> 0);
  writeU32(buf, off + 8, c.yourDiscriminator >>> 0);
  writeU32(buf, off + 12, c.desiredMinTxUs >>> 0);
  writeU32(buf, off + 16, c.requiredMinRxUs >>> 0);
  writeU32(buf, off + 20, c.requiredMinEchoRxUs >>> 0);
  return BFD_CONTROL_LEN;
}

// ---------------------------------------------------------------------------------------------
// The session (RFC 5880 6.2, 6.8): state, timers, poll sequence

export interface BfdSessionConfig {
  /** Desired min TX and required min RX once Up (microseconds). */
  readonly intervalUs: number;
  readonly detectMult: number;
  readonly myDiscriminator: number;
}

export interface BfdSession {
  readonly config: BfdSessionConfig;
  readonly state: number;
  readonly remoteState: number;
  readonly remoteDiscriminator: number;
  readonly diag: number;
  readonly remoteDesiredMinTxUs: number;
  readonly remoteRequiredMinRxUs: number;
  readonly remoteDetectMult: number;
  /** Our advertised desired min TX: BFD_SLOW_TX_US until Up (RFC 5880 6.8.3). */
  readonly desiredMinTxUs: number;
  /** A poll sequence is running (P set in our packets until a packet with F arrives). */
  readonly polling: boolean;
  /** Send one packet with F at once (the peer polled). */
  readonly sendFinal: boolean;
}

export type BfdEvent =
  { readonly type: 'rx'; readonly packet: BfdControl } | { readonly type: 'detectionTimeout' } | { readonly type: 'adminDown' };

export interface BfdStep {
  readonly next: BfdSession;
  /** The session went Up or left Up. */
  readonly up: boolean | null;
  /** Why the packet was discarded (RFC 5880 6.8.6), or null. */
  readonly discarded: string | null;
}

export function newBfdSession(config: BfdSessionConfig): BfdSession {
  return {
    config,
    state: BFD_STATE_DOWN,
    remoteState: BFD_STATE_DOWN,
    remoteDiscriminator: 0,
    diag: BFD_DIAG_NONE,
    remoteDesiredMinTxUs: BFD_SLOW_TX_US,
    remoteRequiredMinRxUs: 1,
    remoteDetectMult: 3,
    desiredMinTxUs: BFD_SLOW_TX_US,
    polling: false,
    sendFinal: false,
  };
}

/** RFC 5880 6.8.7: the interval between our packets (before jitter). */
export function bfdTxIntervalUs(s: BfdSession): number {
  return Math.max(s.desiredMinTxUs, s.remoteRequiredMinRxUs);
}

/** RFC 5880 6.8.4: how long without a packet before the session is down (asynchronous mode). */
export function bfdDetectionTimeUs(s: BfdSession): number {
  return s.remoteDetectMult * Math.max(s.config.intervalUs, s.remoteDesiredMinTxUs);
}

/** The packet we send now. */
export function bfdPacket(s: BfdSession, final = false): BfdControl {
  return {
    version: BFD_VERSION,
    diag: s.diag,
    state: s.state,
    flags: (s.polling && !final ? BFD_FLAG_POLL : 0) | (final ? BFD_FLAG_FINAL : 0),
    detectMult: s.config.detectMult,
    myDiscriminator: s.config.myDiscriminator,
    yourDiscriminator: s.remoteDiscriminator,
    desiredMinTxUs: s.desiredMinTxUs,
    requiredMinRxUs: s.config.intervalUs,
    requiredMinEchoRxUs: 0,
  };
}

export function stepBfdSession(s: BfdSession, e: BfdEvent): BfdStep {
  if (e.type === 'adminDown') {
    return {
      next: { ...s, state: BFD_STATE_ADMIN_DOWN, diag: BFD_DIAG_ADMIN_DOWN, polling: false },
      up: s.state === BFD_STATE_UP ? false : null,
      discarded: null,
    };
  }
  if (e.type === 'detectionTimeout') {
    if (s.state !== BFD_STATE_INIT && s.state !== BFD_STATE_UP) return { next: s, up: null, discarded: null };
    return {
      next: slow({ ...s, state: BFD_STATE_DOWN, diag: BFD_DIAG_DETECTION_EXPIRED, remoteDiscriminator: 0 }),
      up: s.state === BFD_STATE_UP ? false : null,
      discarded: null,
    };
  }
  const p = e.packet;
  // RFC 5880 6.8.6: a zero Your Discriminator is acceptable only in Down or AdminDown
  if (p.yourDiscriminator === 0 && p.state !== BFD_STATE_DOWN && p.state !== BFD_STATE_ADMIN_DOWN)
    return { next: s, up: null, discarded: 'zero_your_discriminator' };
  if (p.yourDiscriminator !== 0 && p.yourDiscriminator !== s.config.myDiscriminator)
    return { next: s, up: null, discarded: 'unknown_your_discriminator' };
  if (s.state === BFD_STATE_ADMIN_DOWN) return { next: s, up: null, discarded: 'admin_down' };
  let n: BfdSession = {
    ...s,
    remoteDiscriminator: p.myDiscriminator,
    remoteState: p.state,
    remoteDesiredMinTxUs: p.desiredMinTxUs,
    remoteRequiredMinRxUs: p.requiredMinRxUs,
    remoteDetectMult: p.detectMult,
    // a Final ends our poll sequence; a Poll wants a Final at once
    polling: s.polling && (p.flags & BFD_FLAG_FINAL) === 0,
    sendFinal: (p.flags & BFD_FLAG_POLL) !== 0,
  };
  const was = s.state;
  if (p.state === BFD_STATE_ADMIN_DOWN) {
    if (n.state !== BFD_STATE_DOWN) n = slow({ ...n, state: BFD_STATE_DOWN, diag: BFD_DIAG_NEIGHBOR_DOWN });
  } else if (n.state === BFD_STATE_DOWN) {
    if (p.state === BFD_STATE_DOWN) n = { ...n, state: BFD_STATE_INIT };
    else if (p.state === BFD_STATE_INIT) n = fast({ ...n, state: BFD_STATE_UP, diag: BFD_DIAG_NONE });
  } else if (n.state === BFD_STATE_INIT) {
    if (p.state === BFD_STATE_INIT || p.state === BFD_STATE_UP) n = fast({ ...n, state: BFD_STATE_UP, diag: BFD_DIAG_NONE });
  } else if (n.state === BFD_STATE_UP) {
    if (p.state === BFD_STATE_DOWN) n = slow({ ...n, state: BFD_STATE_DOWN, diag: BFD_DIAG_NEIGHBOR_DOWN });
  }
  const up = was !== BFD_STATE_UP && n.state === BFD_STATE_UP ? true : was === BFD_STATE_UP && n.state !== BFD_STATE_UP ? false : null;
  return { next: n, up, discarded: null };
}

/** Up: the configured interval, announced with a poll sequence (RFC 5880 6.8.3). */
function fast(s: BfdSession): BfdSession {
  return s.desiredMinTxUs === s.config.intervalUs ? s : { ...s, desiredMinTxUs: s.config.intervalUs, polling: true };
}

/** Not Up: back to one packet a second. */
function slow(s: BfdSession): BfdSession {
  return { ...s, desiredMinTxUs: BFD_SLOW_TX_US, polling: false };
}
