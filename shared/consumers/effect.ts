import type { PipelineCloudEvent } from '../events/schemas';

/** What the inbox hands an effect: the attempt number, and a signal raised if the lease is lost. */
export interface EffectContext {
  readonly attempt: number;
  readonly signal: AbortSignal;
}

/** What an effect did, for the consumer's log line (e.g. `{ outcome: 'stale' }`). */
export type EffectResult = Readonly<Record<string, unknown>>;

/**
 * A consumer's side effect for one valid event. It must be idempotent on its own (a version
 * condition, a deterministic key, a dedup id): the inbox runs it at most once per completed
 * attempt, but a crash between the effect and the inbox's completion runs it again.
 */
export type ConsumerEffect = (event: PipelineCloudEvent, ctx: EffectContext) => Promise<EffectResult>;
