import type { ConsumerName, RuleSpec } from '../topology';
import { matchesPattern } from './event-pattern';

/** One target an event goes to: the consumer a rule sends it to. */
export interface RouteTarget {
  readonly rule: string;
  readonly consumer: ConsumerName;
}

/**
 * The targets `event` (the EventBridge event JSON) goes to under `rules`: every target of every
 * rule whose pattern matches, in the rules' order, one per (rule, target). The one routing of
 * the pipeline: the local bus delivers by it, and the delivery audit expects by it what the
 * deployed rules should have delivered (the topology's, whatever was changed by hand).
 */
export function routeEvent(rules: readonly RuleSpec[], event: unknown): RouteTarget[] {
  return rules
    .filter((r) => matchesPattern(r.pattern, event))
    .flatMap((r) => r.targets.map((consumer) => ({ rule: r.name, consumer })));
}

/** The consumers `event` goes to under `rules`, each once. */
export function routedConsumers(rules: readonly RuleSpec[], event: unknown): ConsumerName[] {
  return [...new Set(routeEvent(rules, event).map((t) => t.consumer))];
}
