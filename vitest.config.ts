import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two projects, one run (`npm test` runs both): `unit` starts no engine (pure code, a few
    // seconds: `npm run test:unit`); `engines` runs against PostgreSQL and DynamoDB, which its
    // global setup starts once for all its files.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'engines',
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**'],
          globalSetup: ['test/support/global-setup.ts', 'test/support/dynamo-global-setup.ts'],
        },
      },
    ],
    // Bounds on a hang, not on speed: a test states its property and waits on events, so these
    // only end one that would never finish. A busy machine (CPU burners beside the suite, as in
    // `npm run test:loaded`, or other suites on the same cores) stretches every step: beside
    // other suites (load average 13 to 21 on 2 cores) the slowest tests without a bound of their
    // own took up to 40 s, and the CDK synthesis with bundling outlasted a 120 s beforeAll bound.
    // Tests that wait on the pipeline's own timing (a lease, a sweep) set their own bounds.
    testTimeout: 300_000,
    hookTimeout: 600_000,
    // expect.poll reads a browser page or another engine until it agrees; 1 s by default.
    expect: { poll: { timeout: 60_000 } },
    // Two cores here and in CI: more workers only fight over PostgreSQL.
    maxWorkers: 2,
  },
});
