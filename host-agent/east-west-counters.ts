// The host agent's east-west and Fastpath counters (docs/east-west.md), spread into HOST_COUNTER_NAMES.
// A leaf module (no imports), so the counter list can be built while data-plane.ts is being loaded.
export const EW_HOST_COUNTER_NAMES = [
  // a VM's packet to an internal VIP, sent to a MUX / to the DIP's host after a redirect / delivered on this host
  'ew_to_mux',
  'ew_fastpath_out',
  'ew_fastpath_local',
  // a DIP's reply to an internal VIP's client: to the client's host / delivered on this host
  'ew_return',
  'ew_return_local',
  // a reply from an internal VIP of the port's network, delivered unchanged to the client VM
  'ew_reply_in',
  'ew_flow_table_full',
  // return-path entries and outbound NAT flows a rebuilt host flow table (a smaller bound or quota) could not take
  'host_flows_not_carried',
  'redirects_accepted',
  'redirects_repeated',
  'drop_out_ew_other_network',
  'drop_out_ew_no_rule',
  'drop_out_ew_fragment',
  'drop_out_ew_no_mux',
  'drop_out_ew_unknown_client',
  'drop_out_ew_peer_unresolved',
  'drop_out_ew_too_big',
  'drop_redirect_not_mux',
  'drop_redirect_malformed',
  'drop_redirect_bad_signature',
  'drop_redirect_expired',
  'drop_redirect_unbound',
  'drop_redirect_bad_target',
  // east-west VXLAN the kernel refused on the fabric interface (or no fabric capture: the udp receive path)
  'send_error_fabric',
] as const;
