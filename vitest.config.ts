import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // skip-summary: one line with the skipped tests and why; under CI a skip fails the run
    reporters: ['default', './test/helpers/skip-summary.ts'],
  },
});
