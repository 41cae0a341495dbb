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

/** How long a scenario's pipeline may take to go quiet after its fault. */
export const settleTimeoutMs = sized(30_000, 180_000);

/** The vitest timeout of one scenario: setup, the run, the settle and the check. */
export const scenarioTimeoutMs = sized(60_000, 300_000);
