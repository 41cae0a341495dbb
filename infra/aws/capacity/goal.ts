/**
 * The approval rate prod is built for: nothing of ours may limit it below this with AWS's default
 * quotas (test/infra/capacity.test.ts), and the tables are pre-warmed for it
 * (`prewarmApprovalsPerSecond`). One figure, read by the settings, the capacity model's warm
 * throughput and the tests.
 */
export const prodGoalApprovalsPerSec = 1_000;
