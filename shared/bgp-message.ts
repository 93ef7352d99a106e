// BGP-4 message header (RFC 4271 4.1), KEEPALIVE (4.4) and NOTIFICATION (4.5), and the error codes
// every BGP parser returns. A parse returns bytes consumed (>= 0) or a negative error code that names
// the NOTIFICATION RFC 4271 section 6 prescribes: -(code << 8 | subcode), so -258 is "Message Header
// Error / Bad Message Length". ERR_TRUNCATED (-1) means "not enough bytes yet" (a stream reader waits).
// OPEN lives in bgp-open.ts, UPDATE in bgp-update.ts. Pure: no sockets, no timers, no logging.
import { readU16, writeU16 } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';

export const BGP_PORT = 179;
export const BGP_MARKER_LEN = 16;
export const BGP_HEADER_LEN = 19;
/** RFC 4271 4.1: no message is longer (RFC 8654 extended messages are not negotiated). */
export const BGP_MAX_MESSAGE_LEN = 4096;
export const BGP_VERSION = 4;

export const BGP_TYPE_OPEN = 1;
export const BGP_TYPE_UPDATE = 2;
export const BGP_TYPE_NOTIFICATION = 3;
export const BGP_TYPE_KEEPALIVE = 4;

/** Smallest message of each type (RFC 4271 4.2-4.5). */
export const BGP_OPEN_MIN_LEN = 29;
export const BGP_UPDATE_MIN_LEN = 23;
export const BGP_NOTIFICATION_MIN_LEN = 21;
export const BGP_KEEPALIVE_LEN = 19;

// NOTIFICATION error codes (RFC 4271 4.5) and subcodes (6.1-6.7; RFC 4486 Cease; RFC 6608 FSM)
export const BGP_ERROR_HEADER = 1;
export const BGP_ERROR_OPEN = 2;
export const BGP_ERROR_UPDATE = 3;
export const BGP_ERROR_HOLD_TIMER = 4;
export const BGP_ERROR_FSM = 5;
export const BGP_ERROR_CEASE = 6;

export const BGP_CEASE_MAX_PREFIXES = 1;
export const BGP_CEASE_ADMIN_SHUTDOWN = 2;
export const BGP_CEASE_PEER_DECONFIGURED = 3;
export const BGP_CEASE_ADMIN_RESET = 4;
export const BGP_CEASE_CONNECTION_REJECTED = 5;
export const BGP_CEASE_CONFIG_CHANGE = 6;
export const BGP_CEASE_COLLISION = 7;
export const BGP_CEASE_OUT_OF_RESOURCES = 8;
/** RFC 9384. */
export const BGP_CEASE_BFD_DOWN = 10;

/** RFC 6608: "Receive Unexpected Message in OpenSent / OpenConfirm / Established". */
export const BGP_FSM_UNEXPECTED_IN_OPENSENT = 1;
export const BGP_FSM_UNEXPECTED_IN_OPENCONFIRM = 2;
export const BGP_FSM_UNEXPECTED_IN_ESTABLISHED = 3;

const err = (code: number, subcode: number) => -((code << 8) | subcode);

// Message Header Error (RFC 4271 6.1)
export const BGP_ERR_NOT_SYNCHRONIZED = err(1, 1);
export const BGP_ERR_BAD_MESSAGE_LENGTH = err(1, 2);
export const BGP_ERR_BAD_MESSAGE_TYPE = err(1, 3);
// OPEN Message Error (6.2; 7 from RFC 5492)
export const BGP_ERR_OPEN_MALFORMED = err(2, 0);
export const BGP_ERR_UNSUPPORTED_VERSION = err(2, 1);
export const BGP_ERR_BAD_PEER_AS = err(2, 2);
export const BGP_ERR_BAD_BGP_ID = err(2, 3);
export const BGP_ERR_UNSUPPORTED_OPT_PARAM = err(2, 4);
export const BGP_ERR_UNACCEPTABLE_HOLD_TIME = err(2, 6);
export const BGP_ERR_UNSUPPORTED_CAPABILITY = err(2, 7);
// UPDATE Message Error (6.3)
export const BGP_ERR_MALFORMED_ATTRIBUTE_LIST = err(3, 1);
export const BGP_ERR_UNRECOGNIZED_WELL_KNOWN = err(3, 2);
export const BGP_ERR_MISSING_WELL_KNOWN = err(3, 3);
export const BGP_ERR_ATTRIBUTE_FLAGS = err(3, 4);
export const BGP_ERR_ATTRIBUTE_LENGTH = err(3, 5);
export const BGP_ERR_INVALID_ORIGIN = err(3, 6);
export const BGP_ERR_INVALID_NEXT_HOP = err(3, 8);
export const BGP_ERR_OPTIONAL_ATTRIBUTE = err(3, 9);
export const BGP_ERR_INVALID_NETWORK_FIELD = err(3, 10);
export const BGP_ERR_MALFORMED_AS_PATH = err(3, 11);

