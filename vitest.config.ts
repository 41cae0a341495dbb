import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts', 'test/support/dynamo-global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores here and in CI: more workers only fight over PostgreSQL.
    maxWorkers: 2,
  },
});
