import { topology } from '../../functions/topology';
import type { ConsumerDefinition } from '../../shared/consumers/define-consumer';
import type { ConsumerName, EventType, Topology } from '../../shared/topology';

/*
 * What a test expects of every consumer, read from the project's topology rather than listed:
 * a consumer added to `functions/consumers/` and its registry changes these values and no test.
 * A test names a consumer only where it tests that consumer's own behaviour.
 */

/** The consumers of `t`'s registry that subscribe to `type`, in the registry's order. */
export function subscribersOf(type: EventType, t: Topology = topology): readonly ConsumerDefinition[] {
  return t.registry.filter((c) => c.subscribes.includes(type));
}

/** The names of the consumers that subscribe to `type`, in the registry's order. */
export function subscriberNames(type: EventType, t: Topology = topology): ConsumerName[] {
  return subscribersOf(type, t).map((c) => c.name);
}

/**
 * One entry per consumer of `t` (`t.consumerNames`, in the registry's order): `value`, or what
 * `value` gives for the consumer's name.
 */
export function perConsumer<V>(
  value: V | ((consumer: ConsumerName) => V),
  t: Topology = topology,
): Record<ConsumerName, V> {
  const of = typeof value === 'function' ? (value as (consumer: ConsumerName) => V) : () => value;
  return Object.fromEntries(t.consumerNames.map((c) => [c, of(c)]));
}

/** Every effect counter of `t` (what `/ops/status`'s `effects` lists), each `value`. */
export function everyCounter(value: number, t: Topology = topology): Record<string, number> {
  return Object.fromEntries(t.registry.flatMap((c) => Object.keys(c.counters).map((name) => [name, value])));
}

/**
 * `/ops/status`'s `effects` after `n` approvals of `n` distinct tasks (and nothing else): each
 * counter of each consumer that subscribes to `content.approved` is `n`, every other counter 0.
 * The project's counters (a document indexed, a notification sent, an object archived) and the
 * fixture consumer's (a translation stored, announced, its rendition put) each count one per
 * approval of a distinct task; a consumer whose counters count otherwise needs its own figure.
 */
export function approvalEffects(n: number, t: Topology = topology): Record<string, number> {
  return Object.fromEntries(
    t.registry.flatMap((c) =>
      Object.keys(c.counters).map((name) => [name, c.subscribes.includes(t.eventTypes.approved) ? n : 0]),
    ),
  );
}

/** The names of `t`'s effect counters that count approvals (see {@link approvalEffects}). */
export function approvalCounters(t: Topology = topology): string[] {
  return subscribersOf(t.eventTypes.approved, t).flatMap((c) => Object.keys(c.counters));
}

/**
 * Per consumer, the events it has processed after `n` approvals (and nothing else): `n` for each
 * consumer that subscribes to `content.approved`, 0 for every other.
 */
export function approvalsProcessed(n: number, t: Topology = topology): Record<ConsumerName, number> {
  const subscribers = subscriberNames(t.eventTypes.approved, t);
  return perConsumer((c) => (subscribers.includes(c) ? n : 0), t);
}