const ERROR_NAMES: Record<number, string> = {
  [ERR_TRUNCATED]: 'truncated',
  [BGP_ERR_NOT_SYNCHRONIZED]: 'connection_not_synchronized',
  [BGP_ERR_BAD_MESSAGE_LENGTH]: 'bad_message_length',
  [BGP_ERR_BAD_MESSAGE_TYPE]: 'bad_message_type',
  [BGP_ERR_OPEN_MALFORMED]: 'open_malformed',
  [BGP_ERR_UNSUPPORTED_VERSION]: 'unsupported_version_number',
  [BGP_ERR_BAD_PEER_AS]: 'bad_peer_as',
  [BGP_ERR_BAD_BGP_ID]: 'bad_bgp_identifier',
  [BGP_ERR_UNSUPPORTED_OPT_PARAM]: 'unsupported_optional_parameter',
  [BGP_ERR_UNACCEPTABLE_HOLD_TIME]: 'unacceptable_hold_time',
  [BGP_ERR_UNSUPPORTED_CAPABILITY]: 'unsupported_capability',
  [BGP_ERR_MALFORMED_ATTRIBUTE_LIST]: 'malformed_attribute_list',
  [BGP_ERR_UNRECOGNIZED_WELL_KNOWN]: 'unrecognized_well_known_attribute',
  [BGP_ERR_MISSING_WELL_KNOWN]: 'missing_well_known_attribute',
  [BGP_ERR_ATTRIBUTE_FLAGS]: 'attribute_flags_error',
  [BGP_ERR_ATTRIBUTE_LENGTH]: 'attribute_length_error',
  [BGP_ERR_INVALID_ORIGIN]: 'invalid_origin_attribute',
  [BGP_ERR_INVALID_NEXT_HOP]: 'invalid_next_hop_attribute',
  [BGP_ERR_OPTIONAL_ATTRIBUTE]: 'optional_attribute_error',
  [BGP_ERR_INVALID_NETWORK_FIELD]: 'invalid_network_field',
  [BGP_ERR_MALFORMED_AS_PATH]: 'malformed_as_path',
};

/** Name of a negative BGP parse result, e.g. 'bad_message_length'. */
export function bgpErrorName(e: number): string {
  return ERROR_NAMES[e] ?? `bgp_error_${-e >> 8}_${-e & 0xff}`;
}

/** The NOTIFICATION (code, subcode) a negative parse result stands for; null for ERR_TRUNCATED and non-errors. */
export function bgpErrorNotification(e: number): { code: number; subcode: number } | null {
  if (e >= 0 || e === ERR_TRUNCATED || -e < 256) return null;
  return { code: (-e >> 8) & 0xff, subcode: -e & 0xff };
}

