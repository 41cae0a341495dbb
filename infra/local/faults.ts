import * as z from 'zod';
import { configError, configFields } from '../../shared/env';
import { TransientError } from '../../shared/inbox/failure-kind';

/**
 * Fault injection for the local adapters only (the bus and the effects), never in handler
 * code: `PIPELINE_FAULTS="busReject=0.1,busAckLoss=0.05,busDuplicate=0.1,effectFailBefore=0.1,effectFailAfter=0.05"`
 * with `PIPELINE_FAULT_SEED` for a repeatable run.
 */
export interface FaultRates {
  /** The bus answers an entry with a failure and drops it. */
  readonly busReject: number;
  /** The bus delivers an entry but answers failure, so the relay publishes it again. */
  readonly busAckLoss: number;
  /** The bus delivers an entry twice. */
  readonly busDuplicate: number;
  /** An effect throws before acting. */
  readonly effectFailBefore: number;
  /** An effect acts and then throws: a crash before the inbox records completion. */
  readonly effectFailAfter: number;
}

export const noFaults: FaultRates = {
  busReject: 0,
  busAckLoss: 0,
  busDuplicate: 0,
  effectFailBefore: 0,
  effectFailAfter: 0,
};

const rate = z.coerce.number().min(0).max(1);
const faultSchema = z.strictObject({
  busReject: rate.optional(),
  busAckLoss: rate.optional(),
  busDuplicate: rate.optional(),
  effectFailBefore: rate.optional(),
  effectFailAfter: rate.optional(),
});

/** The CONFIG error for problems of `PIPELINE_FAULTS`, each `<fault>: <problem>` or the problem alone. */
const faultsError = (problems: readonly string[]) =>
  configError(
    'local runtime environment',
    problems.map((message) => ({ path: 'PIPELINE_FAULTS', message })),
  );

/**
 * Parses `PIPELINE_FAULTS`; an unknown name or a rate outside [0, 1] is a PipelineError CONFIG
 * naming it.
 */
export function parseFaults(spec: string | undefined): FaultRates {
  if (!spec?.trim()) return noFaults;
  const entries: Record<string, string> = {};
  for (const part of spec.split(',')) {
    const [name, value, ...rest] = part.split('=').map((s) => s.trim());
    // An empty rate is malformed, not 0: z.coerce.number would turn '' into 0 and hide the typo.
    if (!name || !value || rest.length > 0) throw faultsError([`"${part}" is not name=rate`]);
    entries[name] = value;
  }
  const parsed = faultSchema.safeParse(entries);
  if (!parsed.success) {
    throw faultsError(
      configFields(parsed.error).map((f) => (f.path ? `${f.path}: ${f.message}` : f.message)),
    );
  }
  return { ...noFaults, ...parsed.data };
}

/** A seeded PRNG (mulberry32): small, fast, and the same sequence for the same seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Draws fault decisions from one seeded sequence. */
export class FaultInjector {
  readonly random: () => number;
  constructor(
    readonly rates: FaultRates,
    seed: number = Date.now(),
  ) {
    this.random = seededRandom(seed);
  }
  /** True with the probability the named fault is configured at. */
  strikes(fault: keyof FaultRates): boolean {
    const p = this.rates[fault];
    return p > 0 && this.random() < p;
  }
  get active(): boolean {
    return Object.values(this.rates).some((r) => r > 0);
  }
}

/**
 * Thrown by a local effect when a fault is injected, so logs say it was on purpose. Transient,
 * as the outages it stands for are: the inbox retries it until the maximum event age.
 */
export class InjectedFaultError extends TransientError {
  override readonly name = 'InjectedFaultError';
}
