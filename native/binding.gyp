{
  # slbx_ring: the optional batched packet I/O addon (see slbx_ring.c). Built by `npm run build:native`;
  # Linux only; needs libpcap's headers (Debian libpcap-dev) and Node's (node-gyp finds them).
  'targets': [
    {
      'target_name': 'slbx_ring',
      'sources': ['slbx_ring.c'],
      'defines': ['NAPI_VERSION=8'],
      'cflags': ['-O2', '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-missing-field-initializers'],
      'link_settings': { 'libraries': ['-lpcap'] },
    },
  ],
}