const CODE_NAMES: Record<number, string> = {
  1: 'Message Header Error',
  2: 'OPEN Message Error',
  3: 'UPDATE Message Error',
  4: 'Hold Timer Expired',
  5: 'Finite State Machine Error',
  6: 'Cease',
};
const SUBCODE_NAMES: Record<number, Record<number, string>> = {
  1: { 1: 'Connection Not Synchronized', 2: 'Bad Message Length', 3: 'Bad Message Type' },
  2: {
    0: 'Unspecific',
    1: 'Unsupported Version Number',
    2: 'Bad Peer AS',
    3: 'Bad BGP Identifier',
    4: 'Unsupported Optional Parameter',
    6: 'Unacceptable Hold Time',
    7: 'Unsupported Capability',
  },
  3: {
    1: 'Malformed Attribute List',
    2: 'Unrecognized Well-known Attribute',
    3: 'Missing Well-known Attribute',
    4: 'Attribute Flags Error',
    5: 'Attribute Length Error',
    6: 'Invalid ORIGIN Attribute',
    8: 'Invalid NEXT_HOP Attribute',
    9: 'Optional Attribute Error',
    10: 'Invalid Network Field',
    11: 'Malformed AS_PATH',
  },
  5: {
    0: 'Unspecified Error',
    1: 'Receive Unexpected Message in OpenSent State',
    2: 'Receive Unexpected Message in OpenConfirm State',
    3: 'Receive Unexpected Message in Established State',
  },
  6: {
    1: 'Maximum Number of Prefixes Reached',
    2: 'Administrative Shutdown',
    3: 'Peer De-configured',
    4: 'Administrative Reset',
    5: 'Connection Rejected',
    6: 'Other Configuration Change',
    7: 'Connection Collision Resolution',
    8: 'Out of Resources',
    10: 'BFD Down',
  },
};

/** "Cease / Administrative Shutdown", for logs. */
export function bgpNotificationName(code: number, subcode: number): string {
  const c = CODE_NAMES[code] ?? `error code ${code}`;
  const s = SUBCODE_NAMES[code]?.[subcode] ?? (subcode === 0 ? 'Unspecific' : `subcode ${subcode}`);
  return `${c} / ${s}`;
}

// ---------------------------------------------------------------------------------------------
// Header

export interface BgpHeader {
  /** Whole message, header included: 19..4096. */
  length: number;
  type: number;
}

export function newBgpHeader(): BgpHeader {
  return { length: 0, type: 0 };
}

/**
 * Parses and checks the 19-byte header at `off` (RFC 4271 6.1): marker all ones, length 19..4096 and
 * within the bounds of its type, a known type. Returns 19, ERR_TRUNCATED when fewer than 19 bytes are
 * available, or a Message Header Error. It does not need the body: a stream reader calls it as soon as
 * 19 bytes are in and then waits for `length`.
 */
export function parseBgpHeader(buf: Uint8Array, off: number, out: BgpHeader, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < BGP_HEADER_LEN) return ERR_TRUNCATED;
  for (let i = 0; i < BGP_MARKER_LEN; i++) if (buf[off + i] !== 0xff) return BGP_ERR_NOT_SYNCHRONIZED;
  const length = readU16(buf, off + 16);
  const type = buf[off + 18]!;
  out.length = length;
  out.type = type;
  if (length < BGP_HEADER_LEN || length > BGP_MAX_MESSAGE_LEN) return BGP_ERR_BAD_MESSAGE_LENGTH;
  switch (type) {
    case BGP_TYPE_OPEN:
      if (length < BGP_OPEN_MIN_LEN) return BGP_ERR_BAD_MESSAGE_LENGTH;
      break;
    case BGP_TYPE_UPDATE:
      if (length < BGP_UPDATE_MIN_LEN) return BGP_ERR_BAD_MESSAGE_LENGTH;
      break;
    case BGP_TYPE_NOTIFICATION:
      if (length < BGP_NOTIFICATION_MIN_LEN) return BGP_ERR_BAD_MESSAGE_LENGTH;
      break;
    case BGP_TYPE_KEEPALIVE:
      if (length !== BGP_KEEPALIVE_LEN) return BGP_ERR_BAD_MESSAGE_LENGTH;
      break;
    default:
      return BGP_ERR_BAD_MESSAGE_TYPE;
  }
  return BGP_HEADER_LEN;
}

/** Writes marker, length and type; returns 19. */
export function writeBgpHeader(h: BgpHeader, buf: Uint8Array, off: number): number {
  for (let i = 0; i < BGP_MARKER_LEN; i++) buf[off + i] = 0xff;
  writeU16(buf, off + 16, h.length);
  buf[off + 18] = h.type & 0xff;
  return BGP_HEADER_LEN;
}

/**
 * The data of the NOTIFICATION for a header error (RFC 4271 6.1): Bad Message Length carries the
 * erroneous length field, Bad Message Type the type byte. Call it after parseBgpHeader failed.
 */
