import * as z from 'zod';

/**
 * Which guarantee profile runs: `short` inside `npm test` (every scenario, small and quick), or
 * `full` from `npm run test:guarantees` (bigger scenarios, both DynamoDB engines where one would
 * do, and the soak).
 */
export const guaranteesProfile = z
  .enum(['short', 'full'])
  .default('short')
  .parse(process.env.GUARANTEES_PROFILE?.trim() || undefined);

export const fullProfile = guaranteesProfile === 'full';

/** Picks the short or the full figure. */
export const sized = <T>(short: T, full: T): T => (fullProfile ? full : short);

/**
 * How long a scenario's pipeline may take to go quiet after its fault: a bound on a pipeline
 * that never converges, not a speed. The scenarios run the real pipeline on its own (compressed)
 * timing, leases and retry pauses of real time, so nothing but waiting can tell they are done.
 * Each short scenario's test took under 35 s beside other suites (load average 13 to 21 on 2
 * cores), and several missed the former 30 s bound with CPU burners added: this one is an order
 * of magnitude above the first figure.
 */
export const settleTimeoutMs = sized(300_000, 900_000);

/** The vitest timeout of one scenario: setup, the run, the settle and the check. */
export const scenarioTimeoutMs = sized(450_000, 1_200_000);
