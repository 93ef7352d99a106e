// Codec error codes: every parseX returns bytes consumed (>= 0) or one of these negative codes,
// which a valid parse can never return. Names are used verbatim as drop-reason suffixes and in logs.

export const ERR_TRUNCATED = -1; // buffer ends before the header (or an embedded length) does
export const ERR_BAD_VERSION = -2; // IP version nibble does not match the codec
export const ERR_BAD_IHL = -3; // IPv4 IHL < 5 or beyond the buffer
export const ERR_BAD_TOTAL_LENGTH = -4; // IPv4 total length < IHL*4 or beyond the buffer
export const ERR_BAD_PAYLOAD_LENGTH = -5; // IPv6 payload length beyond the buffer
export const ERR_BAD_EXT_HEADER = -6; // IPv6 extension header malformed or out of order
export const ERR_TOO_MANY_EXT_HEADERS = -7; // more IPv6 extension headers than we walk
export const ERR_BAD_DATA_OFFSET = -8; // TCP data offset < 5 or beyond the segment
export const ERR_BAD_UDP_LENGTH = -9; // UDP length < 8 or beyond the datagram
export const ERR_BAD_VXLAN_FLAGS = -10; // VXLAN I flag not set
export const ERR_BAD_ARP = -11; // ARP not Ethernet/IPv4 or bad lengths
export const ERR_BAD_VLAN = -12; // more than one 802.1Q tag (QinQ is not supported)
export const ERR_BAD_PCAP = -13; // pcap file header or record malformed

/** The names, in code order (-1, -2, ...): the suffixes of the `drop_<layer>_<error>` counters. */
export const CODEC_ERROR_NAMES = [
  'truncated',
  'bad_version',
  'bad_ihl',
  'bad_total_length',
  'bad_payload_length',
  'bad_ext_header',
  'too_many_ext_headers',
  'bad_data_offset',
  'bad_udp_length',
  'bad_vxlan_flags',
  'bad_arp',
  'bad_vlan',
  'bad_pcap',
] as const;
export type CodecErrorName = (typeof CODEC_ERROR_NAMES)[number];

/** Name of a negative codec result, e.g. 'bad_ihl'. */
export function codecErrorName(code: number): string {
  return CODEC_ERROR_NAMES[-code - 1] ?? `error_${-code}`;
}