export function bgpHeaderErrorData(e: number, buf: Uint8Array, off: number): Uint8Array {
  if (e === BGP_ERR_BAD_MESSAGE_LENGTH) return buf.slice(off + 16, off + 18);
  if (e === BGP_ERR_BAD_MESSAGE_TYPE) return buf.slice(off + 18, off + 19);
  return new Uint8Array(0);
}

// ---------------------------------------------------------------------------------------------
// KEEPALIVE: the header alone

export function writeBgpKeepalive(buf: Uint8Array, off: number): number {
  return writeBgpHeader({ length: BGP_KEEPALIVE_LEN, type: BGP_TYPE_KEEPALIVE }, buf, off);
}

// ---------------------------------------------------------------------------------------------
// NOTIFICATION

export interface BgpNotification {
  code: number;
  subcode: number;
  data: Uint8Array;
}

export function newBgpNotification(): BgpNotification {
  return { code: 0, subcode: 0, data: new Uint8Array(0) };
}

/** Parses a whole NOTIFICATION message (header included) at `off`; returns its length or an error. */
export function parseBgpNotification(buf: Uint8Array, off: number, out: BgpNotification, end = buf.length): number {
  const h = newBgpHeader();
  const r = parseBgpHeader(buf, off, h, end);
  if (r < 0) return r;
  if (h.type !== BGP_TYPE_NOTIFICATION) return BGP_ERR_BAD_MESSAGE_TYPE;
  if (end - off < h.length) return ERR_TRUNCATED;
  out.code = buf[off + 19]!;
  out.subcode = buf[off + 20]!;
  out.data = buf.slice(off + 21, off + h.length);
  return h.length;
}

/** Bytes a NOTIFICATION takes (data cut so that the message fits in 4096). */
export function bgpNotificationLength(n: BgpNotification): number {
  return Math.min(BGP_MAX_MESSAGE_LEN, BGP_NOTIFICATION_MIN_LEN + n.data.length);
}

export function writeBgpNotification(n: BgpNotification, buf: Uint8Array, off: number): number {
  const len = bgpNotificationLength(n);
  writeBgpHeader({ length: len, type: BGP_TYPE_NOTIFICATION }, buf, off);
  buf[off + 19] = n.code & 0xff;
  buf[off + 20] = n.subcode & 0xff;
  buf.set(n.data.subarray(0, len - BGP_NOTIFICATION_MIN_LEN), off + 21);
  return len;
}

/** RFC 9003: most bytes of a shutdown communication. */
export const BGP_SHUTDOWN_MESSAGE_MAX = 255;

/**
 * The data of a Cease / Administrative Shutdown or Reset with a shutdown communication (RFC 9003):
 * one length byte and up to 255 bytes of UTF-8, cut at a character boundary.
 */
export function bgpShutdownData(message: string): Uint8Array {
  let bytes = new TextEncoder().encode(message);
  if (bytes.length > BGP_SHUTDOWN_MESSAGE_MAX) {
    let cut = BGP_SHUTDOWN_MESSAGE_MAX;
    while (cut > 0 && (bytes[cut]! & 0xc0) === 0x80) cut--; // not inside a UTF-8 sequence
    bytes = bytes.slice(0, cut);
  }
  const out = new Uint8Array(1 + bytes.length);
  out[0] = bytes.length;
  out.set(bytes, 1);
  return out;
}

/** The shutdown communication of a Cease 2/4 NOTIFICATION's data (RFC 9003), or null when there is none or it is malformed. */
export function parseBgpShutdownData(data: Uint8Array): string | null {
  if (data.length < 1 || data[0]! === 0 || data[0]! + 1 > data.length) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(data.subarray(1, 1 + data[0]!));
  } catch {
    return null;
  }
}

/** A whole message in a new buffer (for the speaker's sends). */
export function encodeBgpNotification(n: BgpNotification): Uint8Array {
  const b = new Uint8Array(bgpNotificationLength(n));
  writeBgpNotification(n, b, 0);
  return b;
}

export function encodeBgpKeepalive(): Uint8Array {
  const b = new Uint8Array(BGP_KEEPALIVE_LEN);
  writeBgpKeepalive(b, 0);
  return b;
}
