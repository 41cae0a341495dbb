import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { projectRoot } from '../constructs/pipeline-function';
import type { MeasuredCosts } from './model';

/**
 * Where the capacity model's measured inputs live: the database's cost per operation
 * (`npm run bench:statements` writes it) and the relay's drain under the latency
 * model (`npm run bench` writes `latest.json`). Re-run the benchmark after changing a
 * statement, and `npm run capacity` follows.
 */
export const statementCostsPath = join(projectRoot, 'bench', 'results', 'statements.json');
export const benchReportPath = join(projectRoot, 'bench', 'results', 'latest.json');

const cost = z.object({ dbCpuMs: z.number().nonnegative(), count: z.number().int().positive() });

/** What `bench/results/statements.json` holds. */
export const statementCostsSchema = z.object({
  measuredAt: z.string(),
  machine: z.string(),
  operations: z.object({
    approve: cost,
    relayDrainPerEvent: cost,
    taskRead: cost,
    purgePerRow: cost,
    relayNudge: cost,
    relayNudgeSkipped: cost,
  }),
});

export type StatementCosts = z.infer<typeof statementCostsSchema>;

const benchReportSchema = z.object({
  relayRoundTripsPer1000: z.number().positive(),
  latencyModel: z.object({ relayEventsPerSec: z.number().positive() }),
});

/** The measured inputs, from the benchmarks' result files; throws naming the file that is missing or malformed. */
export function readMeasuredCosts(): MeasuredCosts & { readonly measuredAt: string } {
  const parse = <T>(path: string, schema: z.ZodType<T>): T => {
    try {
      return schema.parse(JSON.parse(readFileSync(path, 'utf8')));
    } catch (err) {
      throw new Error(`cannot read ${path} (run the benchmark that writes it): ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
  const statements = parse(statementCostsPath, statementCostsSchema);
  const bench = parse(benchReportPath, benchReportSchema);
  const op = statements.operations;
  return {
    measuredAt: statements.measuredAt,
    dbCpuMs: {
      approve: op.approve.dbCpuMs,
      relayDrainPerEvent: op.relayDrainPerEvent.dbCpuMs,
      taskRead: op.taskRead.dbCpuMs,
      purgePerRow: op.purgePerRow.dbCpuMs,
      relayNudge: op.relayNudge.dbCpuMs,
      relayNudgeSkipped: op.relayNudgeSkipped.dbCpuMs,
    },
    relayEventsPerSecPerRun: bench.latencyModel.relayEventsPerSec,
    relayDataApiCallsPer1000: bench.relayRoundTripsPer1000,
  };
}
