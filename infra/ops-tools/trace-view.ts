import { consumerNames, topology } from '../../functions/topology';
import { matchesPattern } from '../../shared/events/event-pattern';
import type { ConsumerName } from '../../shared/topology';

/** Every consumer of the topology, in its declared order (the column order of traces and tables). */
export { consumerNames };

/**
 * The consumers the topology's rules route an event type to. A trace shows `null` for both "not
 * routed" and "not received yet"; this tells the two apart with the same matcher the local bus
 * uses, so the CLI and the dashboard cannot disagree with the bus about routing.
 */
export function routedConsumers(eventType: string): ConsumerName[] {
  const event = { source: topology.source, 'detail-type': eventType, detail: {} };
  const routed = new Set<ConsumerName>();
  for (const rule of topology.rules) {
    if (matchesPattern(rule.pattern, event)) for (const target of rule.targets) routed.add(target);
  }
  return consumerNames.filter((c) => routed.has(c));
}

/** Routing of every event type the pipeline publishes, as the dashboard page embeds it. */
export function routingTable(): Record<string, ConsumerName[]> {
  return Object.fromEntries(Object.values(topology.eventTypes).map((t) => [t, routedConsumers(t)]));
}

/** One consumer's inbox record for an event, as far as the ops API tells it. */
export interface InboxState {
  readonly status: string;
  readonly attempts: number | null;
  readonly lastError: string | null;
  readonly updatedAt: string | null;
}

/**
 * Reads an inbox record of a trace defensively: the ops API returns whatever the consumer side
 * stores, so missing or oddly typed fields become `null` instead of breaking the view.
 * `updatedAt` may be epoch milliseconds or an ISO string; both come back as ISO.
 */
export function inboxState(raw: unknown): InboxState | null {
  if (raw === null || typeof raw !== 'object') return null;
  const r = raw as Record<string, unknown>;
  const when = r.updatedAt;
  let updatedAt: string | null = null;
  if (typeof when === 'number' && Number.isFinite(when)) updatedAt = new Date(when).toISOString();
  else if (typeof when === 'string' && when !== '') updatedAt = when;
  return {
    status: typeof r.status === 'string' ? r.status : 'UNKNOWN',
    attempts: typeof r.attempts === 'number' ? r.attempts : null,
    lastError: typeof r.lastError === 'string' && r.lastError !== '' ? r.lastError : null,
    updatedAt,
  };
}
