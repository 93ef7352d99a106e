// The MUX's east-west and Fastpath counters (docs/east-west.md), spread into MUX_COUNTER_NAMES. A leaf
// module (no imports), so the list can be built while data-plane.ts is being loaded.
export const EW_MUX_COUNTER_NAMES = [
  // VXLAN from a host to an internal VIP, placed and encapsulated to the DIP's host
  'ew_from_host',
  // redirects written after the client's ACK (TCP) or second datagram (UDP); sent by the daemon
  'redirects_sent',
  // a redirect the source host's MAC was unknown for, or without the policy key
  'redirects_skipped',
  // a UDP flow redirected before its fastpathUdpDatagrams-th datagram: the per-flow count table was full
  'ew_udp_count_full',
  'drop_ew_truncated',
  'drop_ew_unknown_host',
  // host VXLAN from a host's PA but not from the MAC that PA resolves to (docs/security.md), or before it resolved
  'drop_ew_spoofed_source',
  'drop_ew_source_unresolved',
  'drop_ew_bad_vxlan',
  'drop_ew_inner_not_ip',
  'drop_ew_not_internal_vip',
  'drop_ew_wrong_vni',
  'drop_ew_fragment',
  // a redirect the kernel refused to send (the daemon's send on the capture handle)
  'send_error_redirect',
] as const;
